"""Victim search on every candidate node at once, over the VictimTable's arrays.

The same rules as `preemption_victims.select_victims_on_node` with single-pod victims, run
for many rows together: removal and reprieve are array operations per slot position (slots
are in importance order in every row), and the node-choice criteria
(docs/preemption-toleration.md) are kept per row (`RowResults`) and ranked (`Ranking`); a row
that cannot work gets its reason (`preemption.reasons`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from batchsched.framework.interface import IndexArray
from batchsched.preemption.reasons import Reasons, explain
from batchsched.preemption.toleration_policy import FOREVER
from batchsched.preemption.victim_table import FloatArray, VictimTable
from batchsched.preemption.victims import PRIORITY_SHIFT, VictimRule
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.resources import Demand


@dataclass(frozen=True, slots=True)
class ClassArrays:
    """Per class id (the last entry: no class) verdicts of the rule, as arrays."""

    missing: BoolArray
    forever: BoolArray
    timed: BoolArray
    seconds: FloatArray

    @classmethod
    def of(cls, table: VictimTable, rule: VictimRule) -> ClassArrays:
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


@dataclass(slots=True)
class Slots:
    """The rule applied to every slot of some rows: who is lower, exempt, takeable."""

    rows: IndexArray
    klass: npt.NDArray[np.int32]
    priority: IntArray
    exempt: BoolArray
    ends: FloatArray  # when a time-limited exemption ends (inf: not time-limited, or unknown)
    missing: BoolArray  # lower pods whose PriorityClass is missing
    missing_row: BoolArray
    take: BoolArray
    request: IntArray  # rows x slots x demanded resources
    freed: IntArray  # room with every takeable pod gone, rows x demanded resources

    @classmethod
    def of(
        cls,
        table: VictimTable,
        rule: VictimRule,
        classes: ClassArrays,
        demand: Demand,
        base: IntArray,
        rows: IndexArray,
    ) -> Slots:
        """`base`: the rows' room as the preemptor sees it, for the demanded resources."""
        now = rule.now.timestamp()
        klass = _class_ids(table, rows)
        priority = table.priority[rows]
        lower = _lower(table, rule, rows)
        timed, ends = _timed(classes, klass, table.since[rows], lower, now)
        exempt = lower & (classes.forever[klass] | timed)
        missing = lower & classes.missing[klass]
        missing_row: BoolArray = np.asarray(missing.any(axis=1))
        take = lower & ~exempt & ~missing_row[:, None]
        request = table.request[np.ix_(rows, np.arange(table.slots), demand.cols)]
        freed = base + (request * take[:, :, None]).sum(axis=1)
        return cls(rows, klass, priority, exempt, ends, missing, missing_row, take, request, freed)

    def works(self, demand: Demand) -> BoolArray:
        return np.asarray((self.freed >= demand.amounts).all(axis=1) & ~self.missing_row)

    def protection_ends(self) -> float:
        """The first time one of these rows' time-limited tolerations ends (inf: none)."""
        return float(self.ends.min(initial=math.inf))


def room_alone(
    table: VictimTable, rule: VictimRule, demand: Demand, free: IntArray
) -> BoolArray | None:
    """When no pod of any row is lower than the rule's preemptor (say a reclaiming pod whose
    queue runs nothing below it, its victims of earlier attempts terminating), the rows
    where it fits with the room of terminating pods come free and no victim: what the
    search finds there, without it. None when some pod is lower."""
    rows = free.shape[0]
    lowest = table.state.pods.lowest_bound_priority()  # mostly the answer, at no array cost
    if lowest is not None and lowest < rule.priority and _lower(table, rule, slice(0, rows)).any():
        return None
    fits: BoolArray = np.ones(rows, dtype=np.bool_)
    coming = table.terminating_room
    for col, amount in demand.key:  # column by column: `free` is column-major
        fits &= free[:, col] + coming[:rows, col] >= amount
    return fits


def _lower(table: VictimTable, rule: VictimRule, rows: IndexArray | slice) -> BoolArray:
    """The slots of `rows` the rule's preemptor outranks (`VictimRule.lower`): lower priority,
    not terminating, in its queue when the cluster has queues."""
    lower: BoolArray = (table.priority[rows] < rule.priority) & ~table.terminating[rows]
    if rule.queue is not None:
        lower &= table.queue[rows] == table.queue_id(rule.queue)
    return lower


