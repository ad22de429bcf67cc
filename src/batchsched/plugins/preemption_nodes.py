"""Victim search on every candidate node at once, over the VictimTable's arrays.

The same rules as `preemption_victims.select_victims_on_node` with single-pod victims, run
for all candidate rows together: removal and reprieve are array operations per slot
position (slots are in importance order in every row), and node choice is one lexsort over
the SPEC's criteria. When no node works, the rows are classified for the message: which
failed because victims tolerate the preemptor (and until when), which because a victim's
PriorityClass is missing, and which had nothing to take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from batchsched.objects.parse import format_time
from batchsched.objects.records import Pod
from batchsched.plugins.base import IndexArray
from batchsched.plugins.preemption_victims import PRIORITY_SHIFT, VictimRule
from batchsched.plugins.toleration_policy import FOREVER
from batchsched.plugins.victim_table import FloatArray, VictimTable
from batchsched.state.cluster import BoolArray, Demand, IntArray

NO_VICTIMS = "No preemption victims found"


@dataclass(slots=True)
class Evaluation:
    """The chosen node (if any) and, when none works, a reason count per failed row."""

    row: int | None = None
    victims: list[Pod] = field(default_factory=list)
    pdb_violations: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _ClassArrays:
    """Per class id (the last entry: no class) verdicts of the rule, as arrays."""

    missing: BoolArray
    forever: BoolArray
    timed: BoolArray
    seconds: FloatArray

    @classmethod
    def of(cls, table: VictimTable, rule: VictimRule) -> _ClassArrays:
        count = len(table.class_names) + 1
        missing = np.zeros(count, dtype=np.bool_)
        forever = np.zeros(count, dtype=np.bool_)
        timed = np.zeros(count, dtype=np.bool_)
        seconds = np.zeros(count)
        for cid, name in enumerate(table.class_names):
            is_missing, toleration = rule.verdict(name)
            missing[cid] = is_missing
            if toleration == FOREVER:
                forever[cid] = True
            elif toleration is not None:
                timed[cid] = True
                seconds[cid] = toleration
        return cls(missing, forever, timed, seconds)


def evaluate(
    table: VictimTable, rule: VictimRule, demand: Demand, base_free: IntArray, rows: IndexArray
) -> Evaluation:
    """Victims on the best of `rows` for the rule's preemptor, or why none works."""
    table.sync()
    now = rule.now.timestamp()
    classes = _ClassArrays.of(table, rule)
    klass = table.klass[rows]
    klass = np.where(klass < 0, len(table.class_names), klass)
    priority = table.priority[rows]
    lower = (priority < rule.priority) & ~table.terminating[rows]
    since = table.since[rows]
    timed = classes.timed[klass] & (np.isnan(since) | (since + classes.seconds[klass] > now))
    exempt = lower & (classes.forever[klass] | timed)
    missing_row: BoolArray = np.asarray((lower & classes.missing[klass]).any(axis=1))
    take = lower & ~exempt & ~missing_row[:, None]
    request = table.request[np.ix_(rows, np.arange(table.slots), demand.cols)]
    free = base_free[np.ix_(rows, demand.cols)] + table.terminating_room[np.ix_(rows, demand.cols)]
    freed = free + (request * take[:, :, None]).sum(axis=1)
    works = (freed >= demand.amounts).all(axis=1) & ~missing_row
    if not works.any():
        reasons = _failure_reasons(
            table, rows, demand, freed, exempt, timed & exempt, missing_row, lower, klass, classes
        )
        return Evaluation(reasons=reasons)
    ok = np.flatnonzero(works)
    victim, violating = _reprieve(
        table, rule, rows[ok], take[ok], request[ok], freed[ok], demand.amounts
    )
    best = _best(table, rule, rows[ok], victim, violating, priority[ok], now)
    row = int(rows[ok][best])
    slots = np.flatnonzero(victim[best])
    return Evaluation(
        row=row,
        victims=[table.pods[row][int(s)] for s in slots],
        pdb_violations=int((victim[best] & violating[best]).sum()),
    )


def _reprieve(
    table: VictimTable,
    rule: VictimRule,
    rows: IndexArray,
    take: BoolArray,
    request: IntArray,
    freed: IntArray,
    amounts: IntArray,
) -> tuple[BoolArray, BoolArray]:
    """Victim and PDB-violation masks per (row, slot) after reprieving what can stay."""
    violating = np.zeros(take.shape, dtype=np.bool_)
    for pdb in rule.state.pdbs.values():
        covered = table.pdb_mask(pdb)[rows] & take
        if covered.any():
            violating |= covered & (np.cumsum(covered, axis=1) > pdb.disruptions_allowed)
    order = np.argsort(~violating, axis=1, kind="stable") if violating.any() else None
    victim = np.zeros(take.shape, dtype=np.bool_)
    current = freed.copy()
    everywhere = np.arange(take.shape[0])
    for pos in range(take.shape[1]):
        slot = order[:, pos] if order is not None else np.full(take.shape[0], pos)
        takes = take[everywhere, slot]
        if not takes.any():
            continue
        trial = current - request[everywhere, slot]
        stays = takes & (trial >= amounts).all(axis=1)
        current = np.where(stays[:, None], trial, current)
        victim[everywhere, slot] = takes & ~stays
    return victim, violating


