"""Where and when a waiting pod or gang can start earliest (docs/backfill.md).

Pure planning over a picture of the candidate nodes: their room now (`free`, nodes x
resources) and the pods running there as endings (node, expected end in seconds since the
epoch, inf for a pod stating no runtime, and its requests). One sweep over the endings sorted
once by time: each node's room after each of its endings is a cumulative sum, so how many of
the members each node could hold after each ending is known at once, and the first moment the
nodes together could hold all the members is found without packing at every ending. Only
then are the members packed (largest first, nodes ordered by fewer pods to wait for, then
names), and for a gang of unlike members packing may move on to later endings.

Time-sliced, as Slurm's backfill plans: the room earlier reservations hold on the nodes, each
from its start to its end (`Blocks`), is taken off the room at every moment of the members'
own stay [start, start + their stated runtime), so a later reservation may hold the same
node at another time but never the same room at the same time. A start is also tried when
an earlier reservation ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Endings:
    """The pods running on the candidate nodes, one entry each."""

    node: npt.NDArray[np.intp]  # index into the candidate nodes
    at: FloatArray  # expected end (seconds since the epoch); inf: states no runtime
    requests: IntArray  # endings x resources
    keys: Sequence[str]


@dataclass(frozen=True, slots=True)
class Blocks:
    """The room earlier reservations hold on the candidate nodes, one entry each: from
    `start` (-inf: already, or as soon as pods stating no runtime end) until `until` (inf:
    for good)."""

    node: npt.NDArray[np.intp]
    start: FloatArray
    until: FloatArray
    amounts: IntArray  # blocks x resources

    @staticmethod
    def none(width: int) -> Blocks:
        empty = np.zeros(0, dtype=np.float64)
        return Blocks(
            np.zeros(0, dtype=np.intp), empty, empty, np.zeros((0, width), dtype=np.int64)
        )

    def held_at(self, when: float, nodes: int) -> IntArray:
        """What they hold per node at `when` (nodes x resources)."""
        held = np.zeros((nodes, self.amounts.shape[1]), dtype=np.int64)
        # An open-ended block holds for good: at inf too.
        active = (self.start <= when) & ((when < self.until) | np.isinf(self.until))
        np.add.at(held, self.node[active], self.amounts[active])
        return held

    def most_held(self, nodes: int) -> IntArray:
        """The most they hold per node at any one moment, per resource (nodes x resources):
        what a plan with no expected start, which holds its room for good from now
        (docs/backfill.md#rules), must leave them. What they hold changes only where one
        begins."""
        held = self.held_at(math.inf, nodes)
        for when in np.unique(self.start).tolist():
            held = np.maximum(held, self.held_at(when, nodes))
        return held


@dataclass(frozen=True, slots=True)
class Plan:
    """Candidate node indices with the members' total share on each, the expected start
    (seconds since the epoch; None: only once pods stating no runtime end too) and the
    running pods that must end first (sorted)."""

    shares: dict[int, IntArray]
    start: float | None
    waits_for: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Totals:
    """The pods on the candidate nodes summed per node: all a plan reads of them when no
    moment before the pods stating no runtime end could hold the members (`at_the_end`)."""

    reach: IntArray  # free room and what the pods expected to end at all request (x resources)
    whole: IntArray  # free room and what all the pods request (nodes x resources)
    pods: IntArray  # how many pods each node runs
    lasting: bool  # whether one of them states no runtime (it ends only at the last moment)
    keys: Callable[[int], Sequence[str]]  # the pods on a candidate node

    @staticmethod
    def of(free: IntArray, endings: Endings) -> Totals:
        ending = ~np.isinf(endings.at)
        reach = free.copy()
        np.add.at(reach, endings.node[ending], endings.requests[ending])
        whole = free.copy()
        np.add.at(whole, endings.node, endings.requests)
        pods = np.bincount(endings.node, minlength=free.shape[0]).astype(np.int64)
        keys = endings.keys
        node = endings.node

        def on(i: int) -> list[str]:
            return [keys[e] for e in np.flatnonzero(node == i).tolist()]

        return Totals(reach, whole, pods, bool((~ending).any()), on)


# `at_the_end`'s answer where some moment before the last could hold the members.
SOONER = "sooner"


def earliest_start(
    free: IntArray,
    rank: IntArray,
    endings: Endings,
    members: IntArray,
    now: float,
    length: float = math.inf,
    blocks: Blocks | None = None,
) -> Plan | None:
    """The earliest plan for `members` (members x resources) on the candidate nodes: now,
    else at a running pod's expected end or an earlier reservation's end, else once pods
    stating no runtime end too. None: they never fit there. `rank` orders the nodes by
    name; `length` is how long the members stay (their stated runtime; inf: none), during
    which `blocks` (earlier reservations) keep their room."""
    last = at_the_end(Totals.of(free, endings), rank, members, now, length, blocks)
    if not isinstance(last, str):
        return last
    return sweep(free, rank, endings, members, now, length, blocks)


def at_the_end(
    totals: Totals,
    rank: IntArray,
    members: IntArray,
    now: float,
    length: float = math.inf,
    blocks: Blocks | None = None,
) -> Plan | str | None:
    """`earliest_start`'s plan where no moment before the pods stating no runtime end could
    hold the members: only then, if at all (None: never); SOONER where some moment before
    might. It reads the nodes' pods only as `totals`, which the caller may keep per node
    (docs/backfill.md#cost)."""
    if members.shape[0] == 0 or totals.whole.shape[0] == 0:
        return None
    if blocks is not None and not blocks.node.shape[0]:
        blocks = None
    if not _never_before_all_end(totals, members, now, length, blocks):
        return SOONER
    # Only once pods stating no runtime end, if at all: the moments before need no look.
    if not (totals.lasting or blocks is not None):
        return None
    room = totals.whole  # every pod has ended
    if not may_fit(room, members):
        return None  # not even then
    if blocks is not None:
        room = room - blocks.most_held(room.shape[0])
    shares = _shares(room, rank, totals.pods, members)
    if shares is None:
        return None
    waits = sorted(key for i in shares for key in totals.keys(i))
    return Plan(shares, None, tuple(waits))


def sweep(
    free: IntArray,
    rank: IntArray,
    endings: Endings,
    members: IntArray,
    now: float,
    length: float = math.inf,
    blocks: Blocks | None = None,
) -> Plan | None:
    """`earliest_start` where `at_the_end` says some moment before the last might hold the
    members: each moment from the first the room alone could hold them on, in turn."""
    order = np.argsort(endings.at, kind="stable")
    at = endings.at[order]
    # Pods past their expected end count as ending now.
    at = np.maximum(at, now)
    if blocks is not None and not blocks.node.shape[0]:
        blocks = None
    # Blocks only take room: the first time the room alone could hold them is a lower bound.
    times = _first_feasible_times(free, endings, order, members)
    if times is None:
        return None
    first = int(np.searchsorted(at, times, side="left"))
    # Each distinct time from the first feasible one on (now included as a time of its own).
    moments = [np.asarray([max(times, now)]), at[first:]]
    if blocks is not None:
        moments.append(blocks.until[blocks.until >= max(times, now)])
        moments.append(np.asarray([math.inf]))
    candidates = np.unique(np.concatenate(moments))
    for when in candidates.tolist():
        room = _room_at(free, endings, order, at, when)
        if blocks is not None:
            room = _room_through(room, free, endings, order, at, blocks, when, length)
        plan = _pack(room, rank, endings, order, at, members, when)
        if plan is not None:
            return plan
    return None


def _never_before_all_end(
    totals: Totals,
    members: IntArray,
    now: float,
    length: float,
    blocks: Blocks | None,
) -> bool:
    """Whether no moment before the pods stating no runtime end can hold the members: not
    even with every pod expected to end gone, less what earlier reservations hold through
    all of any stay from that moment (held for good from a start: through a stay that goes
    on for good, and through any once the start has come). Only for members that each
    request something (the planner counts those that request nothing apart)."""
    if not members.any(axis=1).all():
        return False
    room = totals.reach
    if blocks is not None:
        lasting = np.isinf(blocks.until)
        if not math.isinf(length):
            lasting &= blocks.start <= now
        room = room.copy()
        np.subtract.at(room, blocks.node[lasting], blocks.amounts[lasting])
    return not may_fit(room, members)


def _room_at(
    free: IntArray, endings: Endings, order: npt.NDArray[np.intp], at: FloatArray, when: float
) -> IntArray:
    """The nodes' room once every pod ending at or before `when` has ended (inf: all)."""
    ended = order[: int(np.searchsorted(at, when, side="right"))]
    room = free.copy()
    np.add.at(room, endings.node[ended], endings.requests[ended])
    return room


def _room_through(
    room: IntArray,
    free: IntArray,
    endings: Endings,
    order: npt.NDArray[np.intp],
    at: FloatArray,
    blocks: Blocks,
    when: float,
    length: float,
) -> IntArray:
    """The room left at every moment of [when, when + length) once the blocks take theirs:
    pods only end as time passes, so it is least at `when` or where a block begins. At the
    last moment (inf: no expected start) the room is held from now on, beside every block."""
    nodes = free.shape[0]
    if math.isinf(when):
        return room - blocks.most_held(nodes)
    least = room - blocks.held_at(when, nodes)
    ends = when + length
    begins = np.unique(blocks.start[(blocks.start > when) & (blocks.start < ends)])
    for moment in begins.tolist():
        later = _room_at(free, endings, order, at, moment) - blocks.held_at(moment, nodes)
        least = np.minimum(least, later)
    return least


def _first_feasible_times(
    free: IntArray, endings: Endings, order: npt.NDArray[np.intp], members: IntArray
) -> float | None:
    """The first time at which, for each kind of member, the nodes could hold all members
    of that kind (each kind alone: necessary, and enough for alike members); None: never.
    -inf: already now."""
    latest = -math.inf
    for kind, count in _kinds(members).items():
        when = _first_time_holding(free, endings, order, np.asarray(kind, np.int64), count)
        if when is None:
            return None
        latest = max(latest, when)
    return latest


def may_fit(room: IntArray, members: IntArray) -> bool:
    """Whether, for each kind of member, the rows of `room` (nodes x resources) hold as many
    members of that kind: true wherever `earliest_start` packs them all in that room or
    less, so false rules a plan in it out."""
    return all(
        int(_slots(room, np.asarray(kind, np.int64), count).sum()) >= count
        for kind, count in _kinds(members).items()
    )


def _kinds(members: IntArray) -> dict[tuple[int, ...], int]:
    """How many members ask each request."""
    counts: dict[tuple[int, ...], int] = {}
    for member in members.tolist():
        counts[tuple(member)] = counts.get(tuple(member), 0) + 1
    return counts


def _slots(room: IntArray, kind: IntArray, count: int) -> IntArray:
    """How many of `count` members of `kind` each row of `room` holds: capped at `count`,
    so that sums over rows stay exact (a member asking nothing fits any number of times)."""
    need = kind > 0
    if not need.any():
        return np.full(room.shape[0], count, dtype=np.int64)
    held = np.maximum(room[:, need], 0) // kind[need]
    return np.asarray(np.minimum(held.min(axis=1), count), dtype=np.int64)


def _first_time_holding(
    free: IntArray, endings: Endings, order: npt.NDArray[np.intp], kind: IntArray, count: int
) -> float | None:
    total = int(_slots(free, kind, count).sum())
    if total >= count:
        return -math.inf
    if order.shape[0] == 0:
        return None
    # Each node's room after each of its endings, in time order: a cumulative sum by node.
    node = endings.node[order]
    by_node = np.argsort(node, kind="stable")  # time order kept within a node
    nodes_sorted = node[by_node]
    gained = np.cumsum(endings.requests[order][by_node], axis=0)
    starts = np.flatnonzero(np.r_[True, nodes_sorted[1:] != nodes_sorted[:-1]])
    before_group = np.zeros_like(gained)
    if starts.shape[0] > 1:
        before_group[starts[1:]] = gained[starts[1:] - 1]
    group_of = np.cumsum(np.r_[False, nodes_sorted[1:] != nodes_sorted[:-1]])
    gained -= before_group[starts][group_of]
    after = _slots(free[nodes_sorted] + gained, kind, count)
    before = np.empty_like(after)
    before[1:] = after[:-1]
    before[starts] = _slots(free[nodes_sorted[starts]], kind, count)
    delta = np.empty_like(after)
    delta[by_node] = after - before  # back in time order
    reached = np.flatnonzero(total + np.cumsum(delta) >= count)
    if reached.shape[0] == 0:
        return None
    return float(endings.at[order][reached[0]])


def _pack(
    room: IntArray,
    rank: IntArray,
    endings: Endings,
    order: npt.NDArray[np.intp],
    at: FloatArray,
    members: IntArray,
    when: float,
) -> Plan | None:
    """The members packed in `room`, the nodes' room from `when` on (inf: once all pods
    have ended)."""
    ended = order[: int(np.searchsorted(at, when, side="right"))]
    gone = np.bincount(endings.node[ended], minlength=room.shape[0])
    shares = _shares(room, rank, gone, members)
    if shares is None:
        return None
    chosen = np.zeros(room.shape[0], dtype=np.bool_)
    chosen[list(shares)] = True
    waited = ended[chosen[endings.node[ended]]]
    waits = sorted(endings.keys[int(e)] for e in waited.tolist())
    start = None if math.isinf(when) else when
    return Plan(shares, start, tuple(waits))


def _shares(
    room: IntArray, rank: IntArray, gone: npt.NDArray[np.int64], members: IntArray
) -> dict[int, IntArray] | None:
    """The members packed in `room` (first-fit decreasing), nodes ordered by fewer pods to
    wait for (`gone`), then names: each chosen node's share, by node index."""
    preference = np.lexsort((rank, gone))
    room = room[preference]
    shares: dict[int, IntArray] = {}
    # Largest members first (first-fit decreasing); equal ones keep their order.
    rows = members.tolist()
    for i in sorted(range(len(rows)), key=lambda i: rows[i], reverse=True):
        member = members[i]
        fits = np.flatnonzero(np.all(room >= member, axis=1))
        if fits.shape[0] == 0:
            return None
        slot = int(fits[0])
        room[slot] -= member
        node = int(preference[slot])
        if node in shares:
            shares[node] = shares[node] + member
        else:
            shares[node] = member.copy()
    return dict(sorted(shares.items()))
