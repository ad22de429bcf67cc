"""Backfill (Filter, and told after every attempt) (docs/backfill.md).

- Reservations: of the pods and gangs that failed for room and found no way (preemption
  included), the first `maxReservations` in the scheduler's order that have waited
  `reserveAfterSeconds` since creation (`candidates.Candidates`) get the nodes where they
  can start earliest by the expected ends of the pods running there
  (`planner.earliest_start`) and that expected start; each holds their room from then for
  its stated runtime. Time-sliced, as Slurm's backfill: a reservation never holds room
  another holds at the same time, but may hold the same node at another time. At each
  pass's start the holders are planned again in that order, each around the earlier ones,
  up to `maxReservations`; a reservation that comes out the same is left as it is (its
  nodes are not touched, so nothing waiting is woken for it). It is given back once its
  holder is placed or a way (preemption) is found for it.
- Filter: on a reserved node another pod fits only if, at every reservation's start before
  the pod's stated runtime ends, the node keeps room for the reservations holding room then,
  counting the pods still there then. A pod that states no runtime is counted as staying for
  good. A holder's own pods pass its nodes once its start has come.
- Broken promises: a holder left waiting once its expected start has come evicts the pods on
  its nodes that run past a runtime stated by label or annotation (`promises.owed`).

Args: `reserveAfterSeconds` (600, >= 0), `maxReservations` (4, >= 0).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    Overdue,
    PlacementFramework,
    PodsHint,
    PreemptionOrderPlugin,
    PreemptionTieBreak,
    QueueingHint,
    Rejection,
    RowCheck,
    RowLocalPlugin,
    RowScore,
    ScorePlugin,
    WaitPlugin,
)
from batchsched.objects.parse import format_time
from batchsched.objects.records import Pod
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.backfill.candidates import Candidates, Order, Walk
from batchsched.plugins.backfill.drain import drain_score, free_at
from batchsched.plugins.backfill.packing import evicted_share
from batchsched.plugins.backfill.picture import Picture, bound_of, row_content, with_nominated
from batchsched.plugins.backfill.planner import (
    Blocks,
    IntArray,
    Plan,
    at_the_end,
    earliest_start,
    may_fit,
    sweep,
)
from batchsched.plugins.backfill.promises import owed
from batchsched.plugins.backfill.room import RoomChecks, started_here, window
from batchsched.preemption.broken_promises import BrokenPromises
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray
from batchsched.state.queue_order import lane_of
from batchsched.state.reservations import StartReservation, holder_pods, holders_of
from batchsched.state.reserved_quota import limit_refusal

ARGS = ("reserveAfterSeconds", "maxReservations")
# The filters whose rejection says a pod lacks room: only then can holding room help it (a
# pod refused for anything else, e.g. at PreFilter, waits for something else).
ROOM = frozenset({"NodeResourcesFit", "Backfill"})


def read_args(args: Mapping[str, Any] | None) -> tuple[int, int]:
    """`reserveAfterSeconds` and `maxReservations`, validated."""
    reader = ArgsReader(Backfill.name, args, ARGS)
    return reader.int_in("reserveAfterSeconds", 600, 0), reader.int_in("maxReservations", 4, 0)


class Backfill(FilterPlugin, ScorePlugin, PreemptionOrderPlugin, RowLocalPlugin, WaitPlugin):
    # It never skips a pod: with no reservation its filter has nothing to look at, and what
    # is kept per shape is not made again each time the first is made or the last ends.
    name = "Backfill"
    criterion = "least room the victims hold"  # of what the pod asks for (packing.py)

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.reserve_after, self.max_reservations = read_args(args)
        # The profile's framework, told with the first attempt: reservations are planned
        # again with it at each pass.
        self._framework: PlacementFramework | None = None
        # The pods and gangs waiting for room (holders among them), in the scheduler's order:
        # reservations go to the first `maxReservations` old enough.
        self._candidates = Candidates()
        # Those that reserved and have not been placed or dropped since (a pod they waited
        # for leaving gives their reservation back): they keep room that fits them now.
        self._holders: set[str] = set()
        self._picture = Picture()
        # What its filter found of the reserved nodes: kept for the pass, and the answers
        # against a reservation with no expected start across passes (room.py).
        self._room = RoomChecks(self._picture)
        # Per reservation refusing a pod and whether the pod states no runtime, the words
        # its filter says so with, kept for the pass (a reservation of the key kept beside).
        self._said: dict[tuple[int, bool], tuple[StartReservation, str]] = {}
        self._promises = BrokenPromises()  # the search for pods past their stated runtime
        # Where the state's log of changed rows stood when the holders were last planned:
        # they are planned again, as Slurm's backfill plans every cycle, once any changed.
        self._mark: int | None = None
        # What the holders' rows held at that mark (`row_content`): a row the log names but
        # that is as it was (a gang's failed attempt took room there and gave it back) does
        # not count as changed.
        self._content: dict[int, Hashable] = {}
        # Every row ever reserved: only there may a pod have been kept off.
        self._reserved_rows: set[int] = set()
        # The instant of the current pass (told at its start, before the queue's hints are
        # asked): the hint judges a reserved node as of then.
        self._now: datetime | None = None

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return {ClusterEvent.NODE: None, ClusterEvent.NODE_ROOM: PodsHint(self._let_in)}

    def _let_in(self, change: ClusterChange, pods: Sequence[Pod]) -> list[bool]:
        """Per pod, whether it may now pass this filter on a node it may have been kept off
        (one reserved, now or before): judged as of the pass's instant on the reserved nodes
        that a pod left (more room at the expected start) or whose reservation changed (a
        change no pod made); any pod may pass once a reservation was given back. A pod
        arriving only takes room; a node no longer reserved that a pod left is
        NodeResourcesFit's to judge; and with the cluster unchanged a refusal only hardens
        as time passes (the pod would run further past the start). So a pod kept off
        reserved nodes is not woken by every pod leaving them, only when it may pass."""
        rows = self._rows_to_judge(change)
        now = self._now
        if rows is None or now is None:
            return [True] * len(pods)
        state = change.state
        answers = []
        for pod in pods:
            cycle = Cycle(state, pod, now, state.pods.demand(pod), state.nodes.free)
            # What `_refused_by` finds on each reserved row, as kept for its verdicts.
            own, bound = _terms(cycle)
            kept_off = self._room.kept_off(state, own, cycle.demand, now, bound)[0]
            refused = {row for row, _ in kept_off}
            answers.append(any(row not in refused for row in rows))
        return answers

    def _rows_to_judge(self, change: ClusterChange) -> list[int] | None:
        """The reserved rows the change may open (see `_let_in`); None: any pod may pass (a
        reservation was given back, or the log no longer reaches back)."""
        state = change.state
        mark = change.mark
        rows = None if mark is None else state.nodes.rows_changed_since(mark)
        pods = None if mark is None else state.nodes.pods_changed_since(mark)
        if rows is None or pods is None:
            return None
        held = state.start_reservations.by_row
        bound = state.pods.bound
        judged: dict[int, None] = {}
        for row, other in zip(rows, pods, strict=True):
            if row in judged or row not in self._reserved_rows:
                continue
            if other is not None and other.key in bound and other.deletion_timestamp is None:
                continue  # it arrived
            if row in held:
                judged[row] = None
            elif other is None:
                return None  # given back (or its room changed otherwise)
        return list(judged)

    def forget_pods(self, keys: Collection[str]) -> None:
        self._picture.forget(keys)
        for key in keys:
            self._drop(f"Pod {key}")

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        return bound_of(state, pod), self.kin_reads(state, pod)

    def kin_reads(self, state: ClusterState, pod: Pod) -> Hashable:
        # Its own reservation (a holder's pods are not kept off it), never its name: what
        # is kept per shape must not name a pod. Its stated runtime matters only on the
        # nodes others reserved, which `verdicts` judges.
        held = state.start_reservations.by_holder
        if not held:
            return ()  # (most pods of a replay: no reservation is held)
        return tuple([_identity(held[h]) for h in holders_of(pod) if h in held])

    def verdicts(self, cycle: Cycle) -> Hashable:
        """The reserved rows the pod may not take now, and whether it states no runtime
        (which the refusal says)."""
        if not cycle.state.start_reservations.by_row:
            return ()
        # As `_refused_by` on each reserved row, from what is kept for the pass.
        own, bound = _terms(cycle)
        return self._room.kept_off(cycle.state, own, cycle.demand, cycle.now, bound)

    # ---- filter ------------------------------------------------------------------------

    def _refusal(self, cycle: Cycle, row: int) -> str | None:
        """Why the pod may not take room on `row` (None: it may)."""
        by = self._refused_by(cycle, row)
        if by is None:
            return None
        bound = _terms(cycle)[1]
        key = (id(by), bound is None)  # what the words depend on
        said = self._said.get(key)
        if said is None or said[0] is not by:
            said = self._said[key] = (by, _kept_off(by, bound))
        return said[1]

    def _refused_by(self, cycle: Cycle, row: int) -> StartReservation | None:
        """The reservation that keeps the pod off `row` (None: it may take room there)."""
        held = cycle.state.start_reservations.by_row.get(row)
        if not held:
            return None
        own, bound = _terms(cycle)
        if started_here(held, own, cycle.now):
            return None
        mine, checks = self._room.checks(row, held, own, cycle.now)
        now = cycle.now.timestamp()
        leaves = math.inf if bound is None else now + bound
        for index, check in enumerate(checks):
            # A pod stating no runtime is counted as staying for good.
            if check.start is not None and check.start >= leaves:
                cycle.changes_at(check.start - leaves + now)  # started later, it would overlap
                continue
            kept, changes = self._room.keeps_room(
                cycle.state, row, mine, index, cycle.demand, cycle.now
            )
            cycle.changes_at(changes)
            if not kept:
                return check.reservation
        return None

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        held = cycle.state.start_reservations.by_row
        by_reason: dict[tuple[str, bool], list[int]] = {}
        for row, reservations in held.items():
            if row < candidates.shape[0] and candidates[row]:
                why = self._refusal(cycle, row)
                if why is not None:
                    # A reservation with an expected start is not preempted for; one that
                    # waits for pods without a stated runtime may be (preemption decides).
                    resolvable = all(r.start is None for r in reservations)
                    by_reason.setdefault((why, resolvable), []).append(row)
        rejections = []
        for (why, resolvable), rows in sorted(by_reason.items()):
            nodes = np.zeros(candidates.shape[0], dtype=np.bool_)
            nodes[rows] = True
            rejections.append(Rejection(why, nodes, resolvable=resolvable))
        return rejections

    def fits_rows(self, cycle: Cycle, rows: IndexArray) -> BoolArray:
        held = cycle.state.start_reservations.by_row
        fits = np.ones(rows.shape[0], dtype=np.bool_)
        if held:
            for i, row in enumerate(rows.tolist()):
                if row in held and self._refused_by(cycle, row) is not None:
                    fits[i] = False
        return fits

    def row_check(self, cycle: Cycle) -> RowCheck | None:
        if not cycle.state.start_reservations.by_row:
            return None
        return lambda row: self._refused_by(cycle, row) is None

    # ---- score -------------------------------------------------------------------------

    def uniform(self, cycle: Cycle) -> bool:
        # A pod stating no runtime never ends, for planning: the other scores place it.
        return _terms(cycle)[1] is None

    def score(self, cycle: Cycle, feasible: BoolArray) -> IntArray:
        scores = np.zeros(feasible.shape[0], dtype=np.int64)
        if not self.uniform(cycle):
            for row in np.flatnonzero(feasible).tolist():
                scores[row] = self._drain(cycle, row)
        return scores

    def score_rows(self, cycle: Cycle, rows: IndexArray) -> IntArray:
        return np.fromiter((self._drain(cycle, row) for row in rows.tolist()), np.int64)

    def row_score(self, cycle: Cycle) -> RowScore:
        return lambda row: self._drain(cycle, row)

    def preemption_tie_break(self, cycle: Cycle) -> PreemptionTieBreak | None:
        """Preemption takes the least room: the node whose victims hold the least of what the
        pod asks for first (`packing.evicted_share`); a pod stating no runtime keeps
        kube-scheduler's order, as the score leaves it (docs/backfill.md)."""
        if self.uniform(cycle):
            return None
        state, demand = cycle.state, cycle.demand
        return lambda row, victims: evicted_share(state, demand, row, victims)

    def _drain(self, cycle: Cycle, row: int) -> int:
        """How much of the pod's stated runtime the node is busy anyway (`drain_score`)."""
        state = cycle.state
        now = cycle.now.timestamp()
        bound = _terms(cycle)[1]
        held = state.start_reservations.by_row.get(row, ())
        free = free_at(self._picture.last_end(state, row, now), held, now)
        score, until = drain_score(free, now, math.inf if bound is None else float(bound))
        cycle.changes_at(until)
        return score

    # ---- reservations ------------------------------------------------------------------

    def before_pass(self, state: ClusterState, now: datetime) -> None:
        self._now = now
        self._room.new_pass()
        self._room.follow(state)
        self._said.clear()
        framework = self._framework
        if framework is None or not self._candidates:
            self._content.clear()  # no holders: nothing to compare (nor gone pods to keep)
            return
        found = None if self._mark is None else state.nodes.rows_changed_since(self._mark)
        changed = None if found is None else self._changed(state, found)
        if changed is not None and not changed and not self._next_unheld(state, now):
            # No pod came or left, no reservation was given back, and no candidate is due
            # one before the holders: all stand as planned.
            return
        daemon = set(state.reservations.by_row)  # DaemonSet preemption's: held whole
        planned: dict[str, StartReservation] = {}
        moved: set[int] = set()  # the rows of reservations planned anew this time
        most_room: IntArray | None = None  # `Picture.most_room`, read once when first needed
        held = state.start_reservations.by_holder
        walk = self._walk(state)
        for holder in walk:
            pods = _waiting_pods(state, holder)
            if not pods:
                self._drop(holder)  # bound or gone
                continue
            if len(planned) >= self.max_reservations:
                break
            kept = held.get(holder)
            if kept is None and not self._waited(state, holder, pods, now):
                continue  # too young to reserve yet
            if limit_refusal(state, holder, pods, planned.values()):
                self._drop(holder)  # its queue's limit leaves it no room
                continue
            # A holder is kept even where it fits now by room: it holds the room until it is
            # attempted (it may be backing off), not a pod that happens to come first in the
            # pass. One not holding yet that fits now by room is left to its attempt.
            earlier = list(planned.values())
            holding = holder in self._holders
            # Its nodes are as they were, and nothing lets it start sooner elsewhere: it
            # keeps its plan (a later start on other nodes, found with room that others'
            # plans changed, would only move it back and forth). Where no start sooner can
            # be had at all (`_may_start_sooner`), it is not planned again to find out.
            unmoved = None
            if kept is not None and changed is not None:
                unmoved = None if kept.shares.keys() & (changed | daemon | moved) else kept
            if unmoved is not None and unmoved.start is None:
                if most_room is None:
                    most_room = self._picture.most_room(state)  # no pod comes or goes here
                if not self._may_start_sooner(state, unmoved, pods, earlier, now, most_room):
                    planned[holder] = unmoved
                    walk.count()
                    continue
            reservation = self._plan(
                framework, state, holder, pods, now, earlier, daemon, fits_now=holding
            )
            if unmoved is not None and not _sooner(reservation, unmoved):
                planned[holder] = unmoved
                walk.count()
                continue
            if reservation is None:
                # It never fits around the earlier ones, or it fits now: its next failed
                # attempt makes it a candidate again.
                self._drop(holder)
                continue
            planned[holder] = reservation
            walk.count()
            if reservation != kept:
                moved.update(reservation.shares)
        for holder, reservation in list(held.items()):
            if planned.get(holder) != reservation:
                state.release_start(holder)
        for holder, reservation in planned.items():
            if holder not in held:
                self._hold(state, reservation)
        self._follow(state)

    def after_attempt(
        self,
        framework: PlacementFramework,
        state: ClusterState,
        holder: str,
        waiting: Sequence[Pod],
        rejected_by: frozenset[str] | None,
        now: datetime,
    ) -> str:
        self._framework = framework
        held = state.start_reservations.by_holder.get(holder)
        if not waiting or (held is not None and _room_was_there(held, now)):
            # Placed, a way was found for it, or it failed with the room in hand: it
            # waits for something else than room.
            if held is not None:
                state.release_start(holder)
            self._drop(holder)
            return ""
        if held is not None:
            return held.message(now)
        if not _lacks_room(state, holder, rejected_by):
            self._drop(holder)  # it waits for something else than room
            return ""
        lane = lane_of(state, waiting[0])
        if holder in self._candidates:  # kept where it is if it already waited
            self._candidates.file(holder, lane)  # (in its queue's lane: its pod may name another)
        else:
            self._candidates.add(holder, _order(framework, waiting, now), lane)
        if len(state.start_reservations.by_holder) < self.max_reservations and self._waited(
            state, holder, waiting, now
        ):
            # Reserved room counts against the queue's limits as usage does.
            blocked = limit_refusal(state, holder, waiting)
            if blocked:
                told = rejected_by is not None and "Queues" in rejected_by  # said so already
                return "" if told else f"reserves nothing: {blocked}."
            # A free reservation goes to the candidates before it first (asleep in the
            # scheduling queue, they were not attempted since it came free).
            self._reserve_before(framework, state, holder, now)
            if len(state.start_reservations.by_holder) < self.max_reservations:
                held = self._reserve(framework, state, holder, waiting, now)
                if held is None:
                    self._drop(holder)  # until its next failed attempt
        return "" if held is None else held.message()

    def _reserve(
        self,
        framework: PlacementFramework,
        state: ClusterState,
        holder: str,
        pods: Sequence[Pod],
        now: datetime,
    ) -> StartReservation | None:
        """The holder's reservation around those made, if it gets one (held from now)."""
        earlier = list(state.start_reservations.by_holder.values())
        daemon = set(state.reservations.by_row)
        held = self._plan(framework, state, holder, pods, now, earlier, daemon)
        if held is not None:
            self._keep_content(state, held)
            self._hold(state, held)
        return held

    def _reserve_before(
        self, framework: PlacementFramework, state: ClusterState, holder: str, now: datetime
    ) -> None:
        """The free reservations to the candidates before `holder`, in order, that are old
        enough and within their queues' limits."""
        held = state.start_reservations.by_holder
        walk = self._walk(state)
        for other in walk:
            if other == holder or len(held) >= self.max_reservations:
                return
            if other in held:
                walk.count()
                continue
            pods = _waiting_pods(state, other)
            due = bool(pods) and self._waited(state, other, pods, now)
            if due and limit_refusal(state, other, pods):
                continue
            if not pods or (due and self._reserve(framework, state, other, pods, now) is None):
                self._drop(other)  # gone, or its next failed attempt tells again
            elif due:
                walk.count()

    def _next_unheld(self, state: ClusterState, now: datetime) -> bool:
        """Whether a candidate old enough to reserve and holding nothing comes before the
        `maxReservations`-th holder (or there are fewer holders): it is due a reservation."""
        held = state.start_reservations.by_holder
        seen = 0
        walk = self._walk(state)
        for holder in walk:
            if seen >= self.max_reservations:
                return False
            if holder in held:
                seen += 1
                walk.count()
                continue
            pods = _waiting_pods(state, holder)
            if not pods:
                self._drop(holder)
            elif self._waited(state, holder, pods, now):
                return True
        return False

    def overdue(
        self, state: ClusterState, holder: str, waiting: Sequence[Pod], now: datetime
    ) -> Overdue:
        held = state.start_reservations.by_holder.get(holder)
        return Overdue() if held is None else owed(self._promises, state, held, waiting, now)

    def _walk(self, state: ClusterState) -> Walk:
        """The candidates in the scheduler's order, each holder counted in its queue's usage
        once it holds a reservation (`Walk.count`)."""
        return self._candidates.walk(state, lambda holder: _waiting_pods(state, holder))

    def _hold(self, state: ClusterState, reservation: StartReservation) -> None:
        state.hold_start(reservation)
        self._holders.add(reservation.holder)
        self._reserved_rows.update(reservation.shares)

    def _drop(self, holder: str) -> None:
        """No longer a candidate (nor a holder) until its next failed attempt."""
        self._candidates.discard(holder)
        self._holders.discard(holder)

    def _follow(self, state: ClusterState) -> None:
        """Planned as of now: where the log of changed rows is, and what the holders' rows
        hold."""
        self._mark = state.nodes.change_mark()
        rows = {row for held in state.start_reservations.by_holder.values() for row in held.shares}
        self._content = {row: row_content(state, row) for row in rows}

    def _keep_content(self, state: ClusterState, reservation: StartReservation) -> None:
        """What a reservation made within the pass holds of its rows that the log names
        nowhere since the mark: as they were at the mark (`_changed`)."""
        logged = None if self._mark is None else state.nodes.rows_changed_since(self._mark)
        if logged is not None:
            touched = set(logged)
            for row in reservation.shares.keys() - touched - self._content.keys():
                self._content[row] = row_content(state, row)

    def _changed(self, state: ClusterState, logged: Sequence[int]) -> set[int]:
        """The rows the log names since the mark, less the holders' rows that are as they
        were then."""
        content = self._content
        return {
            row
            for row in set(logged)
            if row not in content or content[row] != row_content(state, row)
        }

    def _plan(
        self,
        framework: PlacementFramework,
        state: ClusterState,
        holder: str,
        pods: Sequence[Pod],
        now: datetime,
        earlier: Sequence[StartReservation],
        daemon: set[int],
        fits_now: bool = False,
    ) -> StartReservation | None:
        """The nodes where the pods start earliest around the `earlier` reservations, off the
        `daemon` rows; None if they never fit, or (unless `fits_now`) if they fit by room
        now: room is not what they wait for."""
        if not _complete(state, holder, pods):
            return None
        eligible = _eligible(framework, state, pods, now)
        # Another pod nominated to a node (preemption frees room there for it) is planned as
        # if it ran there from now for its stated runtime; a node nominated for a pod that
        # states none is not offered.
        own = {pod.key for pod in pods}
        nominated = [(row, key) for key, row in state.nominations.items() if key not in own]
        off = daemon | {row for row, key in nominated if _unbounded(state, key)}
        if off:
            eligible[[row for row in off if row < eligible.shape[0]]] = False
        rows = np.flatnonzero(eligible)
        if rows.shape[0] == 0:
            return None
        members = _members(state, pods)
        length = _stay(state, pods)
        best: tuple[float, int, str, IndexArray, Plan] | None = None
        # A gang that requires one domain of a key plans within each domain alone: the
        # earliest start wins, then fewer pods to wait for, then the domain's value.
        for value, domain in _domains(state, holder, rows):
            plan = self._earliest(state, domain, members, now, length, earlier, nominated)
            if plan is not None:
                start = math.inf if plan.start is None else plan.start
                found = (start, len(plan.waits_for), value, domain, plan)
                if best is None or found[:3] < best[:3]:
                    best = found
        if best is None:
            return None
        start, _, _, rows, plan = best
        if not fits_now and start <= now.timestamp() and not plan.waits_for:
            return None  # it fits by room now: room is not what it waits for
        names = state.nodes.resources.names
        shares = {int(rows[i]): _amounts(names, share) for i, share in plan.shares.items()}
        until = None
        if plan.start is not None and not math.isinf(length):
            until = datetime.fromtimestamp(plan.start + length, UTC)
        return StartReservation(
            holder,
            tuple(sorted(state.nodes.name(row) for row in shares)),
            shares,
            None if plan.start is None else datetime.fromtimestamp(plan.start, UTC),
            plan.waits_for,
            until,
        )

    def _may_start_sooner(
        self,
        state: ClusterState,
        kept: StartReservation,
        pods: Sequence[Pod],
        earlier: Sequence[StartReservation],
        now: datetime,
        most_room: IntArray,
    ) -> bool:
        """Whether planning the pods again around the `earlier` reservations may find an
        expected start for `kept`, which has none (asked only then: one with a start is
        always planned again); false only where no node could hold them at any moment it
        could give: nowhere is there room enough, each node counted with every pod there
        expected to end at all gone (`most_room`, the picture's), less what earlier
        reservations hold all through the pods' stay (docs/backfill.md#cost)."""
        room = most_room.copy()
        forever = math.isinf(_stay(state, pods))
        width = room.shape[1]
        for reservation in earlier:
            start, until = window(reservation, now)
            # Held from its start for good: through all of a stay that goes on for good,
            # and through any stay once that start has come.
            if math.isinf(until) and (forever or start <= now.timestamp()):
                for row, share in reservation.shares.items():
                    if row < room.shape[0]:
                        room[row] -= _vector(state, share, width)
        return may_fit(room[state.nodes.valid[: room.shape[0]]], _members(state, pods))

    def _earliest(
        self,
        state: ClusterState,
        rows: IndexArray,
        members: IntArray,
        now: datetime,
        length: float,
        earlier: Sequence[StartReservation],
        nominated: Sequence[tuple[int, str]],
    ) -> Plan | None:
        rank = state.nodes.name_rank()[rows]
        blocks = _blocks(state, earlier, rows, now)
        if not nominated:
            # Most plans of holders waiting for pods without a stated runtime end here,
            # reading only the sums the picture keeps per node (docs/backfill.md#cost).
            last = at_the_end(
                self._picture.totals(state, rows), rank, members, now.timestamp(), length, blocks
            )
            if not isinstance(last, str):
                return last
        free = state.nodes.free[rows]
        endings = self._picture.endings(state, rows.tolist(), now)
        if nominated:
            free, endings = with_nominated(state, rows, free, endings, nominated, now)
            return earliest_start(free, rank, endings, members, now.timestamp(), length, blocks)
        return sweep(free, rank, endings, members, now.timestamp(), length, blocks)

    def _waited(self, state: ClusterState, holder: str, pods: Sequence[Pod], now: datetime) -> bool:
        """Whether the holder was created at least `reserveAfterSeconds` ago (a gang by its
        PodGroup's creation, else its oldest pod's; none stated: now, as the queue sort
        takes it, so `reserveAfterSeconds: 0` lets it reserve)."""
        created: datetime | None = None
        if holder.startswith("PodGroup "):
            group = state.groups.by_key.get(holder.removeprefix("PodGroup "))
            created = None if group is None else group.creation_timestamp
        if created is None:
            stamps = [p.creation_timestamp for p in pods if p.creation_timestamp is not None]
            created = min(stamps, default=None)
        return ((now - created).total_seconds() if created else 0.0) >= self.reserve_after


