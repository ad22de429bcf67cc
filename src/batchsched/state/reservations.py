"""Nodes held for one pending pod (a DaemonSet pod whose victims are leaving): no other pod
is placed there until the reservation ends.

A pod holds at most one node and a node is held for at most one pod; `ClusterState` ends a
reservation when the pod binds, stops pending or goes away, or the node goes away.

Start reservations (Backfill's, docs/backfill.md): nodes' room held for the earliest start of
a long-waiting pod or gang, under its holder's name, "Pod ns/name" or "PodGroup ns/name"
(`holders_of`, `holder_pods`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from batchsched.objects.parse import format_time
from batchsched.objects.podgroup import group_key_of
from batchsched.objects.quantity import format_amount
from batchsched.objects.records import Pod


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


def holders_of(pod: Pod) -> tuple[str, ...]:
    """The names a start reservation for this pod is held under: its own, and its gang's."""
    group = group_key_of(pod)
    return (f"Pod {pod.key}",) if group is None else (f"Pod {pod.key}", f"PodGroup {group}")


def holder_pods(holder: str, members: Mapping[str, Collection[str]]) -> list[str]:
    """The keys of the pods a holder's name stands for: the pod's own, or its gang's
    members in key order (`members`: per PodGroup key, its members' keys)."""
    kind, _, key = holder.partition(" ")
    return [key] if kind == "Pod" else sorted(members.get(key, ()))


@dataclass(frozen=True, slots=True)
class StartReservation:
    """Nodes held for the earliest start of a long-waiting pod or gang (docs/backfill.md).

    `holder` is "Pod ns/name" or "PodGroup ns/name"; `shares` is, per node row, what the
    holder's pods will take there; `start` the expected start, None when it waits for pods
    that state no runtime; `waits_for` the running pods that must end first. The room is
    held from `start` to `until` only: other reservations may hold the same node's room at
    other times (a time-sliced plan, docs/backfill.md).
    """

    holder: str
    nodes: tuple[str, ...]
    shares: dict[int, dict[str, int]]
    start: datetime | None
    waits_for: tuple[str, ...]
    # When the holder is expected to be done with the room (its start plus its stated
    # runtime); None: never, for planning (no start, or a holder stating no runtime).
    until: datetime | None = None

    def message(self, now: datetime | None = None) -> str:
        """What the holder's pending message says of it at `now`. A start that has passed
        with the holder still waiting is told as now, naming the pods it waits for: they run
        past the end expected of them (a stated runtime, a grace period) and were not evicted
        (docs/backfill.md#what-you-see). The plan keeps its start."""
        nodes = ", ".join(self.nodes)
        if self.start is None:
            waits = ", ".join(self.waits_for)
            return f"reserved {nodes}; waits for pods without a stated runtime ({waits})."
        start = format_time(self.start)
        if now is None or self.start >= now:
            return f"reserved {nodes}; expected start {start}."
        if not self.waits_for:
            return f"reserved {nodes}; expected start now (planned for {start})."
        waits = ", ".join(self.waits_for)
        return (
            f"reserved {nodes}; expected start now (planned for {start}): waits for {waits}, "
            "running past the end expected of them."
        )

    def span(self) -> str:
        """When it holds its room, in words (docs/backfill.md#what-you-see)."""
        if self.start is None:
            return "from now on, open (until the pods it waits for end and its holder starts)"
        start = format_time(self.start)
        if self.until is None:
            return f"from {start} on, open (its holder states no runtime)"
        return f"from {start} until {format_time(self.until)}"

    def room(self, name_of: Callable[[int], str]) -> list[tuple[str, dict[str, int]]]:
        """Per node, by name in order, what the holder's pods will take there (`name_of`
        names a node row)."""
        return sorted(((name_of(row), s) for row, s in self.shares.items()), key=lambda x: x[0])


def room_text(room: dict[str, int]) -> str:
    """What a reservation holds on a node, for people: `nvidia.com/gpu 8, pods 1`."""
    return ", ".join(f"{name} {format_amount(name, n)}" for name, n in sorted(room.items()))


class StartReservations:
    def __init__(self) -> None:
        # In the order they were made: an earlier one took its nodes first.
        self.by_holder: dict[str, StartReservation] = {}
        # Per node row, the reservations holding room there (at times that never overlap
        # on the same room), in the order they were made.
        self.by_row: dict[int, list[StartReservation]] = {}

    def hold(self, reservation: StartReservation) -> None:
        """Record a reservation whose holder holds none."""
        self.by_holder[reservation.holder] = reservation
        for row in reservation.shares:
            self.by_row.setdefault(row, []).append(reservation)

    def release(self, holder: str) -> tuple[int, ...]:
        """End the holder's reservation; the rows it held (none if it held none)."""
        reservation = self.by_holder.pop(holder, None)
        if reservation is None:
            return ()
        for row in reservation.shares:
            others = [r for r in self.by_row[row] if r.holder != holder]
            if others:
                self.by_row[row] = others
            else:
                del self.by_row[row]
        return tuple(reservation.shares)
