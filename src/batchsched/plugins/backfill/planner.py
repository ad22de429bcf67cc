"""Where and when a waiting pod or gang can start earliest (docs/backfill.md).

Pure planning over a picture of the candidate nodes: their room now (`free`, nodes x
resources) and the pods running there as endings (node, expected end in seconds since the
epoch, inf for a pod stating no runtime, and its requests). One sweep over the endings sorted
once by time: each node's room after each of its endings is a cumulative sum, so how many of
the members each node could hold after each ending is known at once, and the first moment the
nodes together could hold all the members is found without packing at every ending. Only
then are the members packed (largest first, nodes ordered by fewer pods to wait for, then
names), and for a gang of unlike members packing may move on to later endings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
class Plan:
    """Candidate node indices with the members' total share on each, the expected start
    (seconds since the epoch; None: only once pods stating no runtime end too) and the
    running pods that must end first (sorted)."""

    shares: dict[int, IntArray]
    start: float | None
    waits_for: tuple[str, ...]


def packs_now(free: IntArray, members: IntArray) -> bool:
    """Whether the members fit the nodes' room now (first-fit decreasing)."""
    room = free.copy()
    for member in sorted(members.tolist(), reverse=True):
        fits = np.flatnonzero(np.all(room >= member, axis=1))
        if fits.shape[0] == 0:
            return False
        room[int(fits[0])] -= member
    return True


def earliest_start(
    free: IntArray, rank: IntArray, endings: Endings, members: IntArray, now: float
) -> Plan | None:
    """The earliest plan for `members` (members x resources) on the candidate nodes: now,
    else at a running pod's expected end, else once pods stating no runtime end too. None:
    they never fit there. `rank` orders the nodes by name."""
    if members.shape[0] == 0 or free.shape[0] == 0:
        return None
    order = np.argsort(endings.at, kind="stable")
    at = endings.at[order]
    # Pods past their expected end count as ending now.
    at = np.maximum(at, now)
    times = _first_feasible_times(free, endings, order, members)
    if times is None:
        return None
    first = int(np.searchsorted(at, times, side="left"))
    # Each distinct time from the first feasible one on (now included as a time of its own).
    candidates = np.unique(np.concatenate(([max(times, now)], at[first:])))
    for when in candidates.tolist():
        plan = _pack_at(free, rank, endings, order, at, members, when)
        if plan is not None:
            return plan
    return None


def _first_feasible_times(
    free: IntArray, endings: Endings, order: npt.NDArray[np.intp], members: IntArray
) -> float | None:
    """The first time at which, for each kind of member, the nodes could hold all members
    of that kind (each kind alone: necessary, and enough for alike members); None: never.
    -inf: already now."""
    counts: dict[tuple[int, ...], int] = {}
    for member in members.tolist():
        counts[tuple(member)] = counts.get(tuple(member), 0) + 1
    latest = -math.inf
    for kind, count in counts.items():
        when = _first_time_holding(free, endings, order, np.asarray(kind, np.int64), count)
        if when is None:
            return None
        latest = max(latest, when)
    return latest


def _slots(room: IntArray, kind: IntArray) -> IntArray:
    """How many members of `kind` each row of `room` holds."""
    need = kind > 0
    if not need.any():
        return np.full(room.shape[0], np.iinfo(np.int64).max // 4, dtype=np.int64)
    held = np.maximum(room[:, need], 0) // kind[need]
    return np.asarray(held.min(axis=1), dtype=np.int64)


def _first_time_holding(
    free: IntArray, endings: Endings, order: npt.NDArray[np.intp], kind: IntArray, count: int
) -> float | None:
    total = int(_slots(free, kind).sum())
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
    after = _slots(free[nodes_sorted] + gained, kind)
    before = np.empty_like(after)
    before[1:] = after[:-1]
    before[starts] = _slots(free[nodes_sorted[starts]], kind)
    delta = np.empty_like(after)
    delta[by_node] = after - before  # back in time order
    reached = np.flatnonzero(total + np.cumsum(delta) >= count)
    if reached.shape[0] == 0:
        return None
    return float(endings.at[order][reached[0]])


def _pack_at(
    free: IntArray,
    rank: IntArray,
    endings: Endings,
    order: npt.NDArray[np.intp],
    at: FloatArray,
    members: IntArray,
    when: float,
) -> Plan | None:
    """The members packed once every pod ending at or before `when` has ended (inf: all)."""
    ended = order[: int(np.searchsorted(at, when, side="right"))]
    room = free.copy()
    np.add.at(room, endings.node[ended], endings.requests[ended])
    gone = np.bincount(endings.node[ended], minlength=free.shape[0])
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
    chosen = np.zeros(free.shape[0], dtype=np.bool_)
    chosen[list(shares)] = True
    waited = ended[chosen[endings.node[ended]]]
    waits = sorted(endings.keys[int(e)] for e in waited.tolist())
    start = None if math.isinf(when) else when
    return Plan(dict(sorted(shares.items())), start, tuple(waits))