def _blocks(
    state: ClusterState, earlier: Sequence[StartReservation], rows: IndexArray, now: datetime
) -> Blocks:
    """The room the `earlier` reservations hold on `rows` (as candidate indices), and when."""
    width = state.nodes.free.shape[1]
    index = {row: i for i, row in enumerate(rows.tolist())}
    node: list[int] = []
    spans: list[tuple[float, float]] = []
    amounts: list[IntArray] = []
    for reservation in earlier:
        span = window(reservation, now)
        for row, share in reservation.shares.items():
            i = index.get(row)
            if i is None:
                continue
            node.append(i)
            spans.append(span)
            amounts.append(_vector(state, share, width))
    if not node:
        return Blocks.none(width)
    starts, untils = zip(*spans, strict=True)
    return Blocks(
        np.asarray(node, dtype=np.intp),
        np.asarray(starts, dtype=np.float64),
        np.asarray(untils, dtype=np.float64),
        np.stack(amounts),
    )


def _vector(state: ClusterState, share: Mapping[str, int], width: int) -> IntArray:
    """A reservation's share of a node as a row of `width` resources."""
    amount = np.zeros(width, dtype=np.int64)
    for name, value in share.items():
        col = state.nodes.resources.get(name)
        if col is not None and col < width:
            amount[col] = value
    return amount


