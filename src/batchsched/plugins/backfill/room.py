"""Whether a reserved node keeps room for its reservations with a pod placed: what Backfill's
filter asks of each reserved node (docs/backfill.md). The answer depends on the node's pods
and reservations, the clock and the pod's request, not on which pod asks or its stated
runtime (which only says against which reservations it is asked), so within a pass it is
kept per node, request and the reservations asked about, and told to every pod asking the
same until a node's room or reservations change; an answer against a reservation with no
expected start reads no clock, so it is kept across passes (docs/backfill.md#cost)."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime

from batchsched.plugins.backfill.picture import Picture
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import StartReservation
from batchsched.state.resources import Demand


def window(reservation: StartReservation, now: datetime) -> tuple[float, float]:
    """When the reservation holds its room (seconds since the epoch): from its start (or
    now, once the start has come: the holder then still needs all of its runtime) for its
    holder's stated runtime; with no expected start, from now on for good."""
    if reservation.start is None:
        return -math.inf, math.inf
    start = reservation.start.timestamp()
    until = math.inf if reservation.until is None else reservation.until.timestamp()
    late = now.timestamp() - start
    return (start, until) if late <= 0 else (start + late, until + late)


@dataclass(frozen=True, slots=True)
class Check:
    """Another holder's reservation on a node, as a pod is judged against it: from when it
    holds the room (`window`; None: once the pods without a stated runtime it waits for have
    gone, those being `gone`), and the reservations (its own among them) holding room
    then."""

    reservation: StartReservation
    start: float | None
    gone: frozenset[str]
    during: tuple[StartReservation, ...]


# Per reserved row, the reservations a pod would not leave room for (`RoomChecks._refusers_under`).
Refusers = list[tuple[int, tuple[tuple[float | None, StartReservation], ...]]]
# Per check (its index) and request: whether the node keeps the room, and until when.
Answers = dict[tuple[int, Hashable], tuple[bool, float]]
# The reserved rows a pod is kept off, each with the holder keeping it off, and whether it
# states no runtime while kept off any (`RoomChecks.kept_off`).
KeptOff = tuple[tuple[tuple[int, str], ...], bool]


def started_here(
    held: Sequence[StartReservation], own: Collection[str | None], now: datetime
) -> bool:
    """Whether the start of one of the pod's own reservations among `held` (a row's) has
    come: its pods then take the room planned for them, around the others' reservations
    (starting late, they push the later ones back: those are planned again). Before it,
    they are judged as any pod."""
    return any(r.holder in own and r.start is not None and r.start <= now for r in held)


