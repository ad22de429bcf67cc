"""The cycle collector's pace during a one-shot run (and a simulation, tests/sim)."""

from __future__ import annotations

import gc
from unittest.mock import patch

import batchsched.commands.schedule as oneshot
from batchsched.collector import fewer_collections
from batchsched.config import default_config
from batchsched.objects.load import Objects
from batchsched.state.cluster import ClusterState
from benchmarks.workloads import contended


def test_fewer_collections_raises_the_thresholds_and_puts_them_back() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 1_000)
        with fewer_collections():
            assert gc.get_threshold() == (100_000, 50, 1_000)  # a higher one is kept
        assert gc.get_threshold() == (700, 10, 1_000)
    finally:
        gc.set_threshold(*before)


def test_a_one_shot_run_schedules_at_the_slower_pace_and_leaves_it() -> None:
    seen = []
    build = oneshot.build_state

    def watched(objects: Objects) -> ClusterState:
        seen.append(gc.get_threshold())
        return build(objects)

    before = gc.get_threshold()
    with patch.object(oneshot, "build_state", watched):
        result = oneshot.run(contended.generate(10, 1), default_config(), contended.NOW)
    assert result.bindings
    assert seen == [tuple(max(a, b) for a, b in zip(before, (100_000, 50, 100), strict=True))]
    assert gc.get_threshold() == before