def _sooner(plan: StartReservation | None, than: StartReservation) -> bool:
    """Whether `plan` starts before `than` (no expected start: never)."""
    if plan is None or plan.start is None:
        return False
    return than.start is None or plan.start < than.start


def _identity(reservation: StartReservation) -> Hashable:
    """A reservation as what its holder's pods are judged by, without naming it."""
    shares = tuple((row, tuple(sorted(s.items()))) for row, s in reservation.shares.items())
    return shares, reservation.start, reservation.until


def _kept_off(reservation: StartReservation, bound: int | None) -> str:
    if reservation.start is None:
        when = "once pods without a stated runtime end"
    else:
        when = f"expected start {format_time(reservation.start)}"
    if bound is None:
        why = "states no runtime and "
    elif reservation.start is None:
        why = ""  # held from now on: the pod is kept off for the room, not for its runtime
    else:
        why = "would run past that start and "
    return (
        f"node(s) were reserved for {reservation.holder} ({when}): "
        f"this pod {why}would take room kept for it"
    )


def _members(state: ClusterState, pods: Sequence[Pod]) -> IntArray:
    """The pods' requests (pods x resources)."""
    members = np.zeros((len(pods), state.nodes.free.shape[1]), dtype=np.int64)
    for i, pod in enumerate(pods):
        demand = state.pods.demand(pod)
        members[i, demand.cols] = demand.amounts
    return members


