"""Backfill walks its candidates in the scheduler's order (docs/backfill.md#rules): for random
queue trees, usage and candidates (pods and gangs, in a queue or in none), the walk hands the
holders out as a freshly built scheduling queue (state/queue.py with its QueueOrder) hands
out their first pods, each holder's pending pods counted as used once handed out (a
reservation counts in its queue's usage for the rest of the walk)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Node, Pod, PodGroup
from batchsched.plugins.backfill.candidates import Candidates
from batchsched.plugins.coscheduling.plugin import Coscheduling
from batchsched.state.cluster import ClusterState
from batchsched.state.queue import SchedulingQueue
from batchsched.state.queue_order import QueueOrder, lane_of
from batchsched.state.reservations import holder_pods

GPU = "nvidia.com/gpu"
T0 = datetime(2026, 11, 22, 9, tzinfo=UTC)
LEAVES = ("l1", "l2", "l3", "l4")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Queue], int, list[Pod], list[PodGroup], list[str]]:
    """Queues (two roots, four leaves under either or at the top), the cluster's GPUs, the
    pods (running ones in the leaves, pending ones in a leaf or in none), the PodGroups, and
    the holders in the order they became candidates."""
    weight = st.sampled_from([1.0, 2.0, 3.0])
    queues = [Queue(r, QUEUE_API, "", {GPU: QueueQuota()}, draw(weight)) for r in ("p", "q")]
    for leaf in LEAVES:
        parent = draw(st.sampled_from(["", "p", "q"]))
        guaranteed = draw(st.integers(0, 8))
        quota = QueueQuota(guaranteed=guaranteed, nominal=guaranteed)
        queues.append(Queue(leaf, QUEUE_API, parent, {GPU: quota}, draw(weight)))
    pods = []
    for i in range(draw(st.integers(0, 6))):
        labels = {QUEUE_LABEL: draw(st.sampled_from(LEAVES))}
        pods.append(
            Pod("ml", f"run-{i}", labels=labels, requests={GPU: draw(st.integers(1, 8))},
                node_name="n1", phase="Running", start_time=T0)
        )  # fmt: skip
    groups, holders = [], []
    for h in range(draw(st.integers(1, 8))):
        leaf = draw(st.sampled_from(["", *LEAVES]))
        labels = {QUEUE_LABEL: leaf} if leaf else {}
        created = T0 + timedelta(minutes=draw(st.integers(0, 3)))
        priority = draw(st.integers(0, 2))
        size = draw(st.integers(0, 3))  # 0: a pod of no gang
        if size:
            labels = {**labels, GROUP_LABEL: f"g{h}"}
            groups.append(PodGroup("ml", f"g{h}", size, creation_timestamp=created))
            holders.append(f"PodGroup ml/g{h}")
        for m in range(max(size, 1)):
            name = f"h{h}-{m}" if size else f"h{h}"
            requests = {GPU: draw(st.integers(1, 4))}
            pods.append(Pod("ml", name, labels=labels, requests=requests, priority=priority,
                            creation_timestamp=created))  # fmt: skip
        if not size:
            holders.append(f"Pod ml/h{h}")
    cluster = draw(st.integers(8, 64))
    return queues, cluster, pods, groups, draw(st.permutations(holders))


def _state(queues: list[Queue], gpus: int, pods: list[Pod], groups: list[PodGroup]) -> ClusterState:
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: gpus}))
    for queue in queues:
        state.upsert_queue(queue)
    for group in groups:
        state.upsert_pod_group(group)
    for pod in pods:
        state.upsert_pod(replace(pod))  # (assumed, a pod is changed in place)
    return state


def _pending(state: ClusterState, holder: str) -> list[Pod]:
    pending = state.pods.pending
    return [pending[k] for k in holder_pods(holder, state.groups.members) if k in pending]


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_the_walk_hands_holders_out_as_the_scheduling_queue_would(
    drawn: tuple[list[Queue], int, list[Pod], list[PodGroup], list[str]],
) -> None:
    queues, gpus, pods, groups, holders = drawn
    # Backfill's walk, every holder counted once handed out (as if each reserved).
    state = _state(queues, gpus, pods, groups)
    sort = Coscheduling()
    sort.attach(state)
    candidates = Candidates()
    for holder in holders:
        first = _pending(state, holder)[0]
        order = sort.sort_key(first, first.creation_timestamp.timestamp())
        candidates.add(holder, order, lane_of(state, first))
    walk = candidates.walk(state, lambda holder: _pending(state, holder))
    walked = []
    for holder in walk:
        walked.append(holder)
        walk.count()
    # A fresh scheduling queue of the holders' first pods, each holder's pods placed once
    # its first pod is handed out.
    fresh = _state(queues, gpus, pods, groups)
    sort = Coscheduling()
    sort.attach(fresh)
    queue = SchedulingQueue(sort_key=sort.sort_key)
    queue.lanes = QueueOrder(fresh)
    holder_of = {}
    for holder in holders:
        first = _pending(fresh, holder)[0]
        holder_of[first.key] = holder
        queue.add(first, T0.timestamp())
    handed = []
    while (entry := queue.pop()) is not None:
        holder = holder_of[entry.pod.key]
        handed.append(holder)
        for pod in _pending(fresh, holder):
            fresh.assume(pod.key, "n1")
    assert walked == handed
