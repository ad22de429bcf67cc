"""Reclaim (docs/queues.md#reclaim): a pending pod of queue Q that fits nowhere, also not by
priority preemption inside Q, takes back room that other queues borrowed.

Q and a victim's queue V are compared at the children of their lowest common ancestor (the
roots when they share none): Q's level and V's level. V's pods may go when
- Q's level, and every queue from Q up to it, stays within its fair share with the pod
  admitted (dominant ratio <= 1);
- V's level is above its fair share (dominant ratio > 1: it borrows);
- after the evictions V's level's dominant ratio is still >= Q's level's with the pod
  admitted, so two queues never take the same room from each other back and forth;
- no queue on V's path falls below its `guaranteed` (the common ancestor and up hold the
  preemptor too once the victims are gone), and none below the common ancestor says
  `reclaimable: false`.
A victim is never a pod younger than its leaf queue's `reclaimMinRuntime`, nor one inside
its PriorityClass's toleration window (`toleration-seconds` from when it was scheduled,
whatever the preemptor's priority), nor one already terminating; a PodGroup preempted whole
goes whole (every running member must be takeable, on any node).

Victim order: the level most above its fair share first, then lowest priority, then most
recently started. On a candidate node the victims are taken in that order, skipping those the
rules refuse given the ones taken before, until the pod fits (room of terminating pods counts
as coming free); then reprieved while it still fits, PDB-violating ones first, then most
important first (as priority preemption does, docs/preemption-toleration.md). The node:
fewest PDB violations, then fewest victims, then the one whose last victim comes earliest in
the victim order, then name. Rows are searched in order of a bound
computed on all rows at once (the victims the order takes before the pod fits, which the
rules can only make more), so the search stops at the first rows.

The fair shares come from the caller (ClusterState.queue_fair_shares in the scheduler).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

import numpy as np

from batchsched.objects.go_duration import format_go_duration
from batchsched.objects.queues import Queue
from batchsched.objects.records import Pod
from batchsched.preemption.gang_victims import running_members
from batchsched.preemption.toleration_policy import PolicyCache, scheduled_since
from batchsched.preemption.victim_table import FloatArray, importance_key, table_of
from batchsched.preemption.victims import VictimRule, fits, pdb_violating, room_on
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray, rows_differ
from batchsched.state.queues import Usage
from batchsched.state.resources import Demand

Shares = Mapping[str, Mapping[str, int]]  # queue -> resource -> fair share


@dataclass(frozen=True, slots=True)
class Side:
    """A victim leaf queue against the preemptor's queue, at their common ancestor's children."""

    leaf: str
    level: str  # the victim's side: its leaf's ancestor (or itself) below the common ancestor
    own_level: str  # the preemptor's side
    below: tuple[Queue, ...]  # the victim leaf's path up to `level`, leaf first
    ratio: float  # `level`'s dominant ratio now
    target: float  # `own_level`'s dominant ratio with the preemptor admitted
    refused: str  # "" when its pods may be reclaimed, else why not


@dataclass(frozen=True, slots=True)
class Standing:
    """Another queue's standing for a pending pod's reclaim (explain): how many of its
    running pods reclaim may take, or the rule that refuses them all and why."""

    side: Side
    pods: int  # its pods running (and not terminating)
    takeable: int
    rule: str  # "" when some may be taken; else one of RECLAIM_RULES
    why: str
    young: int = 0  # of its pods, those younger than its reclaimMinRuntime
    tolerated: int = 0  # and those inside their PriorityClass's toleration window


# The rules that keep a queue's pods (docs/queues.md#reclaim), as explain names them.
RECLAIM_RULES = {
    "would go over its fair share": "preemptor over fair share",
    "is within its fair share": "within fair share",
    "is less above its fair share than": "ping-pong",
    "would fall below its guaranteed": "below guaranteed",
    "share": "ping-pong",  # "would fall below X's share"
    "is not reclaimable": "not reclaimable",
    "reclaimMinRuntime": "too young",
    "toleration window": "toleration window",
}


@dataclass(slots=True)
class Reclaimed:
    """The node and victims of a reclaim, each victim's leaf queue; or why there is none."""

    row: int | None = None
    victims: list[Pod] = field(default_factory=list)
    queues: dict[str, str] = field(default_factory=dict)  # victim key -> its leaf queue
    message: str = ""  # why not, "reclaim: ..." ("" when there is nothing to reclaim from)
    # When a protected pod stops being protected (its reclaimMinRuntime or toleration window
    # ends): the answer may change then with the cluster unchanged (inf: never).
    changes_at: float = math.inf


