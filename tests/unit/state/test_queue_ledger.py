"""The queues' ledger (state/queue_ledger.py): usage, the terminating pods' part of it and
pending requests kept as pods come and go equal a recount after any sequence of operations."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Namespace, Node, Pod, PodGroup
from batchsched.state.cluster import ClusterState

GPU = "nvidia.com/gpu"
PARENT = {"org": "", "a": "org", "b": "org", "solo": ""}
LEAVES = ("a", "b", "solo", "nowhere", "")
WHEN = datetime(2026, 11, 27, tzinfo=UTC)


def queue(name: str) -> Queue:
    return Queue(name, QUEUE_API, PARENT[name], {GPU: QueueQuota(limit=100)})


def recount(state: ClusterState, pods: list[Pod]) -> dict[str, dict[str, int]]:
    """The totals of the resources whose fair shares are computed (the ledger keeps only
    those: no reader looks at the others)."""
    totals: dict[str, dict[str, int]] = {}
    for pod in pods:
        leaf = state.queue_of(pod).queue
        for q in state.queues.path(leaf) if leaf else ():
            total = totals.setdefault(q.name, {})
            for resource, amount in state.requests_by_name(pod).items():
                if resource in state.queues.shared():
                    total[resource] = total.get(resource, 0) + amount
    return totals


def nonzero(totals: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    kept = {name: {r: a for r, a in amounts.items() if a} for name, amounts in totals.items()}
    return {name: amounts for name, amounts in kept.items() if amounts}


operations = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "pending",
                "bound",
                "leaving",
                "assume",
                "forget",
                "remove",
                "terminate",
                "namespace",
                "group",
                "queue",
                "measure",
                "again",
            ]
        ),
        st.integers(0, 5),  # which pod (or group)
        st.sampled_from(LEAVES),
        st.integers(0, 3),  # GPUs
        st.booleans(),  # whether the totals are read after it (pending pods are counted then)
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_kept_usage_and_pending_equal_a_recount(
    ops: list[tuple[str, int, str, int, bool]],
) -> None:
    state = ClusterState()
    for n in ("n1", "n2"):
        state.upsert_node(Node(n, {GPU: 100, "cpu": 100_000}))
    for name in ("org", "a", "b"):
        state.upsert_queue(queue(name))
    state.queue_usage()  # the ledger is live from here on
    demand, version = demand_of(state), state.queue_ledger.demand_version()
    usage = nonzero(state.queue_usage())
    invalidated = False
    for op, i, leaf, gpus, read in ops:
        key = f"ml/p{i}"
        labels: dict[str, Any] = {QUEUE_LABEL: leaf} if leaf else {}
        if i % 3 == 0:
            labels[GROUP_LABEL] = "g"
        requests = {GPU: gpus, "cpu": 100 * gpus}
        if op == "pending":
            state.upsert_pod(Pod("ml", f"p{i}", labels=labels, requests=requests))
        elif op in ("bound", "leaving"):
            node = "n1" if gpus % 2 else "n2"
            pod = Pod("ml", f"p{i}", labels=labels, requests=requests, node_name=node)
            pod.deletion_timestamp = WHEN if op == "leaving" else None
            state.upsert_pod(pod)
        elif op == "assume" and key in state.pods.pending:
            state.assume(key, "n1")
        elif op == "forget":
            state.forget(key)
        elif op == "remove":
            state.remove_pod(key)
        elif op == "terminate":
            state.mark_terminating(key, WHEN)
        elif op == "namespace":
            state.upsert_namespace(Namespace("ml", {QUEUE_LABEL: leaf} if leaf else {}))
        elif op == "group":
            group_labels = {QUEUE_LABEL: leaf} if leaf else {}
            state.upsert_pod_group(PodGroup("ml", "g", 2, labels=group_labels))
        elif op == "queue":  # (naming the CPU too, or not: the ledger counts it, or not)
            solo = queue("solo")
            cpu = {"cpu": QueueQuota()} if i % 2 else {}
            state.upsert_queue(Queue("solo", QUEUE_API, "", {**solo.resources, **cpu}))
        elif op == "measure":
            state.queues.measured = frozenset({"cpu"} if i % 2 else ())
        elif op == "again" and key in state.pods.by_key:  # the very object reported again
            pod = state.pods.by_key[key]
            if key in state.pods.assumed and gpus % 2:
                state.confirm_bound(pod)
            else:
                state.upsert_pod(pod)
        invalidated |= op in ("namespace", "group", "queue", "measure")  # (all counted again)
        if not read:
            continue
        by_key = state.pods.by_key
        bound = [by_key[k] for k in state.pods.bound]
        assert nonzero(state.queue_usage()) == nonzero(recount(state, bound))
        pending = list(state.pods.pending.values())
        assert nonzero(state.queue_ledger.pending) == nonzero(recount(state, pending))
        leaving = recount(state, [by_key[k] for k in state.pods.terminating])
        assert nonzero(state.queue_ledger.leaving) == nonzero(leaving)
        staying = recount(state, [p for p in bound if p.key not in state.pods.terminating])
        assert nonzero(state.queue_staying_usage()) == nonzero(staying)
        # Fair shares are kept while the demand version stays: it moves with any queue's.
        was, demand = demand, demand_of(state)
        last, version = version, state.queue_ledger.demand_version()
        assert demand == was or version != last
        # Queue order rates anew the paths of the leaves whose usage moved, as told.
        was, usage = usage, nonzero(state.queue_usage())
        told = state.queue_ledger.drain_usage_moved()
        if not invalidated:
            on_paths = {q.name for leaf in told for q in state.queues.path(leaf)}
            assert {q for q in was.keys() | usage.keys() if was.get(q) != usage.get(q)} <= on_paths
        invalidated = False


def demand_of(state: ClusterState) -> dict[str, dict[str, int]]:
    """Each queue's demand, recounted: its subtree's bound and pending pods' requests."""
    by_key = state.pods.by_key
    pods = [by_key[k] for k in state.pods.bound] + list(state.pods.pending.values())
    return nonzero(recount(state, pods))


