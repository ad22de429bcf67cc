"""The gang search's checks copy a member's first results on the rows whose room and pods
are back as they were (`BaseRoom.away` at 0) instead of refreshing them: the results and the
placements must be those of refreshing every stale row."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.framework.runtime import Framework
from batchsched.plugins.coscheduling import placement
from batchsched.plugins.coscheduling.preemption import GroupFit, UnitIndex, index_key
from batchsched.preemption.victims import VictimRule
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray
from tests.preemption_world import NOW, node, pod, priority_class, state_of

_NODES = 16


def _fit() -> tuple[GroupFit, ClusterState, list[IntArray]]:
    """Sixteen nodes of different sizes, each with one low-priority pod (a unit), and three
    pending members that fit only where units go: the roomiest node wins each member's
    score, so a member sees the one an earlier member took only with that member's room
    taken."""
    items = [priority_class("high", 9000), priority_class("low", 1000)]
    for i in range(_NODES):
        items.append(node(f"n{i:02}", cpu=4000 + 250 * i))
        items.append(pod(f"v{i:02}", 3000 + 100 * (i % 3), on=f"n{i:02}", klass="low"))
    members = [pod(f"m{i}", 1500 + 200 * i, klass="high") for i in range(3)]
    state = state_of(*items, *members)
    rule = VictimRule(state, members[0], 9000, NOW, lambda name: (False, None))
    index = UnitIndex(state, rule, index_key(state, rule))
    framework = Framework(default_config().profiles[0])
    pending = [state.pods.by_key[p.key] for p in members]
    fit = GroupFit(framework, state, NOW, "g", state.free_for(pending[0]).copy(), pending, 1, index)
    # Each unit's pod count per row, for the expected `away`.
    per_unit = [
        np.bincount([row for _, row in pods], minlength=state.nodes.rows) for pods in index.placed
    ]
    return fit, state, per_unit


def _checks(
    picks: list[list[int]], copy_past: int
) -> tuple[list[list[tuple[str, int]] | None], list[dict[str, tuple[list[bool], list[int]]]], int]:
    """Each check's placement and the members' kept results after it, and how many stale
    rows the framework refreshed in all."""
    fit, state, per_unit = _fit()
    refreshed = 0
    place_changed = fit.framework.place_changed

    def counted(cycle, base, rows):  # type: ignore[no-untyped-def]
        nonlocal refreshed
        refreshed += int(rows.shape[0])
        return place_changed(cycle, base, rows)

    placements: list[list[tuple[str, int]] | None] = []
    kept: list[dict[str, tuple[list[bool], list[int]]]] = []
    count = len(fit.index.units)
    with patch.object(placement, "_COPY_PAST", copy_past):
        fit.framework.place_changed = counted  # type: ignore[method-assign]
        fit.prepare()
        with state.nodes.tentative():
            for pick in picks:
                chosen = np.zeros(count, dtype=np.bool_)
                chosen[[i % count for i in pick]] = True
                found = fit.place(chosen)
                placements.append(None if found is None else [(p.key, r) for p, r in found])
                assert fit.base is not None
                results = fit.base.results
                kept.append(
                    {
                        key: (found.feasible.tolist(), found.total.tolist())
                        for key, found in results.items()
                        if found is not None
                    }
                )
                # After the check every member is off its row again: the units alone count.
                away = sum(
                    (per_unit[u] for u in np.flatnonzero(fit._out)), np.zeros(state.nodes.rows)
                )
                assert fit.base.away.tolist() == away.astype(int).tolist()
            fit.restore()
            assert not fit.base.away.any()
    return placements, kept, refreshed


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, _NODES - 1), min_size=_NODES // 2, max_size=_NODES),
        min_size=2,
        max_size=6,
    )
)
def test_rows_back_as_before_show_the_first_results(picks: list[list[int]]) -> None:
    """Copying on rows back as before (units put back, rows earlier members took and gave
    back) gives what refreshing every stale row gives: fails when a row with a unit still
    off, or with an earlier member on it, is taken as back (a later member would see the
    room the earlier one took), or when `away` is not brought back after a check."""
    copied = _checks(picks, copy_past=0)
    refreshed = _checks(picks, copy_past=10**9)
    assert copied[0] == refreshed[0]
    assert copied[1] == refreshed[1]
    assert copied[2] <= refreshed[2]


def test_the_rows_a_member_took_are_refreshed_for_the_next_member() -> None:
    """All units off: the members spread over the roomiest nodes, each seeing the nodes the
    earlier ones took with their room taken (no unit off there is not enough to copy), and
    a check after one unit came back finds the same with fewer rows refreshed."""
    every = list(range(_NODES))
    picks = [every, every[:-1], every]
    placements, _, copied = _checks(picks, copy_past=0)
    first = placements[0]
    assert first is not None and first == placements[2]
    assert len({row for _, row in first}) == len(first)
    again, _, refreshed = _checks(picks, copy_past=10**9)
    assert again == placements and copied < refreshed
