"""What Backfill's filter finds of a reserved node is kept for the pass and told to every pod
asking the same (per node, request and reservations, until the node's room or reservations
change), the planner's picture of the nodes is given again while nothing it reads moved, and
the scheduler answers the queue's "did it fail as is?" from the attempt just made
(docs/backfill.md#cost): all change how fast, never what. The same clusters scheduled
pass after pass with them and with every answer worked out afresh bind, evict, nominate,
reserve and tell the same."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable
from datetime import datetime
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Decision
from batchsched.plugins.backfill.picture import Picture
from batchsched.plugins.backfill.plugin import Backfill
from batchsched.plugins.backfill.room import KeptOff, RoomChecks
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.resources import Demand
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
                    _afresh(room, "kept_off", forget)
                    _afresh(plugin._picture, "endings", plugin._picture.forget_last)
                    _afresh(plugin, "_refusal", plugin._said.clear)

        def no_memo(pod: Any, now: Any) -> Hashable | None:
            return None

        scheduler._remembered_twin = no_memo  # type: ignore[method-assign]
    return run_steps(state, scheduler, steps)


NO_RUNTIME = [
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
]


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
@example(manifests=NO_RUNTIME, steps=[], hints=False)
def test_kept_room_checks_and_verdicts_decide_as_fresh_ones(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]], hints: bool
) -> None:
    kept = _passes(manifests, steps, kept=True, hints=hints)
    assert kept == _passes(manifests, steps, kept=False, hints=hints)


def _stating_none(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest without a stated runtime."""
    annotations = manifest.get("metadata", {}).get("annotations")
    if not annotations:
        return manifest
    metadata = {**manifest["metadata"], "annotations": {}}
    return {**manifest, "metadata": metadata}


def _checked_against_fresh(room: RoomChecks, calls: list[int]) -> None:
    """Every `kept_off` answer of `room` is compared with one worked out by a fresh
    `RoomChecks` over a fresh picture (nothing kept)."""
    kept_off = room.kept_off

    def checked(
        state: ClusterState,
        own: Collection[str | None],
        demand: Demand,
        now: datetime,
        bound: int | None,
    ) -> KeptOff:
        found = kept_off(state, own, demand, now, bound)
        assert found == RoomChecks(Picture()).kept_off(state, own, demand, now, bound)
        calls.append(1)
        return found

    room.kept_off = checked  # type: ignore[method-assign]


@settings(max_examples=80, deadline=None)
@given(
    reserving_clusters(st.sampled_from([1, 2, 4, 8]), running=3, pending=10),
    st.lists(st.tuples(st.integers(1, 90), st.lists(st.integers(0, 12), max_size=3)), max_size=4),
    st.booleans(),
)
@example(manifests=NO_RUNTIME, steps=[(5, []), (5, [1]), (5, [])], timeless=False)
# Nobody states a runtime; n0 is full. `p6` (1 GPU, the oldest) is told to wait; two pods
# leave n0, the pass begins by asking what 1-GPU pods are kept off (nothing yet), `p2`
# (4 GPUs) reserves n0 and 1-GPU pods bind beside it until n0 keeps no more room: what was
# kept for 1-GPU pods before those binds must not be given to the next one.
@example(
    manifests=[
        node("n0", cpu="64", nvidia_com__gpu="8"),
        *[
            pod(
                f"r0-{j}",
                node_name="n0",
                phase="Running",
                scheduled_at=f"2026-11-22T09:{10 * j:02d}:00Z",
                extra_requests={"nvidia.com/gpu": g},
            )
            for j, g in enumerate(["1", "3", "4"])
        ],
        *[
            pod(f"p{k}", created=f"2026-11-22T09:0{k}:00Z", extra_requests={"nvidia.com/gpu": g})
            for k, g in [(0, "1"), (1, "1"), (2, "4"), (3, "1"), (4, "1"), (5, "1")]
        ],
        pod("p6", created="2026-11-22T08:06:00Z", extra_requests={"nvidia.com/gpu": "1"}),
    ],
    steps=[(1, [0, 1])],
    timeless=False,
)
def test_what_a_pod_is_kept_off_is_what_a_fresh_look_finds(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]], timeless: bool
) -> None:
    """The verdicts and hints read `kept_off`; what it keeps for the pass (per request and
    the holders a pod counts as its own, until the nodes change) is what a fresh look finds,
    as pods come, go and reserve. `timeless`: nobody states a runtime (as in
    `TraceReplay/philly_40nodes_30d`), so every reservation waits for such pods."""
    if timeless:
        manifests = [_stating_none(m) for m in manifests]
    state = build_state(objects_of(*manifests))
    scheduler = Scheduler(state, default_config())
    calls: list[int] = []
    for framework in scheduler.frameworks.values():
        for plugin in framework.plugins.values():
            if isinstance(plugin, Backfill):
                _checked_against_fresh(plugin._room, calls)
    run_steps(state, scheduler, steps)


def test_the_example_with_no_runtime_asks_what_pods_are_kept_off() -> None:
    """The example above is judged by `kept_off` (else it checks nothing of it)."""
    state = build_state(objects_of(*NO_RUNTIME))
    scheduler = Scheduler(state, default_config())
    calls: list[int] = []
    for framework in scheduler.frameworks.values():
        for plugin in framework.plugins.values():
            if isinstance(plugin, Backfill):
                _checked_against_fresh(plugin._room, calls)
    run_steps(state, scheduler, [(5, []), (5, [1]), (5, [])])
    assert len(calls) >= 3
