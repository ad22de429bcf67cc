"""Nominations keep the room nominated pods hold; free_for must equal the plain definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from tests.preemption_world import NOMINATION_STEPS, node, nomination_step, pod

OPS = st.lists(
    st.tuples(
        st.sampled_from(NOMINATION_STEPS),
        st.integers(0, 5),  # pod
        st.integers(0, 2),  # node
    ),
    max_size=30,
)


def naive_free_for(state: ClusterState, who: Pod) -> np.ndarray:
    free = state.nodes.free[: state.nodes.rows].copy()
    for key, row in state.nominations.items():
        other = state.pods.by_key.get(key)
        if other is None or key == who.key or (other.priority or 0) < (who.priority or 0):
            continue
        demand = state.pods.demand(other)
        free[row, demand.cols] -= demand.amounts
    return free


@settings(max_examples=150, deadline=None)
@given(OPS, st.lists(st.sampled_from([100, 200, 300]), min_size=6, max_size=6))
def test_free_for_matches_the_definition(ops: list[tuple[str, int, int]], prios: list[int]) -> None:
    state = ClusterState()
    for i in range(3):
        state.upsert_node(node(f"n{i}"))

    def make(i: int) -> Pod:
        return pod(f"p{i}", 100 * (i + 1), priority=prios[i])

    for i in range(6):
        state.upsert_pod(make(i))
    for op, i, n in ops:
        nomination_step(state, op, i, n, lambda j: state.upsert_pod(make(j)))
        for who in state.pods.pending.values():
            assert (state.free_for(who) == naive_free_for(state, who)).all()
    for row in range(3):
        expected = sorted(k for k, r in state.nominations.items() if r == row)
        assert state.nominations.on_row(row) == expected


def test_get_and_pop_answer_as_a_mapping_does() -> None:
    state = ClusterState()
    state.upsert_node(node("n0"))
    state.upsert_pod(pod("p", 100))
    nominations = state.nominations
    assert nominations.get("default/p") is None and nominations.get("default/p", -1) == -1
    assert nominations.pop("default/p", None) is None
    with pytest.raises(KeyError):
        nominations.pop("default/p")
    state.nominate("default/p", "n0")
    assert nominations.get("default/p") == 0
    assert nominations.pop("default/p") == 0
    assert "default/p" not in nominations
    assert (
        state.free_for(pod("q", 100)) == state.nodes.free[: state.nodes.rows]
    ).all()  # room released
