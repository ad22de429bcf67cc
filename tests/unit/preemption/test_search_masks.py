"""The gang search changes its choice in place and tells each check which units changed
(the prefix positions added or taken back), and the reprieve step looks within the working
prefix only (`GroupFit.confine`): after every move the units off their nodes must be
exactly the check's choice, with their room, as a comparison over every unit gives."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import numpy as np
import pytest

from batchsched.commands.schedule import run
from batchsched.config import default_config
from batchsched.plugins.coscheduling.preemption import GroupFit
from batchsched.state.nodes import BoolArray, IntArray
from benchmarks.workloads import contended


def _room_of(fit: GroupFit, out: BoolArray) -> IntArray:
    """`free` plus the room of the units of `out`, summed afresh."""
    index = fit.index
    room = fit.free.copy()
    entries = index.entries(np.flatnonzero(out))
    np.add.at(room, (index.rows[entries], index.cols[entries]), index.amounts[entries])
    return room


@pytest.mark.parametrize(("nodes", "seed"), [(120, 7), (90, 3)])
def test_every_move_leaves_the_choice_off_its_nodes(nodes: int, seed: int) -> None:
    """Fails when a check is told too few changed units (a prefix grown or shortened by
    the wrong span, a reprieve choice outside the scope): a unit of the choice would stay
    on its node, or a unit not chosen off it; and when the reprieve step does not start
    from the whole working prefix."""
    original = GroupFit._move
    moves = {"hinted": 0, "scoped": 0, "confined": 0}

    def checked(self: GroupFit, chosen: BoolArray, changed: IntArray | None = None) -> None:
        if changed is not None:
            moves["hinted"] += 1
        elif self._scope is not None:
            moves["scoped"] += 1
            assert not chosen[np.setdiff1d(np.arange(chosen.size), self._scope)].any()
        original(self, chosen, changed)
        assert np.array_equal(self._out, chosen)
        assert np.array_equal(self._room, _room_of(self, chosen))

    spare = GroupFit.spare
    starts: list[bool] = []

    def first_spare(self: GroupFit, chosen: BoolArray, placements: Any) -> Any:
        # The reprieve step starts from the whole working prefix (the scope), whichever
        # prefix the bisection checked last.
        if len(starts) < moves["confined"]:
            assert self._scope is not None
            starts.append(int(chosen.sum()) == self._scope.size and bool(chosen[self._scope].all()))
        return spare(self, chosen, placements)

    confine = GroupFit.confine

    def counted(self: GroupFit, units: IntArray | None) -> None:
        moves["confined"] += units is not None
        confine(self, units)

    cached = run(contended.generate(nodes, seed), default_config(), contended.NOW)
    with (
        patch.object(GroupFit, "_move", checked),
        patch.object(GroupFit, "spare", first_spare),
        patch.object(GroupFit, "confine", counted),
    ):
        watched = run(contended.generate(nodes, seed), default_config(), contended.NOW)
    assert moves["hinted"] and moves["scoped"] and starts and all(starts)
    assert watched.to_json() == cached.to_json()


def test_decisions_as_with_every_unit_compared() -> None:
    """The same decisions when every check compares its choice over every unit (no hint,
    no scope), as before the search told the checks what changed."""
    place = GroupFit.place

    def unhinted(self: GroupFit, chosen: BoolArray, changed: Any = None) -> Any:
        return place(self, chosen)

    def unscoped(self: GroupFit, units: Any) -> None:
        self._scope = None

    hinted = run(contended.generate(120, 7), default_config(), contended.NOW)
    with patch.object(GroupFit, "place", unhinted), patch.object(GroupFit, "confine", unscoped):
        compared = run(contended.generate(120, 7), default_config(), contended.NOW)
    assert hinted.to_json() == compared.to_json()
    assert hinted.evictions
