"""`Framework.place_changed` keeps, on each member's results (`NodeTotals.plan`), the
row-local filters and scores its refreshes run: made for that pod, not shared with another
pod's results, and placing as `place` does on the same room."""

from __future__ import annotations

import numpy as np

from batchsched.config import default_config
from batchsched.framework.interface import Cycle
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.preemption_world import NOW, node, pod


def test_each_members_results_keep_their_own_plan() -> None:
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
    plans = {key: framework._row_plan(cycle) for key, cycle in cycles.items()}
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
