"""Nodes held for one pending pod (a DaemonSet pod whose victims are leaving): no other pod
is placed there until the reservation ends.

A pod holds at most one node and a node is held for at most one pod; `ClusterState` ends a
reservation when the pod binds, stops pending or goes away, or the node goes away.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Reservation:
    """A node held for the one pod that may run there (a DaemonSet pod), since `since`."""

    node: str
    pod: str
    since: datetime


class Reservations:
    def __init__(self) -> None:
        self.by_row: dict[int, Reservation] = {}  # node row -> its reservation
        self.by_pod: dict[str, int] = {}  # pod key -> the row it holds
        self.version = 0  # moves whenever either changes (plugins cache masks against it)

    def hold(self, idx: int, reservation: Reservation) -> None:
        """Record a reservation of row `idx` (neither the row nor the pod holds one)."""
        self.by_row[idx] = reservation
        self.by_pod[reservation.pod] = idx
        self.version += 1

    def release(self, pod_key: str) -> int | None:
        """End the pod's reservation; the row it held, None if it held none."""
        idx = self.by_pod.pop(pod_key, None)
        if idx is not None:
            del self.by_row[idx]
            self.version += 1
        return idx

    def of(self, pod_key: str) -> Reservation | None:
        idx = self.by_pod.get(pod_key)
        return None if idx is None else self.by_row[idx]
