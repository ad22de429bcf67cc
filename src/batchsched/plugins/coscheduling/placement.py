"""Tentative placement: a group's members placed one after another, all or none kept.

Each member goes through the profile's normal pre-filters, filters and scores, and its room is
taken on the `free` array it sees before the next member is placed, so later members see the
earlier ones. The placement is tentative: `undo` gives every member's room back, whatever the
outcome; the scheduler then binds the members the plugin decided to bind, as it binds any pod.

Placed members are also shown on their nodes (`ClusterState.hold`), so that later members see
them in the rules that read a node's pods: anti-affinity between members, spread across
members, affinity to each other, host ports.

When the group sees the state's own room (no nominations in the way), the room is taken on it
directly and the change is logged like a bind, which lets the framework refresh its cached
per-shape results for the one row each member took instead of re-evaluating every node.
Otherwise `free` is already a private copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from batchsched.objects.records import Pod
from batchsched.plugins.base import Cycle, Diagnosis, PlacementFramework
from batchsched.state.cluster import ClusterState, Demand, IntArray

# Cycle.scratch key telling Coscheduling's PreFilter that the group was already admitted.
ADMITTED = "coscheduling.admitted"


class TentativePlacement:
    def __init__(
        self,
        framework: PlacementFramework,
        state: ClusterState,
        now: datetime,
        free: IntArray,
        group: str,
    ) -> None:
        self.framework = framework
        self.state = state
        self.now = now
        self.free = free
        self.group = group
        self._taken: list[tuple[int, Demand, str]] = []

    def place(self, pod: Pod) -> int | Diagnosis:
        """The node row chosen for `pod` (its room now taken), or why none fits."""
        state = self.state
        demand = state.demand(pod)
        cycle = Cycle(state, pod, self.now, demand, self.free, {ADMITTED: self.group})
        pre = self.framework.pre_filter(cycle)
        if pre.reject is not None:
            none = np.zeros(state.rows, dtype=np.bool_)
            return Diagnosis(
                state.node_count, {}, none, pre_filter_message=pre.reject, rejected_by=pre.by
            )
        placed = self.framework.place(cycle, pre.allowed_nodes)
        if not isinstance(placed, Diagnosis):
            state.take_room(self.free, placed, demand)
            state.hold(pod.key, placed)
            self._taken.append((placed, demand, pod.key))
        return placed

    def undo(self) -> None:
        """Give back the room of every member placed so far."""
        for idx, demand, key in reversed(self._taken):
            self.state.take_room(self.free, idx, demand, sign=-1)
            self.state.unhold(key, idx)
        self._taken.clear()


def place_members(
    placement: TentativePlacement, pending: Sequence[Pod], need: int
) -> tuple[list[tuple[Pod, int]], list[tuple[Pod, Diagnosis]]]:
    """Place members in order: where each went, and why the others did not fit. Stops as
    soon as fewer than `need` members could still be placed."""
    placed: list[tuple[Pod, int]] = []
    failures: list[tuple[Pod, Diagnosis]] = []
    for pod in pending:
        result = placement.place(pod)
        if isinstance(result, Diagnosis):
            failures.append((pod, result))
            if len(pending) - len(failures) < need:
                break
        else:
            placed.append((pod, result))
    return placed, failures