def _best(
    table: VictimTable,
    rule: VictimRule,
    rows: IndexArray,
    victim: BoolArray,
    violating: BoolArray,
    priority: IntArray,
    now: float,
) -> int:
    """Index into `rows` of the node the SPEC's order prefers."""
    low = np.iinfo(np.int64).min
    victim_priority = np.where(victim, priority, low)
    highest = victim_priority.max(axis=1)
    total = np.where(victim, priority + PRIORITY_SHIFT, 0).sum(axis=1)
    count = victim.sum(axis=1)
    start = np.minimum(table.start[rows], now)
    top = victim & (priority == highest[:, None])
    earliest = np.where(top, start, math.inf).min(axis=1)
    names = rule.state.name_rank()[rows]
    order = np.lexsort((names, -earliest, count, total, highest, (victim & violating).sum(axis=1)))
    return int(order[0])


def _failure_reasons(
    table: VictimTable,
    rows: IndexArray,
    demand: Demand,
    freed: IntArray,
    exempt: BoolArray,
    timed: BoolArray,
    missing_row: BoolArray,
    lower: BoolArray,
    klass: npt.NDArray[np.int32],
    classes: _ClassArrays,
) -> dict[str, int]:
    reasons: dict[str, int] = {}

    def count(reason: str, n: int) -> None:
        if n:
            reasons[reason] = reasons.get(reason, 0) + n

    names = [*table.class_names, ""]
    for group in _distinct_rows(lower & classes.missing[klass] & missing_row[:, None], klass):
        listed = ", ".join(sorted({names[c] for c in group.classes}))
        count(f"victims' PriorityClass not found ({listed})", group.rows.size)
    request = table.request[np.ix_(rows, np.arange(table.slots), demand.cols)]
    with_exempt = freed + (request * exempt[:, :, None]).sum(axis=1)
    tolerated = (with_exempt >= demand.amounts).all(axis=1) & ~missing_row
    count(NO_VICTIMS, int((~tolerated & ~missing_row).sum()))
    if not tolerated.any():
        return reasons
    unlock = _unlock_times(table, rows, demand, freed, exempt, timed, klass, classes)
    for group in _distinct_rows(exempt & tolerated[:, None], klass):
        listed = ", ".join(sorted({names[c] for c in group.classes}))
        until = unlock[group.rows].min()
        if math.isfinite(until):
            listed += ", until " + format_time(datetime.fromtimestamp(until, UTC))
        count(f"victims tolerate preemption ({listed})", group.rows.size)
    return reasons


def _unlock_times(
    table: VictimTable,
    rows: IndexArray,
    demand: Demand,
    freed: IntArray,
    exempt: BoolArray,
    timed: BoolArray,
    klass: npt.NDArray[np.int32],
    classes: _ClassArrays,
) -> FloatArray:
    """Per row: the first time enough time-limited tolerations end for the preemptor to fit."""
    since = table.since[rows]
    ends = np.where(timed & ~np.isnan(since), since + classes.seconds[klass], math.inf)
    ends = np.where(exempt, ends, math.inf)
    order = np.argsort(ends, axis=1, kind="stable")
    request = table.request[np.ix_(rows, np.arange(table.slots), demand.cols)]
    gained = np.take_along_axis(request * exempt[:, :, None], order[:, :, None], axis=1)
    room = freed[:, None, :] + np.cumsum(gained, axis=1)
    ends_sorted = np.take_along_axis(ends, order, axis=1)
    works = (room >= demand.amounts).all(axis=2) & np.isfinite(ends_sorted)
    first = np.where(works.any(axis=1), works.argmax(axis=1), -1)
    picked = ends_sorted[np.arange(rows.size), np.maximum(first, 0)]
    result: FloatArray = np.where(first >= 0, picked, math.inf)
    return result


@dataclass(frozen=True, slots=True)
class _Group:
    classes: tuple[int, ...]
    rows: IndexArray  # indexes into the evaluated rows


def _distinct_rows(slots: BoolArray, klass: npt.NDArray[np.int32]) -> list[_Group]:
    """Rows grouped by the set of classes of their marked slots (rows with none skipped)."""
    marked = np.flatnonzero(slots.any(axis=1))
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in marked:
        key = tuple(sorted({int(c) for c in klass[i][slots[i]]}))
        groups.setdefault(key, []).append(int(i))
    return [_Group(k, np.asarray(v, dtype=np.intp)) for k, v in sorted(groups.items())]