class RoomChecks:
    """Per node row and the holders a pod does not count as others (its own), the checks
    it is judged by, kept while the row's reservations are the same objects at the same
    instant; and per check and request, whether the node keeps the room, kept for one
    instant and one state of the nodes (the log of changed rows). Both within one pass (a
    pod bound but not started yet may start between passes with nothing logged), but for
    the answers against a reservation with no expected start: those read only which pods
    are on the node, not when they started, so they are kept across passes until the log
    names the row. The log is read only where a check of the room is made, as the picture
    would read it: a tentative placement whose changes nobody read leaves no trace in the log
    (`Nodes.tentative`), and reading it elsewhere would leave one."""

    def __init__(self, picture: Picture) -> None:
        self._picture = picture
        self._now: datetime | None = None
        self._checks: dict[
            tuple[int, tuple[str, ...]], tuple[tuple[StartReservation, ...], tuple[Check, ...]]
        ] = {}
        self._at: tuple[datetime, int] | None = None
        self._kept: dict[tuple[int, tuple[str, ...], int, Hashable], tuple[bool, float]] = {}
        self._refusers: dict[tuple[tuple[str, ...], Hashable], Refusers] = {}
        # Per key of `_refusers`: the refusing reservations' starts, sorted, and per how
        # many of them a pod runs past (and whether it states no runtime), its verdicts.
        self._kept_off: dict[
            tuple[tuple[str, ...], Hashable],
            tuple[list[float], dict[tuple[int, bool], KeptOff]],
        ] = {}
        # Per row and `mine`: the checks last made there, and per check with no expected
        # start and request, its answer. Such an answer reads neither the clock nor how
        # long a pod has run, only the row's pods and room and the check, so it is kept
        # across passes while the checks come out equal and the log of changed rows does
        # not name the row (the room columns as they were).
        self._lasting: dict[int, dict[tuple[str, ...], tuple[tuple[Check, ...], Answers]]] = {}
        self._lasting_at: tuple[int, int] | None = None  # the log's mark, the room's width

    def new_pass(self) -> None:
        """Forget all: a pass begins (nor is a gone pod's reservation kept past it)."""
        self._now = None
        self._checks.clear()
        self._at = None
        self._kept.clear()
        self._refusers.clear()
        self._kept_off.clear()

    def follow(self, state: ClusterState) -> None:
        """At a pass's start: forget the answers kept across passes for rows changed since,
        or that hold no start reservation now (nothing keeps a gone pod's past it)."""
        self._follow_lasting(state, state.nodes.change_mark())
        reserved = state.start_reservations.by_row
        for row in [row for row in self._lasting if row not in reserved]:
            del self._lasting[row]

    def checks(
        self,
        row: int,
        held: Sequence[StartReservation],
        own: Collection[str | None],
        now: datetime,
    ) -> tuple[tuple[str, ...], tuple[Check, ...]]:
        """The checks a pod counting the holders `own` as its own is judged by on `row`
        (whose reservations are `held`), in the order they were made; and the key they are
        kept under."""
        if now != self._now:
            self.new_pass()
            self._now = now
        mine = tuple([r.holder for r in held if r.holder in own])
        found = self._checks.get((row, mine))
        if found is not None and _same(found[0], held):
            return mine, found[1]
        others = [(r, *window(r, now)) for r in held if r.holder not in mine]
        checks = []
        for reservation, start, _ in others:
            if reservation.start is None:
                # Its start is once pods stating no runtime end: the pods it waits for count
                # as gone; those waiting for no more than these have started too.
                gone = frozenset(reservation.waits_for)
                during = [r for r, _, _ in others if r.start is None and gone >= set(r.waits_for)]
                checks.append(Check(reservation, None, gone, tuple(during)))
            else:
                during = [r for r, begins, ends in others if begins <= start < ends]
                checks.append(Check(reservation, start, frozenset(), tuple(during)))
        if (row, mine) in self._checks:
            self._kept.clear()  # the row's reservations changed: its kept answers go
            self._refusers.clear()
            self._kept_off.clear()
        made = tuple(checks)
        self._checks[(row, mine)] = (tuple(held), made)
        return mine, made

    def kept_off(
        self,
        state: ClusterState,
        own: Collection[str | None],
        demand: Demand,
        now: datetime,
        bound: int | None,
    ) -> KeptOff:
        """The reserved rows a pod of `demand` counting the holders `own` as its own and
        stating the runtime `bound` (None: none) may not take now, each with the first
        reservation there it would overlap (`_refusers_under`); and whether it states no runtime
        while kept off any. Kept as those are, per their key and which of the refusing
        reservations' starts the pod would run past: pods stating other runtimes that run
        past the same starts are told the same."""
        self._follow_room(state, now)
        key = self._key(state, own, demand)
        kept = self._kept_off.get(key)
        if kept is None:
            refusers = self._refusers_under(key, state, own, demand, now)
            begins = {s for _, refusing in refusers for s, _ in refusing if s is not None}
            kept = self._kept_off[key] = (sorted(begins), {})
        starts, told = kept
        leaves = math.inf if bound is None else now.timestamp() + bound
        slot = (bisect_left(starts, leaves), bound is None)  # the starts it runs past
        found = told.get(slot)
        if found is not None:
            return found
        refused = []
        for row, refusing in self._refusers_under(key, state, own, demand, now):
            for start, reservation in refusing:
                if start is None or start < leaves:
                    refused.append((row, reservation.holder))
                    break
        found = told[slot] = (tuple(refused), bool(refused) and bound is None)
        return found

    @staticmethod
    def _key(
        state: ClusterState, own: Collection[str | None], demand: Demand
    ) -> tuple[tuple[str, ...], Hashable]:
        """What `_refusers_under` is kept under: the pod's holders that hold a reservation, and
        its request."""
        by_holder = state.start_reservations.by_holder
        return tuple([h for h in own if h is not None and h in by_holder]), demand.key

    def _refusers_under(
        self,
        key: tuple[tuple[str, ...], Hashable],
        state: ClusterState,
        own: Collection[str | None],
        demand: Demand,
        now: datetime,
    ) -> Refusers:
        """Per reserved row (in the state's order) where a pod of `demand` counting the
        holders `own` as its own is judged as any pod (none of its own reservations there
        has started), the reservations there that would not keep their room with it placed,
        in the order they were made, each with `Check.start`: the pod is kept off the row by
        the first of them it would overlap (a pod stating no runtime overlaps all). Rows
        with none are left out. Kept per `key` (`_key`) for the pass."""
        found = self._refusers.get(key)
        if found is not None:
            return found
        found = []
        for row, held in state.start_reservations.by_row.items():
            if started_here(held, own, now):
                continue
            mine, checks = self.checks(row, held, own, now)
            refusing = tuple(
                [
                    (check.start, check.reservation)
                    for index, check in enumerate(checks)
                    if not self.keeps_room(state, row, mine, index, demand, now)[0]
                ]
            )
            if refusing:
                found.append((row, refusing))
        self._refusers[key] = found
        return found

    def _follow_room(self, state: ClusterState, now: datetime) -> None:
        """Forget the answers about room once the instant or the nodes' state moved."""
        at = (now, state.nodes.change_mark())
        if at != self._at:
            self._kept.clear()
            self._refusers.clear()
            self._kept_off.clear()
            self._at = at
            self._follow_lasting(state, at[1])

    def _follow_lasting(self, state: ClusterState, mark: int) -> None:
        """Forget the lasting answers of the rows changed since they were followed (all,
        where the log no longer reaches back or the room has other columns)."""
        last, now_at = self._lasting_at, (mark, state.nodes.free.shape[1])
        if last == now_at:
            return
        changed = None
        if last is not None and last[1] == now_at[1]:
            changed = state.nodes.rows_changed_since(last[0])
        if changed is None:
            self._lasting.clear()
        else:
            for row in changed:
                self._lasting.pop(row, None)
        self._lasting_at = now_at

    def keeps_room(
        self,
        state: ClusterState,
        row: int,
        mine: tuple[str, ...],
        index: int,
        demand: Demand,
        now: datetime,
    ) -> tuple[bool, float]:
        """Whether, with a pod of `demand` placed, `row` keeps room for the check's
        reservations (check `index` of those `checks` gave under `mine`); and when that may
        change with the clock."""
        self._follow_room(state, now)
        key = (row, mine, index, demand.key)
        found = self._kept.get(key)
        if found is None:
            checks = self._checks[(row, mine)][1]
            check = checks[index]
            lasting = None
            if check.start is None:
                last = self._lasting.setdefault(row, {}).get(mine)
                if last is None or last[0] != checks:  # dropped (its row changed), or other checks
                    last = self._lasting[row][mine] = (checks, {})
                lasting = last[1]
                found = lasting.get((index, demand.key))
            if found is None:
                found = self._keeps_room(
                    state, row, now.timestamp(), demand, check.start, check.gone, check.during
                )
                if lasting is not None:
                    lasting[(index, demand.key)] = found
            self._kept[key] = found
        return found

    def _keeps_room(
        self,
        state: ClusterState,
        row: int,
        now: float,
        demand: Demand,
        at: float | None,
        gone: Collection[str],
        held: Sequence[StartReservation],
    ) -> tuple[bool, float]:
        """Whether, with the pod placed, the node has room at `at` for the shares of `held`:
        the pods still there then (those not expected to be gone by it, and this one) leave
        at least that much of its allocatable. `at` None: once the pods `gone` have gone."""
        staying, changes = self._picture.staying(state, row, now, at, gone)
        left = state.nodes.allocatable[row] - staying
        left[demand.cols] -= demand.amounts
        resources = state.nodes.resources
        for reservation in held:
            for name, amount in reservation.shares[row].items():
                col = resources.get(name)
                if col is None or col >= left.shape[0]:
                    return False, changes
                left[col] -= amount
                if left[col] < 0:
                    return False, changes
        return True, changes


def _same(kept: Sequence[StartReservation], held: Sequence[StartReservation]) -> bool:
    """Whether the reservations are the very objects kept (a reservation made again is a
    new object, even where it comes out the same)."""
    return len(kept) == len(held) and all(a is b for a, b in zip(kept, held, strict=True))
