"""The scheduling queue, after kube-scheduler's: active, backoff and unschedulable pods.

Order among active pods comes from the profile's QueueSort (by default: higher priority, then
earlier enqueue time, then `namespace/name`). A pod that failed waits in `unschedulable` until
the cluster changes, then backs off (1 s doubling to 10 s per failed attempt) before it is
active again; after `max_unschedulable_seconds` it is retried even if nothing changed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from batchsched.objects.records import Pod

SortKey = Callable[[Pod, float], tuple[Any, ...]]


def default_sort_key(pod: Pod, enqueued: float) -> tuple[Any, ...]:
    return (-(pod.priority or 0), enqueued, pod.key)


@dataclass(slots=True)
class QueuedPod:
    pod: Pod
    enqueued: float  # seconds since the epoch, by the injected clock
    attempts: int = 0
    failed_at: float = 0.0
    failed_generation: int = -1
    version: int = 0  # heap entries of an older version are stale
    where: str = field(default="active")


class SchedulingQueue:
    def __init__(
        self,
        sort_key: SortKey = default_sort_key,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable_seconds: float = 300.0,
    ) -> None:
        self._sort_key = sort_key
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable_seconds = max_unschedulable_seconds
        self._entries: dict[str, QueuedPod] = {}
        self._active: list[tuple[tuple[Any, ...], int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self._unschedulable: set[str] = set()
        # (time, version, key): unschedulable pods to retry at a time even if nothing changes.
        self._wakeups: list[tuple[float, int, str]] = []

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def entry(self, key: str) -> QueuedPod | None:
        return self._entries.get(key)

    def add(self, pod: Pod, now: float) -> None:
        """A new pending pod, or a new version of one already queued."""
        entry = self._entries.get(pod.key)
        if entry is not None:
            entry.pod = pod
            if entry.where == "active":
                self._push_active(entry)
            return
        enqueued = pod.creation_timestamp.timestamp() if pod.creation_timestamp else now
        entry = QueuedPod(pod=pod, enqueued=enqueued)
        self._entries[pod.key] = entry
        self._push_active(entry)

    def remove(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._unschedulable.discard(key)
            entry.version += 1

    def _push_active(self, entry: QueuedPod) -> None:
        entry.version += 1
        entry.where = "active"
        heapq.heappush(
            self._active,
            (self._sort_key(entry.pod, entry.enqueued), entry.version, entry.pod.key),
        )

    def backoff_seconds(self, attempts: int) -> float:
        if attempts <= 0:
            return 0.0
        # The exponent is capped: a pod that failed a thousand times (a long simulation) would
        # overflow a float, and the cap is reached long before that anyway.
        doublings = min(attempts - 1, 62)
        return float(min(self.initial_backoff * 2**doublings, self.max_backoff))

    def pop(self) -> QueuedPod | None:
        while self._active:
            _, version, key = heapq.heappop(self._active)
            entry = self._entries.get(key)
            if entry is not None and entry.version == version and entry.where == "active":
                entry.where = "in-flight"
                return entry
        return None

    def mark_unschedulable(self, key: str, now: float, generation: int) -> None:
        """The pod was tried and did not fit the cluster as of `generation`."""
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.attempts += 1
        entry.failed_at = now
        entry.failed_generation = generation
        entry.where = "unschedulable"
        entry.version += 1
        self._unschedulable.add(key)

    def wake_at(self, key: str, when: float) -> None:
        """An unschedulable pod is retried at `when` even if the cluster does not change."""
        entry = self._entries.get(key)
        if entry is not None and entry.where == "unschedulable":
            heapq.heappush(self._wakeups, (when, entry.version, key))

    def _next_wakeup_entry(self) -> tuple[float, int, str] | None:
        """The earliest wake-up still valid (the pod has not moved since it was set)."""
        while self._wakeups:
            top = self._wakeups[0]
            entry = self._entries.get(top[2])
            if entry is not None and entry.version == top[1] and entry.where == "unschedulable":
                return top
            heapq.heappop(self._wakeups)
        return None

    def refresh(self, now: float, generation: int) -> None:
        """Move pods whose wait is over to the active queue."""
        woken: set[str] = set()
        while (due := self._next_wakeup_entry()) is not None and due[0] <= now:
            woken.add(heapq.heappop(self._wakeups)[2])
        for key in list(self._unschedulable):
            entry = self._entries[key]
            changed = generation > entry.failed_generation
            stale = now - entry.failed_at >= self.max_unschedulable_seconds
            if changed or stale or key in woken:
                self._unschedulable.discard(key)
                entry.where = "backoff"
                entry.version += 1
                expiry = entry.failed_at + self.backoff_seconds(entry.attempts)
                heapq.heappush(self._backoff, (expiry, entry.version, key))
        while self._backoff and self._backoff[0][0] <= now:
            _, version, key = heapq.heappop(self._backoff)
            waiting = self._entries.get(key)
            if waiting is not None and waiting.version == version and waiting.where == "backoff":
                self._push_active(waiting)

    def flush(self) -> None:
        """Everything waiting becomes active now (one-shot mode, where time does not pass)."""
        self._unschedulable.clear()
        self._backoff.clear()
        self._wakeups.clear()
        for entry in self._entries.values():
            if entry.where != "active":
                self._push_active(entry)

    def next_wakeup(self) -> float | None:
        """When the earliest backing-off or woken pod becomes active (for a simulator's clock)."""
        wakeup = self._next_wakeup_entry()
        for expiry, version, key in sorted(self._backoff):
            entry = self._entries.get(key)
            if entry is not None and entry.version == version:
                return expiry if wakeup is None else min(expiry, wakeup[0])
        return None if wakeup is None else wakeup[0]

    def pending_counts(self) -> dict[str, int]:
        counts = {"active": 0, "backoff": 0, "unschedulable": 0}
        for entry in self._entries.values():
            where = "active" if entry.where == "in-flight" else entry.where
            counts[where] = counts.get(where, 0) + 1
        return counts
