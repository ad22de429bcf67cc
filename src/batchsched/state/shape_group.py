"""Waiting pods of one shape that one queueing hint answers for: the queue's unit of retry.

Members are kept in queue order. A woken group enters the active queue as one entry, keyed by
its first member not yet tried in this pass; members are tried one at a time from there.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from batchsched.framework.signature import HintGroup

SortKey = tuple[Any, ...]


@dataclass(slots=True)
class ShapeGroup:
    name: HintGroup  # framework/signature.py: the members' shape and rejecting plugins
    id: int
    marks: Hashable  # the changes up to here have been judged for every member
    members: dict[str, SortKey] = field(default_factory=dict)  # key -> its queue order
    # (order, key) sorted; may still hold members that left, skipped and compacted lazily.
    _order: list[tuple[SortKey, str]] = field(default_factory=list)
    where: str = "unschedulable"  # or backoff, active, parked (see SchedulingQueue)
    version: int = 0  # heap entries of an older version are stale
    after: SortKey | None = None  # members up to here were tried, or told, in this pass
    expiry: float = 0.0  # when the backoff of every member is over
    fresh: set[str] = field(default_factory=set)  # members not to try again in this pass

    def add(self, key: str, order: SortKey, expiry: float, fresh: bool) -> None:
        self.members[key] = order
        insort(self._order, (order, key))
        self.expiry = max(self.expiry, expiry)
        if fresh:
            self.fresh.add(key)

    def discard(self, key: str) -> None:
        self.members.pop(key, None)
        self.fresh.discard(key)
        if len(self._order) > 2 * len(self.members) + 16:
            self._order = sorted((order, k) for k, order in self.members.items())
        # Members leave from the front most (they bind in queue order): drop them there.
        while self._order and self.members.get(self._order[0][1]) != self._order[0][0]:
            self._order.pop(0)

    def head(self) -> tuple[SortKey, str] | None:
        """The first member after `after`, in queue order."""
        start = 0 if self.after is None else bisect_right(self._order, self.after, key=_first)
        for i in range(start, len(self._order)):
            order, key = self._order[i]
            if self.members.get(key) == order and key not in self.fresh:
                return order, key
        return None


def _first(item: tuple[SortKey, str]) -> SortKey:
    return item[0]
