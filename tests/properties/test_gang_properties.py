"""Invariants of gang scheduling, over random clusters of PodGroups, pass by pass."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Evict
from batchsched.objects.podgroup import GROUP_ANNOTATION, GROUP_LABEL, group_key_of
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, pod_group, priority_class, upstream_group
from tests.conftest import NOW, objects_of, same_decisions_whatever_the_order, schedule

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def gang_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    manifests: list[dict[str, Any]] = [priority_class("low", 10), priority_class("high", 1000)]
    for i in range(draw(st.integers(1, 5))):
        manifests.append(
            node(
                f"n{i}",
                cpu=draw(st.sampled_from(["2", "4", "8"])),
                pods=str(draw(st.integers(2, 6))),
            )
        )
    for g in range(draw(st.integers(1, 4))):
        name = f"g{g}"
        min_member = draw(st.integers(1, 4))
        api = draw(st.sampled_from(["crd", "v1alpha2", "v1beta1"]))  # the CRD or upstream's
        if draw(st.integers(0, 5)):  # mostly, the PodGroup exists
            spec: dict[str, Any] = {}
            if api != "crd":
                basic = draw(st.integers(0, 3)) == 0
                manifests.append(upstream_group(name, None if basic else min_member, api))
            else:
                if draw(st.integers(0, 4)) == 0:
                    spec["minResources"] = {"cpu": draw(st.sampled_from(["2", "8", "40"]))}
                manifests.append(pod_group(name, min_member, **spec))
        for m in range(draw(st.integers(0, 5))):
            how = draw(st.sampled_from(["label", "annotation", "schedulingGroup"]))
            extra = {"schedulingGroup": {"podGroupName": name}} if how == "schedulingGroup" else {}
            manifests.append(
                pod(
                    f"{name}-{m}",
                    cpu=draw(st.sampled_from(["500m", "1", "2", "3"])),
                    namespace="ml",
                    labels={GROUP_LABEL: name} if how == "label" else None,
                    annotations={GROUP_ANNOTATION: name} if how == "annotation" else None,
                    priority_class=draw(st.sampled_from(["low", "high"])),
                    created=f"2026-11-22T0{draw(st.integers(0, 9))}:00:00Z",
                    **extra,
                )
            )
    for j in range(draw(st.integers(0, 4))):
        manifests.append(
            pod(
                f"solo-{j}",
                cpu=draw(st.sampled_from(["1", "2"])),
                namespace="ml",
                created=f"2026-11-22T0{draw(st.integers(0, 9))}:00:00Z",
            )
        )
    return manifests


@SETTINGS
@given(gang_clusters())
def test_no_node_is_over_committed_and_groups_bind_whole(manifests: list[dict[str, Any]]) -> None:
    objects = objects_of(*manifests)
    result = schedule(*manifests)
    bound = {b.pod: b.node for b in result.bindings}
    groups = {g.key: g.min_member for g in objects.pod_groups}
    per_group: dict[str, int] = {}
    used: dict[str, int] = {}
    for p in objects.pods:
        if p.key in bound:
            used[bound[p.key]] = used.get(bound[p.key], 0) + p.requests.get("cpu", 0)
            key = group_key_of(p)
            if key:
                assert key in groups, f"{p.key} bound although its PodGroup does not exist"
                per_group[key] = per_group.get(key, 0) + 1
    for key, count in per_group.items():
        assert count >= groups[key], (key, count)
    alloc = {n.name: n.allocatable["cpu"] for n in objects.nodes}
    for name, cpu in used.items():
        assert cpu <= alloc[name]


@SETTINGS
@given(gang_clusters(), st.integers(0, 2**32 - 1))
def test_same_input_same_decisions_whatever_the_order(
    manifests: list[dict[str, Any]], seed: int
) -> None:
    assert same_decisions_whatever_the_order(manifests, seed)


@st.composite
def preemption_clusters(draw: st.DrawFn, single_preemptors: bool = True) -> list[dict[str, Any]]:
    """Running low-priority gangs and pods filling nodes; pending high-priority gangs (and
    single pods) that need their room. Some victims' class tolerates preemption."""
    manifests: list[dict[str, Any]] = [
        priority_class("low", 10),
        priority_class(
            "low-protected",
            10,
            annotations={
                "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "10000",
                "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "-1",
            },
        ),
        priority_class("high", 1000),
    ]
    nodes = draw(st.integers(2, 5))
    room = {f"n{i}": 4 for i in range(nodes)}
    for name in room:
        manifests.append(node(name, cpu="4", pods="10"))
    for g in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1, 3))
        # The CRD, or an upstream group preempted whole ({all: {}}) or pod by pod (Pod).
        api = draw(st.sampled_from(["crd", "all", "single"]))
        min_member = draw(st.integers(1, size))
        if api == "crd":
            manifests.append(pod_group(f"low{g}", min_member))
        elif api == "all":
            manifests.append(upstream_group(f"low{g}", min_member, disruptionMode={"all": {}}))
        else:
            manifests.append(
                upstream_group(f"low{g}", min_member, "v1alpha2", disruptionMode="Pod")
            )
        joins = (
            {"labels": {GROUP_LABEL: f"low{g}"}}
            if api == "crd"
            else {"schedulingGroup": {"podGroupName": f"low{g}"}}
        )
        klass = draw(st.sampled_from(["low", "low", "low-protected"]))
        for m in range(size):
            cpu = draw(st.sampled_from([1, 2]))
            fitting = [n for n, free in room.items() if free >= cpu]
            if not fitting:
                break
            where = draw(st.sampled_from(fitting))
            room[where] -= cpu
            manifests.append(
                pod(
                    f"low{g}-{m}",
                    cpu=str(cpu),
                    namespace="ml",
                    node_name=where,
                    priority_class=klass,
                    phase="Running",
                    **joins,
                )
            )
    for g in range(draw(st.integers(1, 2))):
        size = draw(st.integers(1, 3))
        manifests.append(pod_group(f"high{g}", draw(st.integers(1, size))))
        for m in range(size):
            manifests.append(
                pod(
                    f"high{g}-{m}",
                    cpu=draw(st.sampled_from(["1", "2", "4"])),
                    namespace="ml",
                    labels={GROUP_LABEL: f"high{g}"},
                    priority_class="high",
                )
            )
    if single_preemptors:
        for j in range(draw(st.integers(0, 2))):
            manifests.append(
                pod(
                    f"urgent-{j}",
                    cpu=draw(st.sampled_from(["2", "4"])),
                    namespace="ml",
                    priority_class="high",
                )
            )
    return manifests


