"""A failed pod's answer is told to pods that differ from it only in their stated runtime
while Backfill says the same of them on every reserved node (docs/backfill.md#cost): that
sharing changes how fast, never what. The same clusters scheduled pass after pass with it and
with every pod attempted in full bind, evict, nominate, reserve and tell the same."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Decision
from batchsched.scheduling.scheduler import Scheduler
from tests.conftest import objects_of
from tests.properties.strategies import one_node_reserved, reserving_clusters, run_steps, waiting


def _passes(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]], shared: bool
) -> list[list[Decision]]:
    """Every pass's decisions and messages; without `shared`, no failure is told to another
    pod (each is attempted in full). Every waiting pod is tried in every pass (no hints), so
    the two runs try the same pods in the same order."""
    state = build_state(objects_of(*manifests))
    scheduler = Scheduler(state, default_config(), queueing_hints=False)
    if not shared:
        scheduler._failed_twin = lambda twin, now: None  # type: ignore[method-assign]
    return run_steps(state, scheduler, steps)


@settings(max_examples=80, deadline=None)
@given(
    reserving_clusters(st.sampled_from([1, 2, 4, 8]), running=3, pending=10),
    st.lists(st.tuples(st.integers(1, 90), st.lists(st.integers(0, 12), max_size=3)), max_size=4),
)
# `p0` reserves n0 (start 10:30); `p1` (2 h) is kept off it and fits nowhere else; `p2`, of
# the same size, ends by the start and backfills; `p3` (4 h) is told `p1`'s answer.
@example(
    manifests=[
        *one_node_reserved(),
        *waiting((1, 4, 120), (2, 4, 20), (3, 4, 240)),
    ],
    steps=[(15, [])],
)
def test_a_failure_told_across_runtimes_is_what_an_attempt_finds(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]]
) -> None:
    assert _passes(manifests, steps, shared=True) == _passes(manifests, steps, shared=False)
