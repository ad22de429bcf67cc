"""Invariants of queue admission over random clusters: no queue over a limit at any level,
gangs all (minMember members at least) or nothing, and a cluster without queues schedules
as if queues did not exist."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.decisions import Bind, Decision
from batchsched.objects.podgroup import GROUP_LABEL, group_key_of
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API
from batchsched.state.cluster import ClusterState
from benchmarks.workloads.queues import build
from tests.builders import node, pod, pod_group
from tests.conftest import objects_of, same_decisions_whatever_the_order, schedule

SETTINGS = settings(max_examples=60, deadline=None)
GPU = "nvidia.com/gpu"
LEAVES = ("a1", "a2", "b1")
PARENT = {"a1": "a", "a2": "a", "b1": "b"}


def queue(name: str, parent: str, limit: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {GPU: {} if limit is None else {"limit": limit}}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


@st.composite
def queued_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    limit = st.one_of(st.none(), st.integers(0, 12))
    manifests: list[dict[str, Any]] = [queue("a", "", draw(limit)), queue("b", "", draw(limit))]
    manifests += [queue(leaf, PARENT[leaf], draw(limit)) for leaf in LEAVES]
    for i in range(draw(st.integers(1, 4))):
        manifests.append(node(f"n{i}", cpu="16", nvidia_com__gpu="8"))
    for g in range(draw(st.integers(0, 3))):
        leaf = draw(st.sampled_from(LEAVES))
        size = draw(st.integers(1, 4))
        manifests.append(pod_group(f"g{g}", draw(st.integers(1, size))))  # minMember
        for m in range(size):
            labels = {GROUP_LABEL: f"g{g}", QUEUE_LABEL: leaf}
            gpus = str(draw(st.integers(1, 4)))
            manifests.append(
                pod(f"g{g}-{m}", namespace="ml", labels=labels, extra_requests={GPU: gpus})
            )
    for j in range(draw(st.integers(0, 8))):
        labels = {QUEUE_LABEL: draw(st.sampled_from(LEAVES))} if draw(st.booleans()) else {}
        gpus = str(draw(st.integers(0, 4)))
        manifests.append(
            pod(f"solo-{j}", namespace="ml", labels=labels, extra_requests={GPU: gpus})
        )
    return manifests


@SETTINGS
@given(queued_clusters())
def test_no_queue_goes_over_a_limit_and_gangs_bind_whole(manifests: list[dict[str, Any]]) -> None:
    objects = objects_of(*manifests)
    result = schedule(*manifests)
    bound = {b.pod for b in result.bindings}
    used: dict[str, int] = {}
    per_group: dict[str, int] = {}
    for p in objects.pods:
        if p.key not in bound:
            continue
        leaf = p.labels.get(QUEUE_LABEL)
        for name in (leaf, PARENT.get(leaf or "")):
            if name:
                used[name] = used.get(name, 0) + p.requests.get(GPU, 0)
        key = group_key_of(p)
        if key:
            per_group[key] = per_group.get(key, 0) + 1
    for q in objects.queues:
        limit = q.resources[GPU].limit
        assert limit is None or used.get(q.name, 0) <= limit, (q.name, used, limit)
    # A gang binds minMember members at least, or none (the others join when there is room).
    sizes = {g.key: g.min_member for g in objects.pod_groups}
    for key, count in per_group.items():
        assert count >= sizes[key], (key, count)


@SETTINGS
@given(queued_clusters())
def test_one_queue_for_every_pod_changes_no_decision(manifests: list[dict[str, Any]]) -> None:
    # Within a leaf the profile's queue sort orders the pods: one queue without limits that
    # holds every pod (the `default` queue) schedules as if there were no queues.
    without = []
    for m in manifests:
        if m["kind"] != "Queue":
            m = copy.deepcopy(m)
            m["metadata"].get("labels", {}).pop(QUEUE_LABEL, None)
            without.append(m)
    assert schedule(queue("default", "", None), *without).bindings == schedule(*without).bindings


@SETTINGS
@given(queued_clusters(), st.integers(0, 2**16))
def test_same_input_same_decisions_in_any_order(manifests: list[dict[str, Any]], seed: int) -> None:
    assert same_decisions_whatever_the_order(manifests, seed)


def test_the_queues_benchmark_keeps_every_level_within_its_limit_and_decides_alike() -> None:
    # Queues/5000Nodes_1000Queues_20000Pods at a smaller scale: three levels, 40 leaves with
    # work, department and team limits that bind.
    def run() -> tuple[ClusterState, list[Decision]]:
        scheduler = build(120, orgs=2, departments=5, teams=19, busy=40, pods=4000)
        return scheduler.state, scheduler.schedule_pass(datetime(2026, 11, 22, tzinfo=UTC))

    state, decisions = run()
    usage = state.queue_usage()
    limited = 0
    for queue in state.queues.queues.values():
        limit = queue.resources["cpu"].limit
        if limit is not None:
            limited += 1
            assert usage.get(queue.name, {}).get("cpu", 0) <= limit, queue.name
    assert limited and 0 < sum(isinstance(d, Bind) for d in decisions) < 4000
    assert run()[1] == decisions
