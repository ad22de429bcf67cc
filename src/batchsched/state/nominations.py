"""Nominations: pending pods' nominated node rows, with the room they hold kept summed.

`ClusterState.free_for(pod)` must subtract the requests of every pod nominated with priority
at least the pod's own. Walking all nominations per scheduling attempt is quadratic when many
preemptors wait at once (each preemption adds one), so the held room is kept per priority
level as a (node row x resource) array, updated as nominations come and go, and so is the
sum of the levels at and above each level a pod asked for: a pod's room is then one
subtraction, not one per level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, TypeVar, overload

import numpy as np

from batchsched.objects.records import Pod

if TYPE_CHECKING:
    from batchsched.state.nodes import IntArray
    from batchsched.state.resources import Demand


_T = TypeVar("_T")
_MISSING = object()


class Nominations(MutableMapping[str, int]):
    def __init__(
        self,
        pod_of: Callable[[str], Pod | None],
        demand_of: Callable[[Pod], Demand],
        row_changed: Callable[[int], None] = lambda row: None,
    ):
        self._rows: dict[str, int] = {}
        self._by_row: dict[int, set[str]] = {}
        self._held_by: dict[str, tuple[int, int, Demand]] = {}  # key -> (row, priority, demand)
        self._levels: dict[int, IntArray] = {}  # priority -> room held per row and resource
        self._counts: dict[int, int] = {}  # priority -> nominations holding room at it
        # Level priority -> the room held at it or above, as big as the room it was last
        # taken from (`held_for`): one subtraction per pod however many levels count.
        self._sums: dict[int, IntArray] = {}
        self._pod_of = pod_of
        self._demand_of = demand_of
        self._row_changed = row_changed
        # Moves on every change: results computed against the nominations stay valid while
        # it stands still.
        self.version = 0

    def __getitem__(self, key: str) -> int:
        return self._rows[key]

    def __setitem__(self, key: str, row: int) -> None:
        self.version += 1
        self._release(key)
        self._forget_row(key)
        self._rows[key] = row
        self._by_row.setdefault(row, set()).add(key)
        self._row_changed(row)
        pod = self._pod_of(key)
        if pod is None:
            return
        demand = self._demand_of(pod)
        priority = pod.priority or 0
        self._held_by[key] = (row, priority, demand)
        self._counts[priority] = self._counts.get(priority, 0) + 1
        level = self._level(priority, row + 1, int(demand.cols.max(initial=-1)) + 1)
        level[row, demand.cols] += demand.amounts
        self._add_to_sums(priority, row, demand, 1)

    def __delitem__(self, key: str) -> None:
        self.version += 1
        self._forget_row(key)
        del self._rows[key]
        self._release(key)

    def _forget_row(self, key: str) -> None:
        row = self._rows.get(key)
        if row is not None:
            self._row_changed(row)
            on_row = self._by_row[row]
            on_row.discard(key)
            if not on_row:
                del self._by_row[row]

    def on_row(self, row: int) -> list[str]:
        """Keys of the pods nominated to node `row`, in name order."""
        return sorted(self._by_row.get(row, ()))

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    # `get` and `pop` as the mapping's own: the inherited ones go through `__getitem__` and
    # raise KeyError for a pod without a nomination, the common case, several times per pod.
    @overload
    def get(self, key: str, /) -> int | None: ...
    @overload
    def get(self, key: str, /, default: int | _T) -> int | _T: ...
    def get(self, key: str, /, default: object = None) -> object:
        return self._rows.get(key, default)

    @overload
    def pop(self, key: str, /) -> int: ...
    @overload
    def pop(self, key: str, /, default: int | _T) -> int | _T: ...
    def pop(self, key: str, /, default: object = _MISSING) -> object:
        if key not in self._rows:
            if default is _MISSING:
                raise KeyError(key)
            return default
        row = self._rows[key]
        del self[key]
        return row

    def _release(self, key: str) -> None:
        held = self._held_by.pop(key, None)
        if held is None:
            return
        row, priority, demand = held
        self._add_to_sums(priority, row, demand, -1)
        self._counts[priority] -= 1
        if self._counts[priority] == 0:
            # Drop the level: with no nominations left, free_for hands out `free` itself.
            del self._counts[priority], self._levels[priority]
            if not self._counts:
                self._sums.clear()  # all zero: made again when next asked for
        else:
            self._levels[priority][row, demand.cols] -= demand.amounts

    def _level(self, priority: int, rows: int, width: int) -> IntArray:
        level = self._levels.get(priority)
        if level is not None and level.shape[0] >= rows and level.shape[1] >= width:
            return level
        old_rows, old_width = level.shape if level is not None else (0, 0)
        grown = np.zeros((max(rows, 2 * old_rows), max(width, old_width)), dtype=np.int64)
        if level is not None:
            grown[:old_rows, :old_width] = level
        self._levels[priority] = grown
        return grown

    def _add_to_sums(self, priority: int, row: int, demand: Demand, sign: int) -> None:
        for low, held in list(self._sums.items()):
            if priority < low:
                continue
            if row < held.shape[0] and int(demand.cols.max(initial=-1)) < held.shape[1]:
                held[row, demand.cols] += sign * demand.amounts
            else:
                del self._sums[low]  # made again, bigger, when next asked for

    def _held_from(self, low: int, shape: tuple[int, ...]) -> IntArray:
        """The room held at priority `low` or above, per row and resource, of `shape`."""
        held = self._sums.get(low)
        if held is None or held.shape != shape:
            # Column-major as `free`, which `held_for` subtracts it from.
            held = np.zeros(shape, dtype=np.int64, order="F")
            for level_priority, level in self._levels.items():
                if level_priority >= low:
                    rows, width = min(level.shape[0], shape[0]), min(level.shape[1], shape[1])
                    held[:rows, :width] += level[:rows, :width]
            self._sums[low] = held
        return held

    def held_for(self, pod: Pod, free: IntArray) -> IntArray | None:
        """`free` minus the room held by other pods nominated at the pod's priority or above.

        None when no such nomination holds anything (the caller keeps `free` as it is).
        """
        if not self._levels:
            return None
        priority = pod.priority or 0
        low = min((p for p in self._levels if p >= priority), default=None)
        if low is None:
            return None
        adjusted: IntArray = np.subtract(free, self._held_from(low, free.shape), order="K")
        own = self._held_by.get(pod.key)
        if own is not None and own[1] >= priority:
            row, _, demand = own
            adjusted[row, demand.cols] += demand.amounts
        return adjusted
