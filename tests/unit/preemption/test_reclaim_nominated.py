"""Reclaim's count of nominated pods per queue (preemption/reclaim.py `_Nominated`), followed
from one attempt to the next, equals a recount after any sequence of operations."""

from __future__ import annotations

from functools import partial

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Namespace
from batchsched.preemption.reclaim import _Nominated
from batchsched.state.cluster import ClusterState
from tests.preemption_world import NOMINATION_STEPS, node, nomination_step, pod

PARENT = {"org": "", "a": "org", "b": "org"}

OPS = st.lists(
    st.tuples(
        st.sampled_from([*NOMINATION_STEPS, "namespace"]),
        st.integers(0, 5),  # pod
        st.integers(0, 2),  # node
        st.sampled_from(["a", "b", ""]),  # queue
    ),
    max_size=30,
)


def recount(state: ClusterState) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for key in state.nominations:
        nominated = state.pods.by_key[key]
        if key in state.pods.bound:
            continue
        leaf = state.queue_of(nominated).queue
        for q in state.queues.path(leaf) if leaf else ():
            total = totals.setdefault(q.name, {})
            for resource, amount in state.requests_by_name(nominated).items():
                total[resource] = total.get(resource, 0) + amount
    return totals


def nonzero(totals: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    kept = {name: {r: a for r, a in amounts.items() if a} for name, amounts in totals.items()}
    return {name: amounts for name, amounts in kept.items() if amounts}


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_the_kept_totals_equal_a_recount(ops: list[tuple[str, int, int, str]]) -> None:
    state = ClusterState()
    for i in range(3):
        state.upsert_node(node(f"n{i}"))
    for name, parent in PARENT.items():
        state.upsert_queue(Queue(name, QUEUE_API, parent, {"cpu": QueueQuota(limit=10**6)}))

    def make(i: int, leaf: str) -> None:
        labels = {QUEUE_LABEL: leaf} if leaf else {}
        state.upsert_pod(pod(f"p{i}", 100 * (i + 1), labels=labels))

    for i in range(6):
        make(i, "a" if i % 2 else "")
    nominated = _Nominated(state)
    for op, i, n, leaf in ops:
        key = f"default/p{i}"
        if op == "namespace":
            state.upsert_namespace(Namespace("default", {QUEUE_LABEL: leaf} if leaf else {}))
        else:
            nomination_step(state, op, i, n, partial(make, leaf=leaf))
        asking = state.pods.by_key.get(key) or pod("asker", 100)
        totals, own = nominated.totals(asking)
        assert nonzero(dict(totals)) == nonzero(recount(state))
        if key in state.nominations and key in state.pods.by_key:
            assert own == state.requests_by_name(state.pods.by_key[key])
        else:
            assert own == {}
