"""Why a node cannot host a preemptor, for the pending pod's message
(docs/preemption-toleration.md).

A row fails because a victim's PriorityClass is missing (upstream skips such a node with an
error), because victims that would make room tolerate the preemptor (the message names their
classes and, for time-limited toleration, when enough of it ends for the preemptor to fit), or
because there is nothing to take. Reasons are interned per preemptor shape, so kept per-row
results carry a small id and the message is assembled only when no node works.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from batchsched.framework.interface import IndexArray
from batchsched.objects.parse import format_time
from batchsched.preemption.victim_table import FloatArray, VictimTable
from batchsched.state.nodes import BoolArray
from batchsched.state.resources import Demand

if TYPE_CHECKING:
    from batchsched.preemption.nodes import RowResults, Slots

NO_VICTIMS = "No preemption victims found"
_LAST_TIMESTAMP = datetime(9999, 12, 31, tzinfo=UTC).timestamp()
HELD_BY_TOLERATION = "victims tolerate preemption"  # in a message: a toleration held it back
GROUP_PLACED = " members can run ("  # in the message of a group whose members were placed
_GROUP_PREEMPTION = " preemption: "  # where the group's preemption's part begins


class Reasons:
    """Why rows cannot host a preemptor, interned: (kind, class names) -> id."""

    MISSING, TOLERATED, NOTHING = "missing", "tolerated", "nothing"

    def __init__(self) -> None:
        self._ids: dict[tuple[str, tuple[str, ...]], int] = {}
        self._keys: list[tuple[str, tuple[str, ...]]] = []

    def id(self, kind: str, classes: tuple[str, ...] = ()) -> int:
        key = (kind, classes)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._keys)
            self._keys.append(key)
        return found

    def shows_unlock(self, rid: int) -> bool:
        """Whether `text` of this reason shows its unlock time (tolerations held it back)."""
        return self._keys[rid][0] == self.TOLERATED

    def text(self, rid: int, unlock: float) -> str:
        kind, classes = self._keys[rid]
        listed = ", ".join(classes)
        if kind == self.MISSING:
            return f"victims' PriorityClass not found ({listed})"
        if kind == self.TOLERATED:
            if unlock < _LAST_TIMESTAMP:  # later than a date can show: as good as never
                listed += ", until " + format_time(datetime.fromtimestamp(unlock, UTC))
            return f"{HELD_BY_TOLERATION} ({listed})"
        return NO_VICTIMS


def explain(
    table: VictimTable,
    slots: Slots,
    demand: Demand,
    reasons: Reasons,
    failed: IndexArray,
    into: RowResults,
) -> None:
    """Reason ids (and unlock times) for the `failed` rows of `slots`."""
    names = table.class_names

    def classes_of(i: int, marked: BoolArray) -> tuple[str, ...]:
        return tuple(sorted({names[int(c)] for c in slots.klass[i][marked[i]]}))

    into.reason[failed] = reasons.id(Reasons.NOTHING)
    for i in failed[slots.missing_row[failed]]:
        into.reason[i] = reasons.id(Reasons.MISSING, classes_of(int(i), slots.missing))
    maybe = failed[~slots.missing_row[failed] & slots.exempt[failed].any(axis=1)]
    if maybe.size == 0:
        return
    gained = (slots.request[maybe] * slots.exempt[maybe][:, :, None]).sum(axis=1)
    waiting = maybe[(slots.freed[maybe] + gained >= demand.amounts).all(axis=1)]
    if waiting.size == 0:
        return
    into.unlock[waiting] = _unlock_times(slots, waiting, demand)
    for i in waiting:
        into.reason[i] = reasons.id(Reasons.TOLERATED, classes_of(int(i), slots.exempt))


def _unlock_times(slots: Slots, rows: IndexArray, demand: Demand) -> FloatArray:
    """For `rows`: the first time enough time-limited tolerations end for the preemptor to fit."""
    ends = slots.ends[rows]
    order = np.argsort(ends, axis=1, kind="stable")
    gained = np.take_along_axis(
        slots.request[rows] * slots.exempt[rows][:, :, None], order[:, :, None], axis=1
    )
    room = slots.freed[rows][:, None, :] + np.cumsum(gained, axis=1)
    ends_sorted = np.take_along_axis(ends, order, axis=1)
    works = (room >= demand.amounts).all(axis=2) & np.isfinite(ends_sorted)
    first = np.where(works.any(axis=1), works.argmax(axis=1), -1)
    picked = ends_sorted[np.arange(rows.size), np.maximum(first, 0)]
    result: FloatArray = np.where(first >= 0, picked, math.inf)
    return result


def preemption_said(message: str) -> str | None:
    """What a gang member's message says of its group's preemption (Coscheduling writes it):
    the preemption part, "" when the members were placed but no preemption was tried, None
    when the group was not attempted (waiting, or refused before any node was looked at,
    e.g. for minResources)."""
    if GROUP_PLACED not in message:
        return None
    _, found, said = message.partition(_GROUP_PREEMPTION)
    return _GROUP_PREEMPTION.lstrip() + said if found else ""
