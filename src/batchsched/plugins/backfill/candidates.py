"""The pods and gangs Backfill may reserve for, in the scheduler's order (docs/backfill.md#rules):
each failed its last attempt for room with no way found. As Slurm's backfill reserves for its
highest-priority jobs (`bf_job_part_count_reserve`), reservations go to the first of them, not
to whichever happens to be attempted first once a reservation is free."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from typing import Any

Order = tuple[Any, ...]  # the queue sort's key of the holder's first pod


class Candidates:
    def __init__(self) -> None:
        self._order: dict[str, Order] = {}  # holder -> its order
        self._sorted: list[tuple[Order, str]] = []

    def __contains__(self, holder: object) -> bool:
        return holder in self._order

    def __bool__(self) -> bool:
        return bool(self._order)

    def add(self, holder: str, order: Order) -> None:
        """The holder waits for room (kept where it is if it already did)."""
        if holder not in self._order:
            self._order[holder] = order
            insort(self._sorted, (order, holder))

    def discard(self, holder: str) -> None:
        order = self._order.pop(holder, None)
        if order is not None:
            del self._sorted[bisect_left(self._sorted, (order, holder))]

    def __iter__(self) -> Iterator[str]:
        """The holders in order. Only the holder just yielded may be discarded meanwhile
        (the walk then goes on with the next), and none added."""
        i = 0
        entries = self._sorted
        while i < len(entries):
            entry = entries[i]
            yield entry[1]
            if i < len(entries) and entries[i] is entry:
                i += 1
