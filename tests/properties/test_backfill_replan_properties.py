"""A holder whose nodes are as they were keeps its reservation unless planning again finds a
sooner start; where it has no expected start and no node could hold it at any moment a plan
could give (`Backfill._may_start_sooner`), it is not planned again (docs/backfill.md#cost).
That changes how fast, never what: whenever the check says no, a plan made in full starts no
sooner, and the same clusters scheduled pass after pass with it and with every holder planned
again in full bind, evict, nominate, reserve and tell the same."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Decision
from batchsched.objects.records import Pod
from batchsched.plugins.backfill.planner import IntArray
from batchsched.plugins.backfill.plugin import Backfill, _sooner
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import StartReservation
from tests.builders import node, pod
from tests.conftest import objects_of
from tests.properties.strategies import reserving_clusters, run_steps, stated

# The checks that said no, each with whether a plan made in full would start sooner.
Said = list[bool]


def _watched(plugin: Backfill, said_no: Said, full: bool) -> None:
    """Every time the check says no, plan in full and note whether that starts sooner;
    with `full`, the check always says yes (every holder is planned again)."""
    check = plugin._may_start_sooner

    def watched(
        state: ClusterState,
        kept: StartReservation,
        pods: Sequence[Pod],
        earlier: Sequence[StartReservation],
        now: datetime,
        most_room: IntArray,
    ) -> bool:
        if full:
            return True
        found = check(state, kept, pods, earlier, now, most_room)
        if not found:
            framework = plugin._framework
            assert framework is not None
            daemon = set(state.reservations.by_row)
            holding = kept.holder in plugin._holders
            plan = plugin._plan(framework, state, kept.holder, pods, now, earlier, daemon, holding)
            said_no.append(_sooner(plan, kept))
        return found

    plugin._may_start_sooner = watched  # type: ignore[method-assign]


def _passes(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]], full: bool
) -> tuple[list[list[Decision]], Said]:
    state = build_state(objects_of(*manifests))
    scheduler = Scheduler(state, default_config())
    said_no: Said = []
    for framework in scheduler.frameworks.values():
        for plugin in framework.plugins.values():
            if isinstance(plugin, Backfill):
                _watched(plugin, said_no, full)
    return run_steps(state, scheduler, steps), said_no


def _gpus(name: str, gpus: int, **more: Any) -> dict[str, Any]:
    return pod(name, extra_requests={"nvidia.com/gpu": str(gpus)}, **more)


@settings(max_examples=80, deadline=None)
@given(
    reserving_clusters(st.sampled_from([2, 4, 8]), running=3, pending=8),
    st.lists(st.tuples(st.integers(1, 90), st.lists(st.integers(0, 12), max_size=3)), max_size=5),
)
# `p0` (8 GPUs, no runtime) reserves n0 (one pod to wait for, against two on n1), and is
# planned again the next pass. Then `r1b` leaves n1: n0 is as it was, and with `r1` staying
# for good no node could ever hold `p0` sooner, so it is not planned again. Then `r1`
# leaves: n1 is free, a sooner start.
@example(
    manifests=[
        node("n0", cpu="64", nvidia_com__gpu="8"),
        node("n1", cpu="64", nvidia_com__gpu="8"),
        _gpus("r0", 8, node_name="n0", phase="Running", scheduled_at="2026-11-22T09:00:00Z"),
        _gpus("r1", 4, node_name="n1", phase="Running", scheduled_at="2026-11-22T09:00:00Z"),
        _gpus("r1b", 4, node_name="n1", phase="Running", scheduled_at="2026-11-22T09:00:00Z"),
        _gpus("p0", 8, created="2026-11-22T08:00:00Z"),
    ],
    steps=[(5, []), (5, [2]), (5, [1])],
)
# As above, but `r1b` states 1 h (from 09:30): once `r1` leaves n1, `p0` can start there at
# 10:30, sooner than on n0; the check must count the room `r1b` gives back by then.
@example(
    manifests=[
        node("n0", cpu="64", nvidia_com__gpu="8"),
        node("n1", cpu="64", nvidia_com__gpu="8"),
        _gpus("r0", 8, node_name="n0", phase="Running", scheduled_at="2026-11-22T09:00:00Z"),
        _gpus("r1", 4, node_name="n1", phase="Running", scheduled_at="2026-11-22T09:00:00Z"),
        _gpus(
            "r1b",
            4,
            node_name="n1",
            phase="Running",
            scheduled_at="2026-11-22T09:30:00Z",
            annotations=stated(60),
        ),
        _gpus("p0", 8, created="2026-11-22T08:00:00Z"),
    ],
    steps=[(5, []), (5, [1])],
)
def test_a_holder_not_planned_again_would_start_no_sooner(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]]
) -> None:
    checked, said_no = _passes(manifests, steps, full=False)
    assert not any(said_no), "a holder that would start sooner was not planned again"
    assert checked == _passes(manifests, steps, full=True)[0]
