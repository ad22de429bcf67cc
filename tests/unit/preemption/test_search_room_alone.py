"""With no pod lower than the preemptor (a reclaiming pod whose queue runs nothing below it,
its earlier victims terminating), the preemption search answers by the room alone
(preemption/nodes.py `room_alone`): the first node by name where the room of terminating
pods comes free enough, with no victim; else every candidate fails for want of victims."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.preemption.reasons import NO_VICTIMS
from batchsched.preemption.search import Evaluation, PreemptionSearch
from batchsched.preemption.victims import VictimRule
from batchsched.state.cluster import ClusterState
from tests.preemption_world import NOW, node, pod

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["terminate", "remove", "nominate", "bind", "exclude"]),
        st.integers(0, 3),  # node
        st.integers(0, 11),  # pod
    ),
    max_size=25,
)


def expected(state: ClusterState, candidates: np.ndarray, free: np.ndarray) -> Evaluation:
    preemptor = state.pods.by_key["default/preemptor"]
    demand = state.pods.demand(preemptor)
    fitting = []
    for row in np.flatnonzero(candidates[: state.nodes.rows]).tolist():
        room = free[row].copy()
        for other in state.nodes.pods_on[row].values():
            if other.deletion_timestamp is not None:
                taken = state.pods.demand(other)
                room[taken.cols] += taken.amounts
        if (room[demand.cols] >= demand.amounts).all():
            fitting.append(row)
    if fitting:
        return Evaluation(row=min(fitting, key=state.nodes.name))
    failed = int(candidates[: state.nodes.rows].sum())
    return Evaluation(reasons={NO_VICTIMS: failed} if failed else {})


@settings(max_examples=100, deadline=None)
@given(STEPS)
def test_the_answer_is_the_room_of_terminating_pods(steps: list[tuple[str, int, int]]) -> None:
    state = ClusterState()
    for i in range(4):
        state.upsert_node(node(f"n{i}", cpu=4000))
    for i in range(12):  # nothing below the preemptor's priority 500
        state.upsert_pod(pod(f"v{i}", 1000 + 500 * (i % 3), on=f"n{i % 4}", priority=500 + i))
    for i in range(4):
        state.upsert_pod(pod(f"w{i}", 1000, priority=1000))  # nominated, above the preemptor
    state.upsert_pod(pod("preemptor", 2000, priority=500))
    preemptor = state.pods.by_key["default/preemptor"]
    search = PreemptionSearch(state)
    candidates = np.ones(4, dtype=np.bool_)
    for kind, n, p in steps:
        bound = sorted(state.pods.bound)
        if kind == "terminate" and bound:
            state.mark_terminating(bound[p % len(bound)], NOW)
        elif kind == "remove" and bound:
            state.remove_pod(bound[p % len(bound)])
        elif kind == "nominate" and f"default/w{p % 4}" in state.pods.pending:
            state.nominate(f"default/w{p % 4}", f"n{n}")
        elif kind == "bind" and f"default/v{p}" not in state.pods.by_key:
            state.upsert_pod(pod(f"v{p}", 500, on=f"n{n}", priority=600))
        elif kind == "exclude":
            candidates[n] = not candidates[n]
        rule = VictimRule(state, preemptor, 500, NOW, lambda name: (False, None))
        demand = state.pods.demand(preemptor)
        free = state.free_for(preemptor)
        found = search.evaluate(rule, demand, free, candidates)
        assert found == expected(state, candidates, free)
