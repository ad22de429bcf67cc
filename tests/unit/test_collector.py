"""The cycle collector's pace during a one-shot run and a simulation (its run: tests/sim)."""

from __future__ import annotations

import gc
from unittest.mock import patch

import batchsched.commands.schedule as oneshot
from batchsched.collector import fewer_collections, kept_to_the_end
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


class Kept:
    """A container the collector tracks (as a simulation's records are)."""


def test_kept_to_the_end_walks_only_the_youngest_generation_during_the_run() -> None:
    walked: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            walked.append(info["generation"])

    before = gc.get_threshold()
    gc.callbacks.append(seen)
    try:
        with kept_to_the_end():
            assert gc.get_threshold()[0] == max(before[0], 100_000)
            for _ in range(60):  # more youngest collections than fewer_collections' 50...
                gc.collect(0)
            # ...so the collection this many allocations make would walk the middle one too.
            kept = [Kept() for _ in range(gc.get_threshold()[0] + 1)]
    finally:
        gc.callbacks.remove(seen)
    assert gc.get_threshold() == before
    assert walked and set(walked) == {0}
    del kept


def test_kept_to_the_end_files_what_the_run_kept_in_the_oldest_generation() -> None:
    gc.unfreeze()  # (a test before may have frozen objects, as `batchsched run` does)
    with kept_to_the_end():
        kept = Kept()
    assert gc.get_freeze_count() == 0
    assert any(obj is kept for obj in gc.get_objects(generation=2))


def test_kept_to_the_end_leaves_objects_someone_froze_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with kept_to_the_end():
            kept = Kept()
        assert gc.get_freeze_count() == frozen  # not handed back to the collector
        assert any(obj is kept for obj in gc.get_objects(generation=0))
    finally:
        gc.unfreeze()