def test_binding_a_pending_pod_leaves_the_demand_and_the_fair_shares_as_they_were() -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 8}))
    state.upsert_queue(queue("org"))
    state.upsert_queue(queue("a"))
    state.upsert_pod(Pod("ml", "p", labels={QUEUE_LABEL: "a"}, requests={GPU: 2}))
    shares = state.queue_fair_shares()
    version = state.queue_ledger.demand_version()
    state.assume("ml/p", "n1")
    assert state.queue_usage()["a"] == {GPU: 2}
    assert state.queue_ledger.demand_version() == version
    assert state.queue_fair_shares() is shares
    state.upsert_pod(Pod("ml", "q", labels={QUEUE_LABEL: "a"}, requests={GPU: 1}))
    assert state.queue_fair_shares() is not shares


def test_a_status_write_of_a_queue_keeps_the_counts() -> None:
    state = ClusterState()
    state.upsert_queue(queue("org"))
    version = state.queues.version
    again = queue("org")
    again.resource_version = "7"
    state.upsert_queue(again)
    assert state.queues.version == version


def test_pods_told_pending_and_never_read_are_counted_before_they_pile_up() -> None:
    # Pending pods are counted when the totals are read; a scheduler whose totals nobody
    # reads (no two queues ever compete) counts them every few thousand, not never.
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 100}))
    state.upsert_queue(queue("solo"))
    state.queue_usage()
    for i in range(5000):
        state.upsert_pod(Pod("ml", f"p{i}", labels={QUEUE_LABEL: "solo"}, requests={GPU: 1}))
        state.remove_pod(f"ml/p{i}")
    assert len(state.queue_ledger._told_pending) < 4096
    assert nonzero(state.queue_ledger.pending) == {}