def _class_ids(table: VictimTable, rows: IndexArray | slice) -> npt.NDArray[np.int32]:
    """The class id of every slot of `rows`, the last id (no class) for empty slots."""
    klass = table.klass[rows]
    return np.where(klass < 0, len(table.class_names), klass)


def _timed(
    classes: ClassArrays,
    klass: npt.NDArray[np.int32],
    since: FloatArray,
    lower: BoolArray,
    now: float,
) -> tuple[BoolArray, FloatArray]:
    """Slots whose class tolerates the preemptor for a time not over at `now` (or from an
    unknown start), and when that time ends for the lower ones (inf: not time-limited or
    from an unknown start, which only a change of the pod can end)."""
    seconds = classes.seconds[klass]
    timed = classes.timed[klass] & (np.isnan(since) | (since + seconds > now))
    ends = np.where(timed & lower & ~np.isnan(since), since + seconds, math.inf)
    return timed, ends


def row_protection_ends(
    table: VictimTable, rule: VictimRule, classes: ClassArrays, rows: IndexArray | slice
) -> FloatArray:
    """Per row of `rows`, the first time after the rule's `now` that a lower-priority pod
    there stops tolerating the rule's preemptor (inf: none tolerates it for a limited time).
    A row's value holds at any later time before it, while the row does not change."""
    lower = _lower(table, rule, rows)
    now = rule.now.timestamp()
    _, ends = _timed(classes, _class_ids(table, rows), table.since[rows], lower, now)
    return np.asarray(ends.min(axis=1, initial=math.inf))


@dataclass(slots=True)
class RowResults:
    """Per row: whether the preemptor can go there, the node-choice criteria, and the victims."""

    works: BoolArray
    violations: IntArray
    highest: IntArray
    total: IntArray
    count: IntArray
    latest: FloatArray  # minus the earliest start among the highest-priority victims
    victims: BoolArray  # rows x slots
    reason: IntArray  # rows that cannot work: their reason's id in a `Reasons`; others -1
    unlock: FloatArray  # tolerated rows: when enough tolerations end (inf: never)

    @classmethod
    def empty(cls, rows: int, slots: int) -> RowResults:
        zeros = np.zeros(rows, dtype=np.int64)
        return cls(
            np.zeros(rows, dtype=np.bool_),
            zeros,
            zeros.copy(),
            zeros.copy(),
            zeros.copy(),
            np.zeros(rows),
            np.zeros((rows, slots), dtype=np.bool_),
            np.full(rows, -1, dtype=np.int64),
            np.full(rows, math.inf),
        )

    def store(self, at: IndexArray, other: RowResults) -> None:
        """Overwrite rows `at` with `other`'s rows (in order)."""
        self.works[at] = other.works
        self.violations[at] = other.violations
        self.highest[at] = other.highest
        self.total[at] = other.total
        self.count[at] = other.count
        self.latest[at] = other.latest
        self.victims[at, : other.victims.shape[1]] = other.victims
        self.victims[at, other.victims.shape[1] :] = False
        self.reason[at] = other.reason
        self.unlock[at] = other.unlock

    def failure_counts(self, candidates: BoolArray, reasons: Reasons) -> dict[str, int]:
        """Candidate rows per reason, for rows that cannot host the preemptor.

        Counted in one pass (`bincount`: the ids are small) rather than a sort and a mask
        per reason over every failing row; the unlock time is looked for only where the
        reason's text shows it."""
        rows = np.flatnonzero(candidates[: self.works.shape[0]] & ~self.works)
        ids = self.reason[rows]
        tally = np.bincount(ids)
        counts: dict[str, int] = {}
        for rid in np.flatnonzero(tally).tolist():
            unlock = math.inf
            if reasons.shows_unlock(rid):
                unlock = float(self.unlock[rows[ids == rid]].min())
            text = reasons.text(rid, unlock)
            counts[text] = counts.get(text, 0) + int(tally[rid])
        return counts

    def rank_moved(self, at: IndexArray, other: RowResults) -> BoolArray:
        """Which rows `at` would change their place in a `Ranking` if overwritten with
        `other`'s rows: those that start or stop working and working ones whose criteria
        differ (a row failing before and after is in no ranking)."""
        works = other.works
        moved: BoolArray = self.works[at] != works
        keys = (self.violations, self.highest, self.total, self.count, self.latest)
        theirs = (other.violations, other.highest, other.total, other.count, other.latest)
        for mine, their in zip(keys, theirs, strict=True):
            moved |= works & (mine[at] != their)
        return moved

    def order(self, rows: IndexArray, name_rank: IntArray) -> IndexArray:
        """`rows` sorted by the node-choice order (criteria in turn, then node name)."""
        keys = (self.violations, self.highest, self.total, self.count, self.latest)
        return rows[np.lexsort((name_rank[rows], *(k[rows] for k in reversed(keys))))]


