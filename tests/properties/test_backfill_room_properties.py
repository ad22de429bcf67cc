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
from tests.builders import node, pod
from tests.conftest import objects_of
from tests.properties.strategies import one_node_reserved, reserving_clusters, run_steps, waiting


def _afresh(kept: Any, method: str, forget: Callable[[], None]) -> None:
    """`method` of `kept` forgets what it kept before each call."""
    found = getattr(kept, method)

    def afresh(*args: Any) -> Any:
        forget()
        return found(*args)

    setattr(kept, method, afresh)


def _forgetting(room: Any) -> Callable[[], None]:
    """Forget all `room` kept: for the pass, and the answers it keeps across passes."""

    def forget() -> None:
        room.new_pass()
        room._lasting.clear()

    return forget


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
                    room = plugin._room
                    forget = _forgetting(room)
                    _afresh(room, "checks", forget)
                    _afresh(room, "refusers", forget)
                    _afresh(room, "kept_off", forget)
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
# Nobody states a runtime. n0 runs three 1-GPU pods; `p1` (2 GPUs) binds, `p2` (4) reserves
# n0 for once they all end, `p3` (1) and `p6` (2) bind beside that reservation, and `p7` (2)
# must be kept off it: with p3 and p6 there n0 no longer keeps p2's room. An answer kept
# across passes is dropped when the node changes: kept after p6 bound, p7 would be told p6's.
@example(
    manifests=[
        node("n0", cpu="64", nvidia_com__gpu="8"),
        *[
            pod(
                f"r0-{j}",
                node_name="n0",
                phase="Running",
                scheduled_at=f"2026-11-22T09:{10 * j:02d}:00Z",
                extra_requests={"nvidia.com/gpu": "1"},
            )
            for j in range(3)
        ],
        *[
            pod(f"p{k}", created=f"2026-11-22T09:0{k}:00Z", extra_requests={"nvidia.com/gpu": g})
            for k, g in [(1, "2"), (2, "4"), (3, "1"), (6, "2"), (7, "2")]
        ],
    ],
    steps=[],
    hints=False,
)
def test_kept_room_checks_and_verdicts_decide_as_fresh_ones(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]], hints: bool
) -> None:
    kept = _passes(manifests, steps, kept=True, hints=hints)
    assert kept == _passes(manifests, steps, kept=False, hints=hints)
