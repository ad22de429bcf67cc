"""Reclaim's kept row bounds (preemption/reclaim.py `_bounds`) decide as a fresh search.

The bounds are kept per kind of attempt and recomputed on the rows the state's log names and
the rows where the room given differs from the room seen; room said to be `free_for` a pod
of one priority without a nomination of its own (`Cycle.plain_room`) is compared with the
last such room only through the log. Whatever happens between attempts (pods bound, going,
gone, nominations, room taken on the cycle's own copy), a kept Reclaimer answers as a new
one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Pod
from batchsched.preemption.reclaim import Reclaimed, Reclaimer, Shares
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray
from tests.preemption_world import NOW, node, pod

SHARES: Shares = {"a": {"cpu": 8000}, "b": {"cpu": 4000}}
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["bind", "terminate", "remove", "nominate", "take", "self"]),
        st.integers(0, 3),  # node
        st.integers(0, 11),  # pod
    ),
    max_size=25,
)


def in_queue(name: str, cpu: int, queue: str, **kw: object) -> Pod:
    return pod(name, cpu, labels={QUEUE_LABEL: queue}, **kw)  # type: ignore[arg-type]


def answer(
    reclaimer: Reclaimer, state: ClusterState, key: str, free: IntArray, plain: bool
) -> Reclaimed:
    preemptor = state.pods.by_key[key]
    candidates = np.ones(state.nodes.rows, dtype=np.bool_)
    demand = state.pods.demand(preemptor)
    return reclaimer.find(preemptor, "a", demand, free, candidates, NOW, SHARES, plain)


def said(found: Reclaimed) -> tuple[object, ...]:
    return (found.row, [v.key for v in found.victims], found.message, found.changes_at)


@settings(max_examples=60, deadline=None)
@given(STEPS)
def test_kept_bounds_answer_as_a_fresh_search(steps: list[tuple[str, int, int]]) -> None:
    state = ClusterState()
    for i in range(4):
        state.upsert_node(node(f"n{i}", cpu=4000))
    state.upsert_queue(Queue("a", QUEUE_API, resources={"cpu": QueueQuota(0, 8000)}))
    state.upsert_queue(Queue("b", QUEUE_API, resources={"cpu": QueueQuota(0, 4000)}))
    for i in range(8):  # b borrows: pods round the nodes, of a few sizes
        state.upsert_pod(in_queue(f"b{i}", 500 * (1 + i % 3), "b", on=f"n{i % 4}"))
    for i in range(4):
        state.upsert_pod(in_queue(f"w{i}", 1000, "a", priority=1000))  # nominated, above
    state.upsert_pod(in_queue("p", 2000, "a", priority=500))
    state.upsert_pod(in_queue("twin", 2000, "a", priority=500))  # the same kind of attempt
    kept = Reclaimer(state)
    demand = state.pods.demand(state.pods.by_key["default/p"])
    copy = state.free_for(state.pods.by_key["default/p"]).copy(order="K")  # a cycle's own
    for kind, n, p in steps:
        bound = sorted(state.pods.bound)
        if kind == "bind" and f"default/b{p}" not in state.pods.by_key:
            state.upsert_pod(in_queue(f"b{p}", 500, "b", on=f"n{n}"))
        elif kind == "terminate" and bound:
            state.mark_terminating(bound[p % len(bound)], NOW)
        elif kind == "remove" and bound:
            state.remove_pod(bound[p % len(bound)])
        elif kind == "nominate" and f"default/w{p % 4}" in state.pods.pending:
            state.nominate(f"default/w{p % 4}", f"n{n}")
        elif kind == "self":  # a preemptor's own nomination comes and goes
            who = "default/twin" if p % 4 > 1 else "default/p"
            state.nominate(who, f"n{n}" if p % 2 else None)
        elif kind == "take":
            state.nodes.take_room(copy, n, demand)
        for key in ("default/p", "default/twin"):
            room = state.free_for(state.pods.by_key[key])
            plain = key not in state.nominations
            fresh = said(answer(Reclaimer(state), state, key, room, plain))
            assert said(answer(kept, state, key, room, plain)) == fresh
        if p % 3 == 0:
            fresh = said(answer(Reclaimer(state), state, "default/p", copy, False))
            assert said(answer(kept, state, "default/p", copy, False)) == fresh
