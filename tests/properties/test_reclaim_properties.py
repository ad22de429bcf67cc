"""Invariants of reclaim (docs/queues.md#reclaim) over random clusters of queues with running
pods: no queue reclaimed below its guaranteed amount, no protected pod taken (too young for
its queue's reclaimMinRuntime, inside its class's toleration window), no two queues taking
from each other in one run, running gangs taken whole, and the same decisions whatever the
order of the input. Every pod has priority 0, so every eviction is a reclaim."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.parse import format_time
from batchsched.objects.podgroup import GROUP_LABEL, group_key_of
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API
from batchsched.preemption.toleration_policy import PREFIXES
from tests.builders import node, pod, pod_group
from tests.conftest import NOW, objects_of, same_decisions_whatever_the_order, schedule

SETTINGS = settings(max_examples=50, deadline=None)
GPU = "nvidia.com/gpu"
LEAVES = ("a1", "a2", "b1")
PARENT = {"a1": "a", "a2": "a", "b1": "b"}
WINDOW = 1800  # the `guarded` class's toleration-seconds


def queue(name: str, parent: str, guaranteed: int, nominal: int, runtime: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resources": {GPU: {"guaranteed": guaranteed, "nominal": nominal}},
        "reclaimMinRuntime": f"{runtime}s",
    }
    if parent:
        spec["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


GUARDED = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {
        "name": "guarded",
        "annotations": {PREFIXES[0] + "toleration-seconds": str(WINDOW)},
    },
    "value": 0,
}


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    guaranteed = {leaf: draw(st.integers(0, 4)) for leaf in LEAVES}
    runtime = st.sampled_from((0, 600, 3600))
    manifests: list[dict[str, Any]] = [GUARDED]
    for root in ("a", "b"):
        total = sum(g for leaf, g in guaranteed.items() if PARENT[leaf] == root)
        manifests.append(queue(root, "", total, total + draw(st.integers(0, 8)), 0))
    for leaf in LEAVES:
        nominal = guaranteed[leaf] + draw(st.integers(0, 4))
        manifests.append(queue(leaf, PARENT[leaf], guaranteed[leaf], nominal, draw(runtime)))
    nodes = draw(st.integers(1, 4))
    free = {f"n{i}": 8 for i in range(nodes)}
    for name in free:
        manifests.append(node(name, cpu="16", nvidia_com__gpu="8"))

    def running(name: str, leaf: str, gpus: int, on: str, **kw: Any) -> dict[str, Any]:
        started = format_time(NOW - timedelta(minutes=draw(st.integers(1, 180))))
        klass = "guarded" if draw(st.booleans()) else ""
        labels = {QUEUE_LABEL: leaf, **kw.pop("labels", {})}
        return pod(
            name,
            node_name=on,
            phase="Running",
            labels=labels,
            priority_class=klass,
            scheduled_at=started,
            extra_requests={GPU: str(gpus)},
            **kw,
        )

    for g in range(draw(st.integers(0, 2))):  # running gangs of two, on two nodes if any
        leaf = draw(st.sampled_from(LEAVES))
        hosts = [n for n, room in free.items() if room >= 2][:2]
        if len(hosts) < 2:
            break
        manifests.append(pod_group(f"g{g}", 2))
        for m, host in enumerate(hosts):
            free[host] -= 2
            labels = {GROUP_LABEL: f"g{g}"}
            manifests.append(running(f"g{g}-{m}", leaf, 2, host, namespace="ml", labels=labels))
    # The nodes are full (else everyone's demand fits and no queue is above its share); one
    # queue borrows most: it runs three pods in four.
    borrower = draw(st.sampled_from(LEAVES))
    leaves = st.sampled_from((borrower, borrower, borrower, *LEAVES))
    count = 0
    for host in sorted(free):
        while free[host]:
            gpus = min(free[host], draw(st.integers(1, 4)))
            free[host] -= gpus
            manifests.append(running(f"run-{count}", draw(leaves), gpus, host))
            count += 1
    if draw(st.booleans()):  # a pending gang of two, in one queue through its group's label
        group = pod_group("wanted", 2)
        group["metadata"]["labels"] = {QUEUE_LABEL: draw(st.sampled_from(LEAVES))}
        manifests.append(group)
        gpus = str(draw(st.integers(1, 8)))
        for m in range(2):
            labels = {GROUP_LABEL: "wanted"}
            manifests.append(
                pod(f"wanted-{m}", namespace="ml", labels=labels, extra_requests={GPU: gpus})
            )
    for j in range(draw(st.integers(1, 6))):
        leaf = draw(st.sampled_from(LEAVES))
        gpus = str(draw(st.integers(1, 8)))
        created = f"2026-11-22T09:{j:02d}:00Z"  # the queue's order: by creation
        labels = {QUEUE_LABEL: leaf}
        manifests.append(
            pod(f"wait-{j}", labels=labels, created=created, extra_requests={GPU: gpus})
        )
    return manifests


@SETTINGS
@given(clusters())
def test_reclaim_keeps_its_rules(manifests: list[dict[str, Any]]) -> None:
    objects = objects_of(*manifests)
    result = schedule(*manifests)
    pods = {p.key: p for p in objects.pods}
    queues = {q.name: q for q in objects.queues}
    victims = {e.pod: e for e in result.evictions}
    assert all(e.reclaim is not None for e in result.evictions)  # priorities are all 0

    # No protected pod: old enough for its queue, outside its class's toleration window.
    for key in victims:
        victim = pods[key]
        leaf = _leaf(victim, objects)
        assert victim.start_time is not None
        age = (NOW - victim.start_time).total_seconds()
        assert age >= queues[leaf].reclaim_min_runtime, (key, age)
        if victim.priority_class_name == "guarded":
            assert age >= WINDOW, (key, age)

    # No queue falls below guaranteed: where reclaim took from it, what it ends with once
    # the preemptors bind where the victims made room for them (a gang's: all its members)
    # is its guaranteed amount at least, or no less than it held (a queue below guaranteed
    # already, say a common ancestor whose children trade, may stay there).
    final: dict[str, int] = {}
    before: dict[str, int] = {}
    taken: set[str] = set()
    bound = {b.pod for b in result.bindings}
    groups = {group_key_of(pods[e.preemptor]) for e in result.evictions} - {None}
    coming = {e.preemptor for e in result.evictions}
    coming |= {key for key, p in pods.items() if group_key_of(p) in groups and not p.node_name}
    for key, p in pods.items():
        leaf = _leaf(p, objects)
        if leaf and p.node_name:
            for name in (leaf, PARENT[leaf]):
                before[name] = before.get(name, 0) + p.requests.get(GPU, 0)
        placed = (p.node_name and key not in victims) or key in bound or key in coming
        if not leaf or not placed:
            continue
        for name in (leaf, PARENT[leaf]):
            final[name] = final.get(name, 0) + p.requests.get(GPU, 0)
    for key in victims:
        leaf = _leaf(pods[key], objects)
        taken |= {leaf, PARENT[leaf]}
    for name in taken:
        kept = min(queues[name].resources[GPU].guaranteed, before.get(name, 0))
        assert final.get(name, 0) >= kept, (name, before, final)

    # No two queues take from each other.
    pairs = {e.reclaim for e in result.evictions}
    assert not any((theirs, mine) in pairs for mine, theirs in pairs if mine != theirs)

    # The pending gang binds whole or not at all.
    assert len({"ml/wanted-0", "ml/wanted-1"} & bound) in (0, 2)

    # Running gangs go whole.
    for key in victims:
        group = group_key_of(pods[key])
        if group is not None:
            members = [k for k, p in pods.items() if group_key_of(p) == group and p.node_name]
            assert all(m in victims for m in members), (group, members)


@settings(max_examples=20, deadline=None)
@given(clusters(), st.integers(0, 2**16))
def test_reclaim_decides_the_same_whatever_the_order(
    manifests: list[dict[str, Any]], seed: int
) -> None:
    assert same_decisions_whatever_the_order(manifests, seed)


def _leaf(pod: Any, objects: Any) -> str:
    """The pod's leaf queue: its own label, else its group's."""
    group = next((g for g in objects.pod_groups if g.key == group_key_of(pod)), None)
    own = pod.labels.get(QUEUE_LABEL, "")
    return str(own or (group.labels.get(QUEUE_LABEL, "") if group is not None else ""))
