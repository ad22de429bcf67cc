"""What Backfill's filter finds of a reserved node is kept for the pass and told to every pod
asking the same (per node, request and reservations, until the node's room or reservations
change), the planner's picture of the nodes is given again while nothing it reads moved, and
the scheduler answers the queue's "did it fail as is?" from the attempt just made
(docs/backfill.md#cost): all change how fast, never what. The same clusters scheduled
pass after pass with them and with every answer worked out afresh bind, evict, nominate,
reserve and tell the same."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Decision
from batchsched.plugins.backfill.plugin import Backfill
from batchsched.scheduling.scheduler import Scheduler
from tests.conftest import objects_of
from tests.properties.strategies import one_node_reserved, reserving_clusters, run_steps, waiting


def _afresh(kept: Any, method: str, forget: Callable[[], None]) -> None:
    """`method` of `kept` forgets what it kept before each call."""
    found = getattr(kept, method)

    def afresh(*args: Any) -> Any:
        forget()
        return found(*args)

    setattr(kept, method, afresh)


def _passes(
    manifests: list[dict[str, Any]],
    steps: list[tuple[int, list[int]]],
    kept: bool,
    hints: bool,
) -> list[list[Decision]]:
    """Every pass's decisions and messages; without `kept`, Backfill judges every reserved
    node afresh for every pod and reads the nodes afresh for every plan, and the scheduler
    judges a pod's verdicts again when the queue asks whether it failed as is."""
    state = build_state(objects_of(*manifests))
    scheduler = Scheduler(state, default_config(), queueing_hints=hints)
    if not kept:
        for framework in scheduler.frameworks.values():
            for plugin in framework.plugins.values():
                if isinstance(plugin, Backfill):
                    _afresh(plugin._room, "checks", plugin._room.new_pass)
                    _afresh(plugin._room, "refusers", plugin._room.new_pass)
                    _afresh(plugin._room, "kept_off", plugin._room.new_pass)
                    _afresh(plugin._picture, "endings", plugin._picture.forget_last)
                    _afresh(plugin, "_refusal", plugin._said.clear)

        def no_memo(pod: Any, now: Any) -> Hashable | None:
            return None

        scheduler._remembered_twin = no_memo  # type: ignore[method-assign]
    return run_steps(state, scheduler, steps)


@settings(max_examples=80, deadline=None)
@given(
    reserving_clusters(st.sampled_from([1, 2, 4, 8]), running=3, pending=10),
    st.lists(st.tuples(st.integers(1, 90), st.lists(st.integers(0, 12), max_size=3)), max_size=4),
    st.booleans(),
)
# `p0` reserves n0 (start 10:30, n0 half taken until then); `p1` (1 GPU, 2 h) fits beside
# the share and takes half of the rest; `p2` (2 GPUs, 2 h), judged in the same pass, would be
# told that the node keeps room if the answer were kept for the node alone, not per request
# and state of the node.
@example(
    manifests=[
        *one_node_reserved(),
        *waiting((1, 2, 120), (2, 2, 120), (3, 1, 120)),
    ],
    steps=[(15, [])],
    hints=True,
)
# `p1` (1 GPU, 2 h) would run past p0's start on n0 and is kept off it; `p2` (1 GPU, 10 min)
# asks the same but ends before it and backfills: were verdicts kept per request alone, not
# per the starts a pod runs past, p2 would be told p1's.
@example(
    manifests=[
        *one_node_reserved(),
        *waiting((1, 1, 120), (2, 1, 10)),
    ],
    steps=[],
    hints=True,
)
def test_kept_room_checks_and_verdicts_decide_as_fresh_ones(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]], hints: bool
) -> None:
    kept = _passes(manifests, steps, kept=True, hints=hints)
    assert kept == _passes(manifests, steps, kept=False, hints=hints)
