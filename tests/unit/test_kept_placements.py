"""Placements kept per pod shape on room adjusted for nominations decide as a fresh pass.

`Framework.select` keeps each shape's scores on the room a pod sees when nominations of
others hold some of it (a copy per cycle, `ClusterState.free_for`); it refreshes the rows
the state's log names and the rows where the copy differs from the room the scores were
made on, e.g. room a gang's earlier members took on the copy (`ClusterState.take_room`).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.framework import Framework
from batchsched.plugins.base import Cycle, Diagnosis
from batchsched.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.preemption_world import NOW, node, pod

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["take", "give", "bind", "nominate", "place"]),
        st.integers(0, 5),  # node
        st.integers(0, 7),  # pod
    ),
    max_size=40,
)


def _place(framework: Framework, state: ClusterState, key: str, free: object) -> int | None:
    who = state.pods[key]
    assert free is not None
    cycle = Cycle(state, who, NOW, state.demand(who), free)  # type: ignore[arg-type]
    placed = framework.place(cycle)
    return None if isinstance(placed, Diagnosis) else placed


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=6, max_size=6), STEPS)
def test_kept_placement_follows_the_copy_and_the_log(
    cpus: list[int], steps: list[tuple[str, int, int]]
) -> None:
    state = ClusterState()
    for i, cpu in enumerate(cpus):
        state.upsert_node(node(f"n{i}", cpu=1000 * cpu))
    # A nominated pod of the highest priority: the others see room adjusted for it.
    state.upsert_pod(pod("holder", 1000, priority=1000))
    state.nominate("default/holder", "n0")
    for i in range(8):
        state.upsert_pod(pod(f"p{i}", 500 * (1 + i % 2), priority=100))
    kept = Scheduler(state, default_config()).default_framework
    placer = state.pods["default/p0"]
    free = state.free_for(placer)  # the cycle's own copy, as a gang's placement keeps it
    assert not state.is_shared_free(free)
    demand = state.demand(placer)
    for kind, n, p in steps:
        key = f"default/p{p}"
        if kind == "take" and (free[n, demand.cols] >= demand.amounts).all():
            state.take_room(free, n, demand)
        elif kind == "give":
            state.take_room(free, n, demand, sign=-1)
        elif kind == "bind" and key in state.pending and key != placer.key:
            state.assume(key, f"n{n}")
        elif kind == "nominate" and key in state.pending and key != placer.key:
            state.nominate(key, f"n{n}")
        for who in ("default/p0", "default/p1"):
            room = free if who == placer.key else state.free_for(state.pods[who])
            fresh = Scheduler(state, default_config()).default_framework
            assert _place(kept, state, who, room) == _place(fresh, state, who, room)
