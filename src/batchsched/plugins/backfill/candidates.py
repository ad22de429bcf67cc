"""The pods and gangs Backfill may reserve for, in the scheduler's order (docs/backfill.md#rules):
each failed its last attempt for room with no way found. As Slurm's backfill reserves for its
highest-priority jobs (`bf_job_part_count_reserve`), reservations go to the first of them, not
to whichever happens to be attempted first once a reservation is free.

The order is the one in which the scheduling queue would hand them out if they were the
pending pods: those in no queue first, then queue by queue (state/queue_order.py), each
holder rated by its first pod as the queue rates its next pod, within a queue the queue sort.
Each holder's queue is kept with it (its lane); every holder is filed anew when pods may
belong to other queues."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.queue_order import QueueWalk, lane_of
from batchsched.state.reserved_quota import requests_of

Order = tuple[Any, ...]  # the queue sort's key of the holder's first pod
Entry = tuple[Order, str]  # (its order, the holder)
PodsOf = Callable[[str], Sequence[Pod]]  # a holder's pending pods (none: gone)


class Candidates:
    def __init__(self) -> None:
        self._kept: dict[str, tuple[Order, str]] = {}  # holder -> its order and lane
        self._lanes: dict[str, list[Entry]] = {}  # lane ("": no queue) -> its holders, sorted
        self._filed_at: Hashable = None  # what the lanes are as of (`walk`)
        self._order: QueueWalk | None = None  # the queue order of the walks, kept per tree

    def __contains__(self, holder: object) -> bool:
        return holder in self._kept

    def __bool__(self) -> bool:
        return bool(self._kept)

    def add(self, holder: str, order: Order, lane: str) -> None:
        """The holder waits for room, in `lane` (kept where it is if it already did)."""
        if holder not in self._kept:
            self._kept[holder] = (order, lane)
            insort(self._lanes.setdefault(lane, []), (order, holder))

    def file(self, holder: str, lane: str) -> None:
        """The holder is in `lane` now (its pod named another queue), keeping its order."""
        kept = self._kept.get(holder)
        if kept is not None and kept[1] != lane:
            self.discard(holder)
            self.add(holder, kept[0], lane)

    def discard(self, holder: str) -> None:
        kept = self._kept.pop(holder, None)
        if kept is not None:
            order, lane = kept
            entries = self._lanes[lane]
            del entries[bisect_left(entries, (order, holder))]
            if not entries:
                del self._lanes[lane]

    def walk(self, state: ClusterState, pods_of: PodsOf) -> Walk:
        """The holders in the scheduler's order as of now (see `Walk`)."""
        at = state.queue_labels_at()
        if at != self._filed_at:  # the tree or a queue label moved: every holder filed anew
            self._filed_at = at
            for holder in list(self._kept):
                pods = pods_of(holder)
                self.file(holder, lane_of(state, pods[0]) if pods else "")
        if self._order is None or self._order.state is not state:
            self._order = QueueWalk(state)
        return Walk(self._order, self._lanes, pods_of)


class Walk:
    """One walk of the holders in the scheduler's order: those in no queue (lane "") first, in
    the queue sort's order; then, with Queue objects, the queue order's choice among the
    lanes by their first holders (`QueueWalk`), usage as of the walk plus the pods of the
    holders `count`ed so far. Only the holder just yielded may be discarded meanwhile (the
    walk goes on with the next), and none added. A holder with no pod left is yielded as it
    is met (the caller drops it), not rated."""

    def __init__(self, order: QueueWalk, lanes: dict[str, list[Entry]], pods_of: PodsOf) -> None:
        self._order = order
        self._state = order.state
        self._lanes = lanes
        self._pods_of = pods_of
        self._at: dict[str, int] = {}  # per lane, the index of its next holder
        self._heads: dict[str, Pod] = {}  # per lane with holders left, its next one's pod
        self._counting = False  # with Queue objects, once the queues' turn came
        self._last = ("", "")  # the lane and name of the holder just yielded

    def __iter__(self) -> Iterator[str]:
        while self._at.get("", 0) < len(self._lanes.get("", ())):  # (the one lane without Queues)
            yield from self._take("")
        queues = [lane for lane in self._lanes if lane]
        if not queues:
            return
        order = self._order
        order.start()
        self._counting = True
        for lane in queues:
            yield from self._settle(lane)
        moved = set(queues)
        while (chosen := order.choose(self._heads, moved)) is not None:
            yield from self._take(chosen)
            yield from self._settle(chosen)
            moved = {chosen}

    def count(self) -> None:
        """The holder just yielded holds a reservation: its pending pods count in its queue's
        usage for the rest of the walk (docs/backfill.md#rules)."""
        lane, holder = self._last
        if lane and self._counting:
            self._order.count(lane, requests_of(self._state, self._pods_of(holder)))

    def _take(self, lane: str) -> Iterator[str]:
        """Yield the lane's next holder and move past it (whether or not it was discarded)."""
        entries = self._lanes.get(lane, [])
        i = self._at.get(lane, 0)
        entry = entries[i]
        self._last = (lane, entry[1])
        yield entry[1]
        entries = self._lanes.get(lane, [])
        self._at[lane] = i + 1 if i < len(entries) and entries[i] is entry else i

    def _settle(self, lane: str) -> Iterator[str]:
        """Note the queue lane's next holder's first pod (with no pod left, yield it at once
        instead)."""
        while self._at.get(lane, 0) < len(self._lanes.get(lane, ())):
            holder = self._lanes[lane][self._at.get(lane, 0)][1]
            pods = self._pods_of(holder)
            if pods:
                self._heads[lane] = pods[0]
                return
            yield from self._take(lane)
        self._heads.pop(lane, None)
