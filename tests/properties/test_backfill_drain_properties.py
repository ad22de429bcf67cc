"""Backfill's score reads the clock (how much of a pod's stated runtime a node is busy anyway
changes as time passes, docs/backfill.md, "Where other pods go"), and the framework keeps
each pod shape's scores between passes, refreshed only where rows changed and made again
once a score said it may have changed (`Cycle.changes_at`). The same clusters, with pods
coming minutes apart, scheduled with those kept results and with every pod's placement
worked out afresh, bind, evict, nominate, reserve and tell the same."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import pod
from tests.conftest import NOW, objects_of
from tests.properties.strategies import reserving_clusters, stated

# Pending pods come in a few shapes, so a later one finds its shape's results kept.
SHAPES = st.tuples(st.sampled_from([1, 2, 8]), st.sampled_from([None, 30, 60]))


def _passes(
    manifests: list[dict[str, Any]],
    waves: list[tuple[int, list[tuple[int, int | None]]]],
    kept: bool,
) -> list[Any]:
    """Each wave: so many minutes later, pods of those shapes created (some long created:
    they may reserve), then one pass: its decisions and the messages after it."""
    state = build_state(objects_of(*manifests))
    scheduler = Scheduler(state, default_config())
    if not kept:
        for framework in scheduler.frameworks.values():
            # No kept placement: every pod is filtered and scored over every node afresh.
            framework.placements.kept = lambda cycle: None  # type: ignore[method-assign]
            framework.evaluate = lambda cycle: None  # type: ignore[method-assign]
    instant = NOW
    decided: list[Any] = []
    count = 0
    for minutes, shapes in waves:
        instant += timedelta(minutes=minutes)
        for gpus, runtime in shapes:
            created = instant - timedelta(hours=1 if count % 2 else 0)
            made = pod(
                f"p{count:02d}",
                annotations=stated(runtime),
                created=created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                extra_requests={"nvidia.com/gpu": str(gpus)},
            )
            state.upsert_pod(objects_of(made).pods[0])
            count += 1
        decided.append(scheduler.schedule_pass(instant))
        decided.append([*sorted(scheduler.messages.items())])
    return decided


@settings(max_examples=60, deadline=None)
@given(
    # Eight nodes: a pass changing one or two refreshes the kept scores there alone.
    reserving_clusters(running=2, pending=0, nodes=st.just(8)),
    st.lists(
        st.tuples(st.integers(0, 40), st.lists(SHAPES, min_size=1, max_size=3)),
        min_size=1,
        max_size=6,
    ),
)
def test_kept_scores_decide_as_fresh_ones_as_time_passes(
    manifests: list[dict[str, Any]], waves: list[tuple[int, list[tuple[int, int | None]]]]
) -> None:
    assert _passes(manifests, waves, kept=True) == _passes(manifests, waves, kept=False)