_HEAD = 64
_APART = 64  # rows ranked apart (recomputed since the sort) before all are sorted again


class Ranking:
    """Rows in the node-choice order, kept across attempts.

    Sorting every row for every attempt costs more than the search itself, so rows are
    sorted once; rows recomputed since are ranked apart (few), and all are sorted again once
    those are many.
    """

    def __init__(self, results: RowResults, name_rank: IntArray) -> None:
        self.sorted = results.order(np.flatnonzero(results.works), name_rank)
        self.dirty = np.zeros(results.works.shape[0], dtype=np.bool_)
        self.dirty_rows: IndexArray = np.zeros(0, dtype=np.intp)

    def mark(self, rows: IndexArray) -> None:
        fresh = rows[~self.dirty[rows]]
        self.dirty[fresh] = True
        self.dirty_rows = np.concatenate((self.dirty_rows, fresh.astype(np.intp)))

    @property
    def worn(self) -> bool:
        # A fixed bound, not a share of the rows: every `best` orders the rows ranked apart,
        # so with a share that work grew with the cluster (151 rows per call at 5000 nodes);
        # the re-sorts this bound brings cost less (83 -> 153 per run at 5000 nodes).
        return len(self.dirty_rows) > _APART

    def best(self, results: RowResults, candidates: BoolArray, name_rank: IntArray) -> int | None:
        """The candidate row the node-choice order prefers."""
        pool = []
        # The best clean candidate is mostly among the first rows: look there first.
        for ranked in (self.sorted[:_HEAD], self.sorted[_HEAD:]):
            usable = candidates[ranked] & ~self.dirty[ranked]
            if usable.any():
                pool.append(int(ranked[int(usable.argmax())]))
                break
        dirty = self.dirty_rows
        pool.extend(dirty[candidates[dirty] & results.works[dirty]].tolist())
        if not pool:
            return None
        return int(results.order(np.asarray(pool, dtype=np.intp), name_rank)[0])


def row_results(
    table: VictimTable, rule: VictimRule, slots: Slots, demand: Demand, reasons: Reasons
) -> RowResults:
    """Victims and criteria for every row of `slots`, or why a row cannot work."""
    results = RowResults.empty(slots.rows.size, table.slots)
    works = slots.works(demand)
    results.works[:] = works
    if not works.all():
        explain(table, slots, demand, reasons, np.flatnonzero(~works), results)
    ok = np.flatnonzero(works)
    if ok.size == 0:
        return results
    victim, violating = _reprieve(
        table,
        rule,
        slots.rows[ok],
        slots.take[ok],
        slots.request[ok],
        slots.freed[ok],
        demand.amounts,
    )
    priority = slots.priority[ok]
    low = np.iinfo(np.int64).min
    highest = np.where(victim, priority, low).max(axis=1)
    top = victim & (priority == highest[:, None])
    results.violations[ok] = (victim & violating).sum(axis=1)
    results.highest[ok] = highest
    results.total[ok] = np.where(victim, priority + PRIORITY_SHIFT, 0).sum(axis=1)
    results.count[ok] = victim.sum(axis=1)
    results.latest[ok] = -np.where(top, table.start[slots.rows[ok]], math.inf).min(axis=1)
    results.victims[ok] = victim
    return results


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
    for pdb, covered in table.pdbs_taken(rows, take):
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