def _unbounded(state: ClusterState, key: str) -> bool:
    """Whether the pending pod `key` states no runtime (or is not pending)."""
    pod = state.pods.pending.get(key)
    return pod is None or bound_of(state, pod) is None


def _stay(state: ClusterState, pods: Sequence[Pod]) -> float:
    """How long the pods stay once started: the longest stated runtime (inf: one states
    none)."""
    bounds = [bound_of(state, pod) for pod in pods]
    return math.inf if any(b is None for b in bounds) else float(max(b or 0 for b in bounds))


_TERMS = "Backfill.terms"


def _terms(cycle: Cycle) -> tuple[tuple[str, ...], int | None]:
    """The pod's holder names and stated runtime, read once per cycle."""
    found = cycle.scratch.get(_TERMS)
    if found is None:
        found = cycle.scratch[_TERMS] = (holders_of(cycle.pod), bound_of(cycle.state, cycle.pod))
    assert isinstance(found, tuple)
    return found


def _required_key(state: ClusterState, holder: str) -> str:
    """The label key whose one domain the holder's gang requires ("" for none)."""
    kind, _, key = holder.partition(" ")
    group = state.groups.by_key.get(key) if kind == "PodGroup" else None
    return "" if group is None else group.topology.required


def _lacks_room(state: ClusterState, holder: str, rejected_by: frozenset[str] | None) -> bool:
    """Whether the attempt failed for room (None: not known, so it may have): a filter of
    ROOM rejected it, or, for a gang requiring one domain, its domain search (Coscheduling)."""
    if rejected_by is None or not rejected_by.isdisjoint(ROOM):
        return True
    return "Coscheduling" in rejected_by and bool(_required_key(state, holder))


