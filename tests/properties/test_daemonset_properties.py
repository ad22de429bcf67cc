"""Invariants of DaemonSet preemption end to end (one-shot, start delay 0), over random nodes
filled with running pods of every victim class and a DaemonSet rolled out onto them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import run
from batchsched.config import parse_config
from tests.builders import Manifest, node, pod, priority_class
from tests.conftest import NOW, objects_of

OPT_OUT = {"yunikorn.apache.org/allow-preemption": "false"}
TOLERANT = {
    "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "100000",
    "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "-1",
}
KINDS = ("regular", "opt-out", "owner", "daemonset", "exempt", "high")


def pinned(on: str) -> dict[str, Any]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [on]}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def daemonset_owned(manifest: Manifest, name: str) -> Manifest:
    manifest["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": name, "uid": name}]
    return manifest


@st.composite
def rollouts(draw: st.DrawFn) -> list[Manifest]:
    manifests = [priority_class("tolerant", 10, annotations=TOLERANT)]
    for i in range(draw(st.integers(1, 3))):
        name = f"n{i}"
        manifests.append(node(name, cpu="4", memory="8Gi", pods="8"))
        used = 0
        for j in range(draw(st.integers(0, 6))):
            cpu = draw(st.sampled_from([250, 500, 1000, 2000]))
            if used + cpu > 4000:
                break
            used += cpu
            kind = draw(st.sampled_from(KINDS))
            running = pod(
                f"{name}-p{j}",
                cpu=f"{cpu}m",
                memory=f"{cpu * 2048 // 1000}Mi",  # 2Gi per CPU: memory fills with CPU
                node_name=name,
                priority=5000 if kind == "high" else draw(st.integers(0, 2)),
                labels=OPT_OUT if kind == "opt-out" else None,
                created=f"2026-11-22T0{draw(st.integers(0, 9))}:00:00Z",
                scheduled_at="2026-11-22T08:00:00Z",
            )
            if kind == "exempt":
                del running["spec"]["priority"]
                running["spec"]["priorityClassName"] = "tolerant"
            if kind == "daemonset":
                daemonset_owned(running, "exporter")
            if kind == "owner":
                # A finished child still names its owner and holds no room.
                child = pod(f"{name}-p{j}-child", node_name=name, phase="Succeeded")
                child["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": f"{name}-p{j}"}]
                manifests.append(child)
            manifests.append(running)
        agent = pod(
            f"agent-{name}",
            cpu=f"{draw(st.sampled_from([250, 500, 1000]))}m",
            memory="1Gi",
            priority=1000,
            affinity=pinned(name),
        )
        manifests.append(daemonset_owned(agent, "agent"))
    return manifests


CONFIG = parse_config(
    {
        "profiles": [
            {
                "pluginConfig": [
                    {
                        "name": "DaemonSetPreemption",
                        "args": {"preemptionStartDelaySeconds": 0, "maxVictims": 3},
                    }
                ]
            }
        ]
    }
)


@settings(max_examples=80, deadline=None)
@given(rollouts())
def test_rollout_evicts_only_allowed_pods_on_the_agents_node_and_never_overcommits(
    manifests: list[Manifest],
) -> None:
    objects = objects_of(*manifests)
    result = run(objects, CONFIG, NOW)
    pods = {p.key: p for p in objects.pods}
    for binding in result.bindings:
        agent = pods[binding.pod]
        assert binding.node == agent.name.removeprefix("agent-")
    for eviction in result.evictions:
        victim, agent = pods[eviction.pod], pods[eviction.preemptor]
        assert eviction.node == victim.node_name == agent.name.removeprefix("agent-")
        assert not any(ref.kind == "DaemonSet" for ref in victim.owner_references)
        assert victim.priority_class_name != "tolerant"
        assert (victim.priority or 0) <= 1000
    evicted = {e.pod for e in result.evictions}
    placed = {
        p.key: p.node_name
        for p in objects.pods
        if p.node_name and not p.terminated and p.key not in evicted
    }
    placed.update({b.pod: b.node for b in result.bindings})
    for n in objects.nodes:
        on_node = [pods[key] for key, where in placed.items() if where == n.name]
        for resource, capacity in n.allocatable.items():
            assert sum(p.requests.get(resource, 0) for p in on_node) <= capacity, (n.name, resource)
    # Every agent is bound, or it explains why it is not and holds its node.
    for key, message in result.unschedulable.items():
        assert "preemption: node" in message, message
        assert any(r.pod == key for r in result.reservations.values())
