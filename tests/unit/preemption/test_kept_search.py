"""The preemption search's kept per-row results decide as a fresh search.

`PreemptionSearch` keeps, per preemptor shape, each row's victims and criteria with the room
the preemptor saw there; a later search recomputes the rows the state's log names and the
rows where the room it is given differs from the room seen (room held by nominations, or
taken on the cycle's own copy), so its answer must equal a search made afresh. Room said to
be `free_for` a preemptor without a nomination of its own (`Cycle.plain_room`) is compared
with the last such room only through the log: the preemptor's own nomination, or a copy in
between, must bring the comparison back.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.framework.interface import Cycle
from batchsched.preemption.search import Evaluation, PreemptionSearch
from batchsched.preemption.victims import VictimRule
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray
from tests.preemption_world import NOW, node, pod

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["take", "give", "bind", "nominate", "self", "terminate", "remove"]),
        st.integers(0, 3),  # node
        st.integers(0, 11),  # pod
    ),
    max_size=30,
)


def _answer(
    search: PreemptionSearch,
    state: ClusterState,
    free: IntArray,
    own_room: bool = False,
    key: str = "default/preemptor",
) -> Evaluation:
    preemptor = state.pods.by_key[key]
    rule = VictimRule(state, preemptor, 500, NOW, lambda name: (False, None))
    candidates = np.ones(state.nodes.rows, dtype=np.bool_)
    demand = state.pods.demand(preemptor)
    plain = Cycle(state, preemptor, NOW, demand, free, own_room=own_room).plain_room
    return search.evaluate(rule, demand, free, candidates, plain)


@settings(max_examples=60, deadline=None)
@given(STEPS)
def test_kept_search_follows_room_and_log(steps: list[tuple[str, int, int]]) -> None:
    state = ClusterState()
    for i in range(4):
        state.upsert_node(node(f"n{i}", cpu=4000))
    for i in range(12):  # lower-priority pods bound round the nodes, of a few sizes
        state.upsert_pod(pod(f"v{i}", 500 * (1 + i % 3), on=f"n{i % 4}", priority=10 * (i % 3)))
    for i in range(4):
        state.upsert_pod(pod(f"w{i}", 1000, priority=1000))  # nominated, above the preemptor
    state.upsert_pod(pod("preemptor", 2000, priority=500))
    state.upsert_pod(pod("twin", 2000, priority=500))  # the same shape: its results are kept
    demand = state.pods.demand(state.pods.by_key["default/preemptor"])
    kept = PreemptionSearch(state)
    free = state.nodes.free[: state.nodes.rows].copy(order="K")  # the cycle's own copy
    for kind, n, p in steps:
        bound = sorted(state.pods.bound)
        if kind == "take":
            state.nodes.take_room(free, n, demand)
        elif kind == "give":
            state.nodes.take_room(free, n, demand, sign=-1)
        elif kind == "bind" and f"default/v{p}" not in state.pods.by_key:
            state.upsert_pod(pod(f"v{p}", 500, on=f"n{n}", priority=10 * (p % 3)))
        elif kind == "nominate" and f"default/w{p % 4}" in state.pods.pending:
            state.nominate(f"default/w{p % 4}", f"n{n}")
        elif kind == "self":  # a preemptor's own nomination comes and goes
            who = "default/twin" if p % 4 > 1 else "default/preemptor"
            state.nominate(who, f"n{n}" if p % 2 else None)
        elif kind == "terminate" and bound:
            state.mark_terminating(bound[p % len(bound)], NOW)
        elif kind == "remove" and bound:
            state.remove_pod(bound[p % len(bound)])
        rooms = [] if p % 3 else [(free, False, "default/preemptor")]
        rooms += [
            (state.free_for(state.pods.by_key[k]), True, k)
            for k in ("default/preemptor", "default/twin")
        ]
        for room, own_room, key in rooms:
            fresh = _answer(PreemptionSearch(state), state, room, key=key)
            assert _answer(kept, state, room, own_room, key) == fresh