@SETTINGS
@given(preemption_clusters())
def test_no_gang_is_partially_evicted(manifests: list[dict[str, Any]]) -> None:
    objects = objects_of(*manifests)
    result = schedule(*manifests)
    evicted = {e.pod for e in result.evictions}
    whole = {g.key for g in objects.pod_groups if g.disrupt_whole}
    running: dict[str, set[str]] = {}
    for p in objects.pods:
        key = group_key_of(p)
        if p.node_name and key in whole:
            running.setdefault(key, set()).add(p.key)
    for group, members in running.items():
        gone = members & evicted
        assert not gone or gone == members, (group, sorted(gone), sorted(members))
    protected = {p.key for p in objects.pods if p.priority_class_name == "low-protected"}
    assert not evicted & protected
    by_group: dict[str, int] = {}
    for b in result.bindings:
        name = b.pod.split("/")[1].rsplit("-", 1)[0]
        by_group[name] = by_group.get(name, 0) + 1
    mins = {g.name: g.min_member for g in objects.pod_groups}
    for name, count in by_group.items():
        if name in mins:
            assert count >= mins[name], (name, count)


def bound_and_succeeded(state: ClusterState, group: str) -> tuple[int, int]:
    members = [state.pods.by_key[k] for k in state.groups.members.get(group, ())]
    bound = sum(1 for p in members if p.key in state.pods.bound)
    return bound, sum(1 for p in members if p.phase == "Succeeded")


@SETTINGS
@given(st.one_of(gang_clusters(), preemption_clusters()), st.integers(0, 2**32 - 1))
def test_after_every_pass_a_group_is_empty_or_has_min_member(
    manifests: list[dict[str, Any]], seed: int
) -> None:
    """Passes interleaved with world events: victims go, nodes join, bound members finish.
    Checked for every group that had no member running at the start."""
    rng = random.Random(seed)
    state = build_state(objects_of(*manifests))
    sched = Scheduler(state, default_config())
    fresh = [key for key in state.groups.by_key if bound_and_succeeded(state, key) == (0, 0)]
    now = NOW
    for step in range(6):
        for decision in sched.schedule_pass(now):
            if isinstance(decision, Evict):
                state.remove_pod(decision.pod)
        for key in fresh:
            bound, succeeded = bound_and_succeeded(state, key)
            minimum = state.groups.by_key[key].min_member
            assert bound == 0 or bound + succeeded >= minimum, (key, bound, succeeded)
        event = rng.choice(["node", "finish", "none"])
        if event == "node":
            state.upsert_node(objects_of(node(f"extra-{step}", cpu="4")).nodes[0])
        elif event == "finish" and state.pods.bound:
            done = state.pods.by_key[rng.choice(sorted(state.pods.bound))]
            done.phase = "Succeeded"
            state.upsert_pod(done)
        now += timedelta(seconds=15)