def _domains(state: ClusterState, holder: str, rows: IndexArray) -> list[tuple[str, IndexArray]]:
    """The candidate rows by domain of the key the holder's gang requires (docs/topology.md),
    by value; all of them as one otherwise."""
    label = _required_key(state, holder)
    if not label:
        return [("", rows)]
    by_value: dict[str, list[int]] = {}
    for row in rows.tolist():
        node = state.nodes.by_row[row]
        value = None if node is None else node.labels.get(label)
        if value is not None:
            by_value.setdefault(value, []).append(row)
    return [(v, np.asarray(r, dtype=np.intp)) for v, r in sorted(by_value.items())]


def _order(framework: PlacementFramework, pods: Sequence[Pod], now: datetime) -> Order:
    """The holder's place in the scheduler's order: its profile's queue sort of its first
    pod (a gang's goes by its PodGroup), enqueued at its creation as the queue has it."""
    first = pods[0]
    return framework.queue_sort.sort_key(first, (first.creation_timestamp or now).timestamp())


def _room_was_there(held: StartReservation, now: datetime) -> bool:
    """Whether the reservation had its room free at `now` (its start has come, no pod to
    wait for)."""
    return held.start is not None and held.start <= now and not held.waits_for


def _amounts(names: Sequence[str], share: IntArray) -> dict[str, int]:
    return {names[col]: int(share[col]) for col in np.flatnonzero(share).tolist()}


