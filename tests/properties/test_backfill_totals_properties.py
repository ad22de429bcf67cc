"""A plan whose members could start only once pods stating no runtime end is made from what
the picture keeps summed per node (`Picture.totals`, `planner.at_the_end`), not from every
pod's expected end (docs/backfill.md#cost). That changes how fast, never what: on random
clusters scheduled pass after pass, pods leaving between passes, every plan Backfill makes is
the plan that sweeps every moment over a fresh picture of the same nodes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from unittest.mock import patch

from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.plugins.backfill import planner
from batchsched.plugins.backfill.picture import Picture, with_nominated
from batchsched.plugins.backfill.planner import IntArray, Plan, earliest_start
from batchsched.plugins.backfill.plugin import Backfill, _blocks
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import StartReservation
from tests.builders import node, pod
from tests.conftest import objects_of
from tests.properties.strategies import reserving_clusters, run_steps


def _plain(plan: Plan | None) -> object:
    if plan is None:
        return None
    return plan.start, plan.waits_for, {i: share.tolist() for i, share in plan.shares.items()}


def _swept(
    state: ClusterState,
    rows: IntArray,
    members: IntArray,
    now: datetime,
    length: float,
    earlier: Sequence[StartReservation],
    nominated: Sequence[tuple[int, str]],
) -> object:
    """The plan looking at every moment, over a picture of the nodes read afresh."""
    free = state.nodes.free[rows]
    endings = Picture().endings(state, rows.tolist(), now)
    if nominated:
        free, endings = with_nominated(state, rows, free, endings, nominated, now)
    rank = state.nodes.name_rank()[rows]
    blocks = _blocks(state, earlier, rows, now)
    with patch.object(planner, "_never_before_all_end", return_value=False):
        swept = earliest_start(free, rank, endings, members, now.timestamp(), length, blocks)
    return _plain(swept)


def _plans(manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]]) -> int:
    """Schedules the cluster, checking every plan; how many ended at the last moment."""
    state = build_state(objects_of(*manifests))
    scheduler = Scheduler(state, default_config())
    last: list[object] = []
    for framework in scheduler.frameworks.values():
        for plugin in framework.plugins.values():
            if isinstance(plugin, Backfill):
                earliest = plugin._earliest

                def checked(*args: Any, earliest: Any = earliest) -> Plan | None:
                    plan: Plan | None = earliest(*args)
                    assert _plain(plan) == _swept(*args)
                    if plan is not None and plan.start is None:
                        last.append(plan)
                    return plan

                plugin._earliest = checked  # type: ignore[method-assign]
    run_steps(state, scheduler, steps)
    return len(last)


def _gpus(name: str, gpus: int, **more: Any) -> dict[str, Any]:
    return pod(name, extra_requests={"nvidia.com/gpu": str(gpus)}, **more)


# `p0` (8 GPUs, no runtime) reserves n1 once the pod stating none there ends (one pod there,
# two on n0); `r1` leaves n1, `p0` binds there, and `p1` then plans on n0 alone.
LAST_MOMENT = [
    node("n0", cpu="64", nvidia_com__gpu="8"),
    node("n1", cpu="64", nvidia_com__gpu="8"),
    _gpus("r0", 4, node_name="n0", phase="Running", scheduled_at="2026-11-22T09:00:00Z"),
    _gpus("r0b", 4, node_name="n0", phase="Running", scheduled_at="2026-11-22T09:00:00Z"),
    _gpus("r1", 8, node_name="n1", phase="Running", scheduled_at="2026-11-22T09:00:00Z"),
    _gpus("p0", 8, created="2026-11-22T08:00:00Z"),
    _gpus("p1", 8, created="2026-11-22T08:01:00Z"),
]
LAST_MOMENT_STEPS = [(5, []), (5, [2]), (5, [])]


@settings(max_examples=80, deadline=None)
@given(
    reserving_clusters(st.sampled_from([2, 4, 8]), running=3, pending=8),
    st.lists(st.tuples(st.integers(1, 90), st.lists(st.integers(0, 12), max_size=3)), max_size=5),
)
@example(manifests=LAST_MOMENT, steps=LAST_MOMENT_STEPS)
def test_a_plan_from_the_kept_sums_is_the_plan_sweeping_every_moment(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]]
) -> None:
    _plans(manifests, steps)


def test_the_example_plans_at_the_last_moment() -> None:
    """The example above takes the sums' way, more than once (else it checks nothing)."""
    assert _plans(LAST_MOMENT, LAST_MOMENT_STEPS) >= 2
