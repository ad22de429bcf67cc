"""Kept placements (framework/placements.py) decide as a fresh pass.

On room adjusted for nominations: `Framework.select` keeps each shape's scores on the room a
pod sees when nominations of others hold some of it (a copy per cycle,
`ClusterState.free_for`); it refreshes the rows the state's log names and the rows where the
copy differs from the room the scores were made on, e.g. room a gang's earlier members took
on the copy (`ClusterState.take_room`). Rooms made by `free_for` for pods without a
nomination of their own (`Cycle.own_room`) are compared with each other only through the
log; a copy in between, or a pod of the same shape with a nomination, brings the comparison
back.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.framework.interface import Cycle, Diagnosis
from batchsched.framework.runtime import Framework
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests import builders
from tests.conftest import objects_of
from tests.preemption_world import NOW, node, pod

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["take", "give", "bind", "nominate", "place"]),
        st.integers(0, 5),  # node
        st.integers(0, 7),  # pod
    ),
    max_size=40,
)


def _place(
    framework: Framework, state: ClusterState, key: str, free: object, own_room: bool = False
) -> int | None:
    who = state.pods.by_key[key]
    assert free is not None
    cycle = Cycle(state, who, NOW, state.pods.demand(who), free)  # type: ignore[arg-type]
    cycle.own_room = own_room
    placed = framework.place(cycle)
    return None if isinstance(placed, Diagnosis) else placed


def _totals(
    framework: Framework, state: ClusterState, key: str, free: object, own_room: bool = False
) -> tuple[list[bool], list[int]] | None:
    """Feasibility and scores on every node, as a gang search asks for them."""
    who = state.pods.by_key[key]
    cycle = Cycle(state, who, NOW, state.pods.demand(who), free)  # type: ignore[arg-type]
    cycle.own_room = own_room
    found = framework.evaluate(cycle)
    return None if found is None else (found.feasible.tolist(), found.total.tolist())


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
    placer = state.pods.by_key["default/p0"]
    free = state.free_for(placer)  # the cycle's own copy, as a gang's placement keeps it
    assert not state.nodes.is_shared_free(free)
    demand = state.pods.demand(placer)
    for kind, n, p in steps:
        key = f"default/p{p}"
        if kind == "take" and (free[n, demand.cols] >= demand.amounts).all():
            state.nodes.take_room(free, n, demand)
        elif kind == "give":
            state.nodes.take_room(free, n, demand, sign=-1)
        elif kind == "bind" and key in state.pods.pending and key != placer.key:
            state.assume(key, f"n{n}")
        elif kind == "nominate" and key in state.pods.pending and key != placer.key:
            state.nominate(key, f"n{n}")
        # p0 and p2 are of one shape, p1 and p3 of another (either may be nominated).
        for who in ("default/p0", "default/p2", "default/p1", "default/p3"):
            own = who != placer.key
            if own and who not in state.pods.pending:
                continue
            room = state.free_for(state.pods.by_key[who]) if own else free
            fresh = Scheduler(state, default_config()).default_framework
            assert _place(kept, state, who, room, own) == _place(fresh, state, who, room)
            # Every row's results: a nominated pod's own row differs from its shape's others.
            assert _totals(kept, state, who, room, own) == _totals(fresh, state, who, room)


def test_a_nominated_pods_own_room_is_compared_with_its_shapes_kept_one() -> None:
    """p1's room has its own nomination's hold back on n2, p3's has not: one shape, no row
    logged between them, so only the comparison over every row finds n2."""
    state = ClusterState()
    for i, cpu in enumerate([2, 3, 4, 2, 8, 1]):
        state.upsert_node(node(f"n{i}", cpu=1000 * cpu))
    for i in range(4):
        state.upsert_pod(pod(f"p{i}", 500 * (1 + i % 2), priority=100))
    state.nominate("default/p1", "n2")
    kept = Scheduler(state, default_config()).default_framework
    for who in ("default/p3", "default/p1", "default/p3", "default/p1"):
        room = state.free_for(state.pods.by_key[who])
        fresh = Scheduler(state, default_config()).default_framework
        assert _totals(kept, state, who, room, True) == _totals(fresh, state, who, room)


def test_each_members_results_keep_their_own_plan() -> None:
    """`Framework.place_changed` keeps, on each member's results (`NodeTotals.plan`), the
    row-local filters and scores its refreshes run: made for that pod, not shared with
    another pod's results, and placing as `place` does on the same room."""
    state = ClusterState()
    for i, cpu in enumerate([4, 8, 2, 6]):
        state.upsert_node(node(f"n{i}", cpu=1000 * cpu))
    # One pod requests cpu (BalancedAllocation tells nodes apart), one requests nothing
    # (it scores every node alike): their plans differ.
    state.upsert_pod(pod("wants", 1500))
    state.upsert_pod(pod("none", 0))
    framework = Scheduler(state, default_config()).default_framework
    free = state.free_for(state.pods.by_key["default/wants"]).copy(order="K")
    cycles = {
        key: Cycle(
            state, state.pods.by_key[key], NOW, state.pods.demand(state.pods.by_key[key]), free
        )
        for key in ("default/wants", "default/none")
    }
    bases = {key: framework.evaluate(cycle) for key, cycle in cycles.items()}
    plans = {key: framework.placements.row_plan(cycle) for key, cycle in cycles.items()}
    assert plans["default/wants"] != plans["default/none"]
    for step, row in enumerate([1, 3, 1, 0]):
        demand = state.pods.demand(state.pods.by_key["default/wants"])
        state.nodes.take_room(free, row, demand)  # the room changes on `row` only
        changed = np.array([row], dtype=np.intp)
        for key, cycle in cycles.items():
            base = bases[key]
            assert base is not None
            placed = framework.place_changed(cycle, base, changed)
            assert base.plan == plans[key], (step, key)
            fresh = Scheduler(state, default_config()).default_framework.place(cycle)
            assert placed == (fresh if isinstance(fresh, int) else None), (step, key)


def test_static_verdicts_and_raw_scores_follow_the_node_labels() -> None:
    """The static filters' verdict and the static scores' raw values are kept per shape
    until node labels change (`ClusterState.node_generation`), then made again."""
    ssd = {"key": "disk", "operator": "In", "values": ["ssd"]}
    prefers = {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [ssd]}}
        ]
    }
    hdd = {"zone": "a", "disk": "hdd"}
    nodes = [builders.node(f"n{i}", cpu="4", labels=hdd) for i in range(3)]
    wants = builders.pod(
        "p", cpu="1", node_selector={"zone": "a"}, affinity={"nodeAffinity": prefers}
    )
    state = build_state(objects_of(*nodes, wants))
    framework = Scheduler(state, default_config()).default_framework

    def placed() -> int | Diagnosis:
        who = state.pods.by_key["default/p"]
        return framework.place(Cycle(state, who, NOW, state.pods.demand(who), state.free_for(who)))

    def relabel(name: str, labels: dict[str, str]) -> None:
        state.upsert_node(objects_of(builders.node(name, cpu="4", labels=labels)).nodes[0])

    assert placed() == 0  # every node alike: the first name
    relabel("n2", {"zone": "a", "disk": "ssd"})
    assert placed() == 2  # the raw scores were made again
    relabel("n2", {"zone": "b", "disk": "ssd"})
    relabel("n0", {"zone": "b", "disk": "hdd"})
    assert placed() == 1  # and the verdict
    for name in ("n1", "n2"):
        relabel(name, {"zone": "b"})
    found = placed()
    assert isinstance(found, Diagnosis) and "3 node(s) didn't match" in found.message()