@dataclass(slots=True)
class GroupUnits:
    """What a gang may take back: the units in victim order, or why none; and when a
    protected pod stops being protected (inf: never), as `Reclaimed.changes_at`."""

    units: list[tuple[Pod, ...]] = field(default_factory=list)
    message: str = ""
    changes_at: float = math.inf
    leaf: str = ""  # the gang's leaf queue ("": none, no reclaim)


class ReclaimStrategy:
    """A plugin that reclaims (the Queues PostFilter): gang scheduling asks it for the units
    a gang may take from other queues (plugins/coscheduling)."""

    name: ClassVar[str]

    def group_units(
        self,
        state: ClusterState,
        lead: Pod,
        asks: Mapping[str, int],
        now: datetime,
        within: BoolArray | None = None,
    ) -> GroupUnits:
        """The units the gang may take, in victim order, or why none. `within`: only units
        whose pods all run on these node rows (one topology domain, docs/topology.md); None:
        anywhere."""
        raise NotImplementedError


class Reclaimer:
    """Reclaim's search for one cluster state, over the victim table's arrays."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.table = table_of(state)
        self.policies = PolicyCache()
        self._kept: _RowBounds | None = None
        self._nominated = _Nominated(state)

    def sides(self, leaf: str, shares: Shares, added: Usage) -> list[Side]:
        """Every other leaf queue with pods in use, and whether its pods may be reclaimed
        for a pod of `leaf` that adds `added` to the queues of its path (`added`), in victim
        order (most above its share first).

        The preemptor's side counts, besides its usage and the pod, the pods of its subtree
        nominated to a node (room freed for them, not bound yet): else a wave of preemptors
        in one pass would each see their queue as it was before the first."""
        tree = self.state.queues
        usage = self.state.queue_staying_usage()
        own_path = [q.name for q in tree.path(leaf)]
        # Every queue the pod joins, from its leaf up to its level, stays within its fair share
        # (as KAI checks the reclaimer's whole path): a leaf over its share inside its level
        # would have its sibling take the room straight back.
        own_ratios = [tree.dominant_ratio(q, usage, shares, added[q]) for q in own_path]
        found = []
        for other in sorted(usage):
            if other == leaf or not tree.is_leaf(other):
                continue
            path = tree.path(other)
            common = next((i for i, q in enumerate(path) if q.name in own_path), len(path))
            level = path[common - 1].name
            ancestor = path[common].name if common < len(path) else None
            mine = own_path.index(ancestor) - 1 if ancestor is not None else len(own_path) - 1
            own_level = own_path[mine]
            target = own_ratios[mine]
            ratio = tree.dominant_ratio(level, usage, shares, {})
            below = tuple(path[:common])
            refused = ""
            over = next((own_path[i] for i in range(mine + 1) if own_ratios[i] > 1), "")
            if over:
                refused = f"{over} would go over its fair share"
            elif ratio <= 1:
                refused = f"{level} is within its fair share"
            elif ratio < target:
                refused = f"{level} is less above its fair share than {own_level} would be"
            elif closed := next((q.name for q in below if not q.reclaimable), ""):
                refused = f"{closed} is not reclaimable"
            found.append(Side(other, level, own_level, below, ratio, target, refused))
        found.sort(key=lambda s: (-s.ratio, s.leaf))
        return found

    def added(self, pod: Pod, leaf: str, asks: Mapping[str, int]) -> Usage:
        """What each queue from `leaf` up to its root will hold besides its usage once `pod`
        (asking `asks`) binds: the pod and the pods of its subtree nominated to a node (room
        freed for them, not bound yet)."""
        coming, own = self._nominated.totals(pod)
        added: dict[str, dict[str, int]] = {}
        for queue in self.state.queues.path(leaf):
            extra = added[queue.name] = dict(coming.get(queue.name, {}))
            for resource, amount in asks.items():  # the pod itself, once
                extra[resource] = extra.get(resource, 0) + amount - own.get(resource, 0)
        return added

    def borrows(self, pod: Pod) -> str:
        """The lowest queue on `pod`'s path that would be over its fair share once the pod
        binds, counting its subtree's pods nominated to a node ("" if none, or the pod is in
        no queue): such a pod borrows, and takes room only once it is free, never by waiting
        for pods still terminating (docs/queues.md#reclaim: the room a reclaim frees beyond
        what its preemptor needs is not the reclaiming queue's to borrow)."""
        state = self.state
        leaf = state.queue_of(pod).queue
        if not leaf:
            return ""
        added = self.added(pod, leaf, state.requests_by_name(pod))
        usage, shares = state.queue_staying_usage(), state.queue_fair_shares()
        for queue in state.queues.path(leaf):
            if state.queues.dominant_ratio(queue.name, usage, shares, added[queue.name]) > 1:
                return queue.name
        return ""

    def find(
        self,
        pod: Pod,
        leaf: str,
        demand: Demand,
        free: IntArray,
        candidates: BoolArray,
        now: datetime,
        shares: Shares,
        plain: bool = False,
    ) -> Reclaimed:
        """The node and victims that make room for `pod` of queue `leaf`, or why none.
        `plain`: `free` is `free_for` the pod, which has no nomination of its own, unchanged
        (`Cycle.plain_room`)."""
        state = self.state
        added = self.added(pod, leaf, state.requests_by_name(pod))
        sides = self.sides(leaf, shares, added)
        refusals = [f"{s.refused}" for s in sides if s.refused]
        open_sides = [s for s in sides if not s.refused]
        if not open_sides:
            return Reclaimed(message=_said(refusals))
        seen_as = (pod.priority or 0) if plain else None
        bounds = self._bounds(open_sides, demand, free, now, seen_as)
        checks = _Checks(state, shares, {s.leaf: s for s in open_sides}, added)
        rule = VictimRule(state, pod, 0, now, lambda name: (False, None))
        names = state.nodes.name_rank()
        rank_of = {side.leaf: rank for rank, side in enumerate(open_sides)}
        at = now.timestamp()

        def answer(row: int) -> tuple[Choice, Reclaimed] | None:
            slots = bounds.order[row][bounds.taken[row]].tolist()
            found = self._on_row(row, slots, demand, free[row], checks, rule, at)
            if found is None or not found[0]:
                return None  # room that terminating pods free is waited for, not reclaimed
            victims, violations = found
            # The victims' last in the victim order, the earlier the better: a node whose
            # victims come first in that order wins among nodes that need as many.
            last = max(_order_key(rank_of[checks.leaf_of(v)], v) for v in victims)
            queues = {v.key: checks.leaf_of(v) for v in victims}
            return (violations, len(victims), last, int(names[row])), Reclaimed(
                row, victims, queues
            )

        usable = np.flatnonzero(candidates[: state.nodes.rows] & bounds.works)
        best: tuple[Choice, Reclaimed] | None = None
        if usable.size:
            # Mostly the row of the smallest bound has an answer equal to it: no other row
            # can do better then, and no sort of every row is needed.
            first = bounds.first(usable, names)
            best = answer(first)
            if best is None or best[0] != bounds.choice(first, names):
                for row in bounds.ranked(usable, names).tolist():
                    if best is not None and bounds.choice(row, names) > best[0]:
                        break  # this row and every later one can do no better
                    found = answer(row)
                    if found is not None and (best is None or found[0] < best[0]):
                        best = found
        if best is not None:
            return best[1]
        refusals.extend(self._protections(open_sides, now))
        refusals.extend(checks.refusals)
        if not refusals:
            refusals.append("no node has room to take back")
        return Reclaimed(message=_said(refusals), changes_at=self._protection_ends(open_sides, now))

    def group_units(
        self,
        lead: Pod,
        leaf: str,
        asks: Mapping[str, int],
        now: datetime,
        shares: Shares,
        within: BoolArray | None = None,
    ) -> GroupUnits:
        """For a gang of queue `leaf` (the members its attempt places, minMember first, ask
        `asks` together; `lead` the first), every unit reclaim may take, in victim order, each
        kept only if the rules still hold with it and those before it gone: any choice of
        them keeps the rules (taking less only keeps more). Gang preemption's search then
        finds the fewest that make room for minMember members (docs/gang.md). Also why none,
        when there are none, and when protected pods stop being protected (the units found
        may be too few, then: the gang is tried again at that time, as a pod is)."""
        state = self.state
        added = self.added(lead, leaf, asks)
        sides = self.sides(leaf, shares, added)
        refusals = [s.refused for s in sides if s.refused]
        open_sides = [s for s in sides if not s.refused]
        if not open_sides:
            return GroupUnits(message=_said(refusals), leaf=leaf)
        table = self.table
        table.sync()
        rows = state.nodes.rows
        take = self._takeable(open_sides, slice(0, rows), now)[0]
        rank_of = {side.leaf: rank for rank, side in enumerate(open_sides)}
        checks = _Checks(state, shares, {s.leaf: s for s in open_sides}, added)
        candidates = [table.pods[r][s] for r, s in zip(*np.nonzero(take), strict=True)]
        candidates.sort(key=lambda p: (*_order_key(rank_of[checks.leaf_of(p)], p), p.key))
        at = now.timestamp()
        units: list[tuple[Pod, ...]] = []
        seen: set[str] = set()
        for pod in candidates:
            if pod.key in seen:
                continue
            unit = running_members(state, pod)
            seen.update(m.key for m in unit)
            if within is not None and not all(
                (row := state.pods.bound.get(m.key)) is not None and within[row] for m in unit
            ):
                continue  # a pod outside the domain
            if all(checks.takeable(m, self, at) for m in unit) and checks.take(unit):
                units.append(unit)
        ends = self._protection_ends(open_sides, now)
        if units:
            return GroupUnits(units, "", ends, leaf)
        refusals.extend(self._protections(open_sides, now))
        refusals.extend(checks.refusals)
        said = _said(refusals or ["no pod of another queue may be taken"])
        return GroupUnits(message=said, changes_at=ends, leaf=leaf)

    def standings(
        self, pod: Pod, leaf: str, asks: Mapping[str, int], now: datetime, shares: Shares
    ) -> list[Standing]:
        """Every other leaf queue with pods in use, for `pod` of `leaf` asking `asks`, in
        victim order: how many of its pods the rules let reclaim take, taken alone in the
        victim order, or the rule that refuses them all (explain, docs/explain.md)."""
        added = self.added(pod, leaf, asks)
        sides = self.sides(leaf, shares, added)
        table = self.table
        table.sync()
        rows = slice(0, self.state.nodes.rows)
        open_sides = [side for side in sides if not side.refused]
        take, young, tolerated, _, _ = self._takeable(open_sides, rows, now)
        queue = table.queue[rows]
        at = now.timestamp()
        out = []
        for side in sides:
            mine = queue == table.queue_id(side.leaf)
            pods = int(np.count_nonzero(mine))
            if side.refused:
                out.append(Standing(side, pods, 0, _rule_of(side.refused), side.refused))
                continue
            protected = [int(np.count_nonzero(mask & mine)) for mask in (young, tolerated)]
            checks = _Checks(self.state, shares, {side.leaf: side}, added)
            candidates = [table.pods[r][c] for r, c in zip(*np.nonzero(take & mine), strict=True)]
            candidates.sort(key=lambda p: (*_order_key(0, p), p.key))
            taken: set[str] = set()
            for candidate in candidates:
                if candidate.key in taken:
                    continue
                unit = running_members(self.state, candidate)
                if all(checks.takeable(m, self, at) for m in unit) and checks.take(unit):
                    taken.update(m.key for m in unit)
            if taken:
                out.append(Standing(side, pods, len(taken), "", "", *protected))
            elif checks.refusals:
                why = checks.refusals[0]
                out.append(Standing(side, pods, 0, _rule_of(why), why, *protected))
            elif any(protected):
                why = _protected("young" if protected[0] else "tolerated", side)
                out.append(Standing(side, pods, 0, _rule_of(why), why, *protected))
            else:
                out.append(Standing(side, pods, 0, "none running", "no pod of it runs"))
        return out

    def _bounds(
        self,
        sides: list[Side],
        demand: Demand,
        free: IntArray,
        now: datetime,
        seen_as: int | None = None,
    ) -> _RowBounds:
        """Each row's bound, kept between attempts alike (the same sides in the same order,
        demand and time): only rows whose pods or room changed are computed again.
        `seen_as`: `free` is `free_for` a pod of this priority without a nomination of its
        own (None: some other room)."""
        state, table = self.state, self.table
        table.sync()
        rows = state.nodes.rows
        key = (
            tuple((s.leaf, s.below[0].reclaim_min_runtime) for s in sides),
            demand.key,
            now,
            state.policy.version,
            table.membership_version,
            table.slots,
            rows,
        )
        kept = self._kept
        cols = demand.cols
        if kept is None or kept.key != key:
            kept = self._kept = _RowBounds.empty(key, rows, table.slots, cols.shape[0])
            stale = np.arange(rows)
        else:
            changed = state.nodes.rows_changed_since(kept.mark)
            if changed is None:
                stale = np.arange(rows)
            elif seen_as is not None and seen_as == kept.seen_as:
                # Both rooms are `free_for` such a pod: the state's room less what the
                # nominations at its priority or above hold, both changing only on logged
                # rows (as in the preemption search), so no comparison over every row.
                stale = np.asarray(sorted(set(changed)), dtype=np.intp)
            else:
                moved = rows_differ(free[:rows], kept.seen, cols.tolist())
                if changed:
                    moved[np.asarray(changed, dtype=np.intp)] = True
                stale = np.flatnonzero(moved)
        kept.mark = state.nodes.change_mark()
        kept.seen_as = seen_as
        if stale.size:
            kept.seen[stale] = free[stale][:, cols]
            self._fill(kept, stale, sides, demand, now)
        return kept

    def _takeable(
        self, sides: list[Side], rows: IntArray | slice, now: datetime
    ) -> tuple[BoolArray, BoolArray, BoolArray, IntArray, FloatArray]:
        """For the slots of `rows`: which may be reclaimed, which are too young, which are
        inside a toleration window; each slot's queue rank (its side's place) and its
        queue's reclaimMinRuntime."""
        table = self.table
        for side in sides:
            table.queue_id(side.leaf)
        count = table.queue_count + 1  # the last: an empty slot (NO_QUEUE_ID)
        allowed_q = np.zeros(count, dtype=np.bool_)
        rank_q = np.zeros(count, dtype=np.int64)
        runtime_q = np.zeros(count)
        for rank, side in enumerate(sides):
            qid = table.queue_id(side.leaf)
            allowed_q[qid], rank_q[qid] = True, rank
            runtime_q[qid] = side.below[0].reclaim_min_runtime
        queue = table.queue[rows]
        allowed = allowed_q[queue] & ~table.terminating[rows]
        at = now.timestamp()
        runtime = runtime_q[queue]
        young = allowed & (runtime > 0) & ~(table.start[rows] + runtime <= at)
        tolerated = allowed & self._in_window(at, rows)[0]
        return allowed & ~young & ~tolerated, young, tolerated, rank_q[queue], runtime

    def _fill(
        self, kept: _RowBounds, rows: IntArray, sides: list[Side], demand: Demand, now: datetime
    ) -> None:
        """The bound of each of `rows`: the victims the order takes before the pod fits and
        the last of them, which the rules can only make more and later."""
        table = self.table
        take, _, _, rank, _ = self._takeable(sides, rows, now)
        if not take.any():
            # Nothing to take on any of them (mostly the one row a reclaim just took from):
            # none works, and the rest of a bound is read only where one does.
            kept.works[rows] = False
            return
        slots = table.slots
        # Per row, the takeable slots in victim order: by the queue's rank, then the reverse
        # of the table's importance order (lowest priority, most recently started first).
        key = np.where(take, rank * slots + (slots - 1 - np.arange(slots)), np.iinfo(np.int64).max)
        order = np.argsort(key, axis=1, kind="stable")
        # Indexing by (row, slot) pairs rather than `np.take_along_axis` or `np.ix_`: the
        # same values at less cost for the few rows an attempt mostly changes.
        everyone = np.arange(rows.size)
        by_order = (everyone[:, None], order)
        taken = take[by_order]
        cols = demand.cols
        gained = table.request[rows[:, None], order][:, :, cols] * taken[:, :, None]
        base = kept.seen[rows] + table.terminating_room[rows][:, cols]
        room = base[:, None, :] + np.cumsum(gained, axis=1)
        fit_at: BoolArray = np.asarray((room >= demand.amounts).all(axis=2))
        position = fit_at.argmax(axis=1)
        last_slot = order[everyone, position]
        kept.works[rows] = fit_at.any(axis=1) & take.any(axis=1)
        kept.count[rows] = np.cumsum(taken, axis=1)[everyone, position]
        kept.last_rank[rows] = rank[everyone, last_slot]
        kept.last_priority[rows] = table.priority[rows, last_slot]
        kept.last_start[rows] = -table.start[rows, last_slot]
        kept.order[rows] = order
        kept.taken[rows] = taken

    def _protections(self, sides: list[Side], now: datetime) -> list[str]:
        """Why the pods of open sides may not go: too young, inside a toleration window."""
        table = self.table
        rows = slice(0, self.state.nodes.rows)
        _, young, tolerated, _, _ = self._takeable(sides, rows, now)
        queue = table.queue[rows]
        said = []
        for kind, mask in (("young", young), ("tolerated", tolerated)):
            for side in sides:
                if np.any(mask & (queue == table.queue_id(side.leaf))):
                    said.append(_protected(kind, side))
        return said

    def _protection_ends(self, sides: list[Side], now: datetime) -> float:
        """When the first protected pod of an open side stops being protected (inf: never)."""
        table = self.table
        rows = slice(0, self.state.nodes.rows)
        _, young, tolerated, _, runtime = self._takeable(sides, rows, now)
        _, window_ends = self._in_window(now.timestamp(), rows)
        return min(
            float(np.min(table.start[rows] + runtime, where=young, initial=math.inf)),
            float(np.min(window_ends, where=tolerated, initial=math.inf)),
        )

    def _in_window(self, at: float, rows: IntArray | slice) -> tuple[BoolArray, FloatArray]:
        """Slots of `rows` whose PriorityClass's toleration window
        (docs/preemption-toleration.md) still holds at `at`: `toleration-seconds` from when
        the pod was scheduled (negative: for ever; a pod not scheduled yet is inside it); and
        when each window ends (inf: for ever, or not known until the pod is scheduled)."""
        table, state = self.table, self.state
        seconds = np.zeros(len(table.class_names) + 1)  # the last: no class
        for cid, name in enumerate(table.class_names):
            pc = state.policy.priority_classes.get(name)
            if pc is not None:
                policy, _ = self.policies.get(pc)
                seconds[cid] = policy.toleration_seconds if policy.valid else 0
        klass = table.klass[rows]
        if not seconds.any():  # no class with a window: nothing inside one
            return np.zeros(klass.shape, dtype=np.bool_), np.full(klass.shape, math.inf)
        window = seconds[np.where(klass < 0, len(table.class_names), klass)]
        since = table.since[rows]
        inside: BoolArray = (window < 0) | (
            (window > 0) & (np.isnan(since) | (since + window > at))
        )
        ends: FloatArray = np.where((window > 0) & ~np.isnan(since), since + window, math.inf)
        return inside, ends

    def _on_row(
        self,
        row: int,
        slots: list[int],
        demand: Demand,
        free: IntArray,
        checks: _Checks,
        rule: VictimRule,
        at: float,
    ) -> tuple[list[Pod], int] | None:
        """The victims on `row` in victim order within the rules, reprieved; None if the
        rules leave too few to make room."""
        state = self.state
        checks.freed = {}
        room = free.copy() + self.table.terminating_room[row]
        pods = self.table.pods[row]
        chosen: list[tuple[Pod, ...]] = []
        seen: set[str] = set()
        for slot in slots:
            if fits(room, demand):
                break
            pod = pods[slot]
            if pod.key in seen:
                continue
            unit = running_members(state, pod)
            seen.update(m.key for m in unit)
            if not all(checks.takeable(m, self, at) for m in unit) or not checks.take(unit):
                continue
            chosen.append(unit)
            room += room_on(state, unit, row)
        if not fits(room, demand):
            return None
        units = sorted(chosen, key=lambda unit: importance_key(unit[0]))
        flags = iter(pdb_violating(rule, [m for unit in units for m in unit]))
        unit_flags = [any([next(flags) for _ in unit]) for unit in units]
        victims: list[Pod] = []
        violations = 0
        for i in sorted(range(len(units)), key=lambda i: not unit_flags[i]):
            trial = room - room_on(state, units[i], row)
            if fits(trial, demand):
                room = trial
                continue
            victims.extend(units[i])
            violations += unit_flags[i]
        return sorted(victims, key=importance_key), violations


class _Nominated:
    """The pods nominated to a node and not bound (room freed for them), summed per queue
    over its subtree; followed from one attempt to the next rather than counted again, as a
    wave of reclaims nominates one more pod per attempt: only the pods nominated to, or
    counted on, a row the state's log of changed rows names are looked at again (a
    nomination coming, moving or going logs its rows, and binding a pod drops its
    nomination)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._counted: dict[str, tuple[int, str, dict[str, int]]] = {}  # key -> row, leaf, requests
        self._on_row: dict[int, set[str]] = {}  # row -> the counted keys nominated there
        self._totals: dict[str, dict[str, int]] = {}
        self._at: tuple[int, int, int] | None = None  # the membership they were counted at
        self._mark = 0  # where in the log of changed rows they were counted

    def totals(self, pod: Pod) -> tuple[Usage, Mapping[str, int]]:
        """Per queue, the requests of its subtree's nominated pods; and `pod`'s own among
        them (empty when it has no nomination)."""
        state = self.state
        nominations = state.nominations
        changed = None
        if self._at == state.membership_version():
            changed = state.nodes.rows_changed_since(self._mark)
        self._mark = state.nodes.change_mark()
        if changed is None:
            self._counted, self._on_row, self._totals = {}, {}, {}
            self._at = state.membership_version()
            keys: set[str] = set(nominations)
        else:
            keys = set()
            for row in set(changed):
                keys.update(self._on_row.get(row, ()), nominations.on_row(row))
        for key in keys:
            self._recount(key)
        own = self._counted.get(pod.key)
        return self._totals, own[2] if own is not None else {}

    def _recount(self, key: str) -> None:
        state = self.state
        counted = self._counted.pop(key, None)
        if counted is not None:
            self._on_row[counted[0]].discard(key)
            self._add(*counted[1:], -1)
        row = state.nominations.get(key)
        nominated = state.pods.by_key.get(key)
        if row is None or nominated is None or key in state.pods.bound:
            return
        leaf = state.queue_of(nominated).queue
        counted = self._counted[key] = (row, leaf, state.requests_by_name(nominated))
        self._on_row.setdefault(row, set()).add(key)
        self._add(*counted[1:], 1)

    def _add(self, leaf: str, requests: dict[str, int], sign: int) -> None:
        for queue in self.state.queues.path(leaf):
            total = self._totals.setdefault(queue.name, {})
            for resource, amount in requests.items():
                total[resource] = total.get(resource, 0) + sign * amount


Choice = tuple[int, int, tuple[int, int, float], int]  # violations, count, last victim, name


def _order_key(rank: int, victim: Pod) -> tuple[int, int, float]:
    """Where a victim of the side ranked `rank` comes in the victim order (smaller: sooner)."""
    start = victim.start_time.timestamp() if victim.start_time is not None else math.inf
    return (rank, victim.priority or 0, -start)


@dataclass(slots=True)
class _RowBounds:
    """Per node row, a lower bound of reclaim's answer there (a `Choice` without PDB
    violations) and the takeable slots in victim order, for one kind of attempt (`key`)."""

    key: tuple[object, ...]
    mark: int
    seen: IntArray  # the room each row was computed for, the demanded resources
    works: BoolArray
    count: IntArray
    last_rank: IntArray
    last_priority: IntArray
    last_start: FloatArray  # minus the start: later starts first
    order: IntArray  # rows x slots: slot positions in victim order
    taken: BoolArray  # rows x slots: whether the slot at that position is takeable
    seen_as: int | None = None  # `seen` is `free_for` a pod of this priority (`_bounds`)

    @classmethod
    def empty(cls, key: tuple[object, ...], rows: int, slots: int, width: int) -> _RowBounds:
        zeros = np.zeros(rows, dtype=np.int64)
        return cls(
            key,
            0,
            np.zeros((rows, width), dtype=np.int64),
            np.zeros(rows, dtype=np.bool_),
            zeros,
            zeros.copy(),
            zeros.copy(),
            np.zeros(rows),
            np.zeros((rows, slots), dtype=np.int64),
            np.zeros((rows, slots), dtype=np.bool_),
        )

    def choice(self, row: int, names: IntArray) -> Choice:
        last = (int(self.last_rank[row]), int(self.last_priority[row]), float(self.last_start[row]))
        return (0, int(self.count[row]), last, int(names[row]))

    def _keys(self, names: IntArray) -> tuple[IntArray | FloatArray, ...]:
        return (self.count, self.last_rank, self.last_priority, self.last_start, names)

    def first(self, rows: IntArray, names: IntArray) -> int:
        """The row of `rows` with the smallest bound (names are unique: one row)."""
        pick = rows
        for key in self._keys(names):
            values = key[pick]
            pick = pick[values == values.min()]
        return int(pick[0])

    def ranked(self, rows: IntArray, names: IntArray) -> IntArray:
        """`rows` by their bound, smallest first."""
        order = np.lexsort(tuple(key[rows] for key in reversed(self._keys(names))))
        ranked: IntArray = rows[order]
        return ranked


class _Checks:
    """The rules reclaim keeps across the victims of one node: guaranteed amounts and the
    victim level's share against the preemptor's, from the amounts taken so far.

    A queue above the victim's level (the common ancestor and up) holds the preemptor too
    (`added`) once the victims are gone: it keeps its guaranteed amount only if what the
    preemptor brings makes up for what the victims take (a whole gang may free more than
    the pod asks, docs/queues.md#reclaim)."""

    def __init__(
        self, state: ClusterState, shares: Shares, sides: Mapping[str, Side], added: Usage
    ) -> None:
        self.state = state
        self.shares = shares
        self.sides = sides
        self.added = added
        self.usage: Usage = state.queue_staying_usage()
        self.freed: dict[str, dict[str, int]] = {}  # queue -> resource -> taken so far
        self.refusals: list[str] = []
        self._leaves: dict[str, str] = {}

    def leaf_of(self, pod: Pod) -> str:
        found = self._leaves.get(pod.key)
        if found is None:
            found = self._leaves[pod.key] = self.state.queue_of(pod).queue
        return found

    def takeable(self, pod: Pod, reclaimer: Reclaimer, at: float) -> bool:
        """A gang member (maybe on another node) as the arrays judge a slot."""
        side = self.sides.get(self.leaf_of(pod))
        if side is None or pod.deletion_timestamp is not None:
            return False
        runtime = side.below[0].reclaim_min_runtime
        start = pod.start_time.timestamp() if pod.start_time is not None else math.inf
        if runtime > 0 and not start + runtime <= at:
            return False
        return not _inside_window(reclaimer, pod, at)

    def take(self, unit: tuple[Pod, ...]) -> bool:
        """Take `unit` if the rules still hold with it gone (kept in `freed` then)."""
        freed = {q: dict(amounts) for q, amounts in self.freed.items()}
        tree = self.state.queues
        for member in unit:
            requests = self.state.requests_by_name(member)
            for queue in tree.path(self.leaf_of(member)):
                got = freed.setdefault(queue.name, {})
                for resource in queue.resources:
                    got[resource] = got.get(resource, 0) + requests.get(resource, 0)
        for name in sorted({self.leaf_of(m) for m in unit}):
            side = self.sides[name]
            for queue in tree.path(name):
                used, got = self.usage.get(queue.name, {}), freed.get(queue.name, {})
                brought = self.added.get(queue.name, {})
                for resource, quota in sorted(queue.resources.items()):
                    change = brought.get(resource, 0) - got.get(resource, 0)
                    if change < 0 and used.get(resource, 0) + change < quota.guaranteed:
                        self._refuse(f"{queue.name} would fall below its guaranteed {resource}")
                        return False
            less = {r: -amount for r, amount in freed.get(side.level, {}).items()}
            if tree.dominant_ratio(side.level, self.usage, self.shares, less) < side.target:
                self._refuse(f"{side.level} would fall below {side.own_level}'s share")
                return False
        self.freed = freed
        return True

    def _refuse(self, why: str) -> None:
        if why not in self.refusals:
            self.refusals.append(why)


def summed_requests(state: ClusterState, pods: Iterable[Pod]) -> dict[str, int]:
    """The pods' requests together, by resource name."""
    total: dict[str, int] = {}
    for pod in pods:
        for resource, amount in state.requests_by_name(pod).items():
            total[resource] = total.get(resource, 0) + amount
    return total


def first_members_asks(state: ClusterState, pod: Pod) -> Mapping[str, int]:
    """What placing the pod asks of its queue, judged outside its group's placement: its own
    requests, or for a gang member those of the members its group must place at once with
    it (minMember less those bound or done, `pod` first, then in the group's order: priority,
    name); the members beyond minMember join later, one by one, as upstream coscheduling
    starts minMember first (docs/queues.md#admission, docs/queues.md#reclaim)."""
    group = state.group_of(pod)
    if group is None or not group.gang:
        return state.requests_by_name(pod)
    pods = state.pods
    members = [pods.by_key[k] for k in sorted(state.groups.members.get(group.key, ()))]
    done = sum(1 for m in members if m.key in pods.bound or m.phase == "Succeeded")
    others = sorted(
        (m for m in members if m.key in pods.pending and m.key != pod.key),
        key=lambda m: (-(m.priority or 0), m.key),
    )
    return summed_requests(state, [pod, *others[: max(group.min_member - done - 1, 0)]])


def _inside_window(reclaimer: Reclaimer, pod: Pod, at: float) -> bool:
    pc = reclaimer.state.policy.priority_classes.get(pod.priority_class_name)
    if pc is None:
        return False
    policy, _ = reclaimer.policies.get(pc)
    seconds = policy.toleration_seconds if policy.valid else 0
    if seconds == 0:
        return False
    since = scheduled_since(pod)
    return seconds < 0 or since is None or since.timestamp() + seconds > at


def _protected(kind: str, side: Side) -> str:
    if kind == "young":
        runtime = format_go_duration(side.below[0].reclaim_min_runtime)
        return f"{side.leaf}'s pods are younger than its reclaimMinRuntime {runtime}"
    return f"{side.leaf}'s pods are inside their PriorityClass's toleration window"


def _rule_of(why: str) -> str:
    """The rule a refusal (one of the messages reclaim says) names."""
    return next(rule for part, rule in RECLAIM_RULES.items() if part in why)


def _said(reasons: list[str]) -> str:
    """The pending pod's message part: "reclaim: a; b." ("" when there is nothing to say)."""
    unique = list(dict.fromkeys(reasons))
    return f"reclaim: {'; '.join(unique)}." if unique else ""