def _complete(state: ClusterState, holder: str, pods: Sequence[Pod]) -> bool:
    """Whether the pods can make their group whole (a gang still short of members waits
    for them, not for room)."""
    kind, _, key = holder.partition(" ")
    if kind == "Pod":
        return True
    group = state.groups.by_key.get(key)
    if group is None:
        return False
    bound = sum(1 for m in state.groups.members.get(key, ()) if m in state.pods.bound)
    return bound + len(pods) >= group.min_member


def _waiting_pods(state: ClusterState, holder: str) -> list[Pod]:
    """The holder's pods still pending: the pod, or the gang's pending members."""
    pending = state.pods.pending
    return [pending[m] for m in holder_pods(holder, state.groups.members) if m in pending]


def _eligible(
    framework: PlacementFramework, state: ClusterState, pods: Sequence[Pod], now: datetime
) -> BoolArray:
    """The nodes every pod could run on once room frees up: their static properties admit
    it and their allocatable room holds it (the framework keeps the static verdicts per
    pod shape)."""
    allocatable = state.nodes.allocatable[: state.nodes.rows]
    eligible: BoolArray = state.nodes.valid[: state.nodes.rows].copy()
    for pod in pods:
        demand = state.pods.demand(pod)
        cycle = Cycle(state, pod, now, demand, state.nodes.free)
        eligible &= framework.static_passing(cycle)
        eligible &= np.all(allocatable[:, demand.cols] >= demand.amounts, axis=1)
    return eligible
