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
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from batchsched.framework.interface import (
    GROUP_PLACED,
    Cycle,
    Diagnosis,
    NodeTotals,
    PlacementFramework,
)
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.resources import Demand

# Cycle.scratch key telling Coscheduling's PreFilter that the group was already admitted.
ADMITTED = "coscheduling.admitted"
# Up to this many stale rows are all refreshed (one by one, `Framework.place_changed`):
# sorting out the rows that came back would cost about what it saves.
_COPY_PAST = 8


@dataclass(slots=True)
class BaseRoom:
    """Each member's filter and score results (`base_results`), kept across the placements
    of one search and refreshed in place, each time on the rows where they are out of date
    only: the rows whose room or pods changed since the member's last refresh (`moved`, a
    log of such rows, e.g. victims taken off or put back, read from the member's position
    `seen`) and the rows earlier members took in its last placement (`taken`).

    A stale row whose room and pods are back as they were when the results were made
    (`away`, per node: the pods now off it or held on it, 0 on such a row) shows each member
    its first results there (`unmoved`): copied instead of filtered and scored again. Half
    the stale rows of a large search are such rows (units put back by the bisection and the
    reprieve step, rows the members took and gave back)."""

    results: dict[str, NodeTotals | None]
    moved: list[int]
    seen: dict[str, int]
    taken: dict[str, list[int]]
    unmoved: dict[str, NodeTotals]
    away: IntArray


class TentativePlacement:
    """With a `base`, each member is placed as the full filter and score pass would, from its
    kept results refreshed only on its stale rows and the rows earlier members took; a member
    that then fits nowhere gets a Diagnosis without reasons (callers with a base only count
    who was placed)."""

    def __init__(
        self,
        framework: PlacementFramework,
        state: ClusterState,
        now: datetime,
        free: IntArray,
        group: str,
        base: BaseRoom | None = None,
        allowed: BoolArray | None = None,
    ) -> None:
        self.framework = framework
        self.allowed = allowed  # the rows members may take (a topology domain), None: any
        self._rows = None if allowed is None else np.flatnonzero(allowed)
        self.state = state
        self.now = now
        self.free = free
        self.group = group
        self.base = base
        self._taken: list[tuple[int, Demand, Pod]] = []
        # Every member so far was placed from row-local results (`_from_base`): each node's
        # results depended on that node's room and pods alone.
        self.row_local = True

    def place(self, pod: Pod) -> int | Diagnosis:
        """The node row chosen for `pod` (its room now taken), or why none fits."""
        state = self.state
        demand = state.pods.demand(pod)
        before = tuple(placed for _, _, placed in self._taken)
        scratch = {ADMITTED: self.group, GROUP_PLACED: before}
        cycle = Cycle(state, pod, self.now, demand, self.free, scratch)
        pre = self.framework.pre_filter(cycle)
        if pre.reject is not None:
            self.row_local = False
            none = np.zeros(state.nodes.rows, dtype=np.bool_)
            return Diagnosis(
                state.nodes.count, {}, none, pre_filter_message=pre.reject, rejected_by=pre.by
            )
        allowed = pre.allowed_nodes
        placed = self._from_base(cycle) if allowed is None else None
        if self.allowed is not None:
            allowed = self.allowed if allowed is None else allowed & self.allowed
        if placed is None:
            self.row_local = False
            if allowed is not None and allowed is self.allowed and self._rows is not None:
                placed = self.framework.place_on_rows(cycle, self._rows, allowed)
            else:
                placed = self.framework.place(cycle, allowed)
        if not isinstance(placed, Diagnosis):
            state.nodes.take_room(self.free, placed, demand)
            self._taken.append((placed, demand, pod))  # undone with the rest if Reserve raises
            if self.base is not None:
                self.base.away[placed] += 1
            self.framework.reserve(cycle, placed)  # e.g. the PVs its claims take
            state.pods.hold(pod.key, placed)
        return placed

    def _from_base(self, cycle: Cycle) -> int | Diagnosis | None:
        """The member's row found from its kept results; None without them."""
        base, key = self.base, cycle.pod.key
        results = None if base is None else base.results.get(key)
        if base is None or results is None or not self.framework.row_local(cycle):
            return None
        taken = [row for row, _, _ in self._taken]
        stale = np.asarray(
            base.moved[base.seen[key] :] + base.taken.get(key, []) + taken, dtype=np.intp
        )
        unmoved = base.unmoved.get(key)
        if unmoved is not None and stale.shape[0] > _COPY_PAST:
            back = base.away[stale] == 0
            if back.any():
                # Row-local results (asked above, and at `base_results`) on a row whose room
                # and pods are as they were then: the first results.
                kept = stale[back]
                results.feasible[kept] = unmoved.feasible[kept]
                results.total[kept] = unmoved.total[kept]
                stale = stale[~back]
        placed = self.framework.place_changed(cycle, results, stale)
        if self._rows is not None and placed is not None:  # refreshed: chosen in the domain
            placed = self.framework.choose(self.state, cycle.pod, results, self._rows)
        # The rows earlier members took are refreshed with them there; they leave at `undo`.
        base.seen[key], base.taken[key] = len(base.moved), taken
        if placed is None:
            state = self.state
            return Diagnosis(state.nodes.count, {}, np.zeros(state.nodes.rows, dtype=np.bool_))
        return placed

    def undo(self) -> None:
        """Give back the room (and what Reserve held) of every member placed so far."""
        for idx, demand, pod in reversed(self._taken):
            self.state.nodes.take_room(self.free, idx, demand, sign=-1)
            if self.base is not None:
                self.base.away[idx] -= 1
            self.state.pods.unhold(pod.key, idx)
            self.framework.unreserve(self.state, pod)
        self._taken.clear()


def base_results(
    framework: PlacementFramework,
    state: ClusterState,
    now: datetime,
    free: IntArray,
    group: str,
    pods: Sequence[Pod],
) -> dict[str, NodeTotals | None]:
    """Each member's filter and score results on `free` and the state as it is, for a
    `BaseRoom` (None for a member that a pre-filter rejects or restricts, or that only a full
    pass can place)."""
    results: dict[str, NodeTotals | None] = {}
    for pod in pods:
        scratch = {ADMITTED: group, GROUP_PLACED: ()}
        cycle = Cycle(state, pod, now, state.pods.demand(pod), free, scratch)
        pre = framework.pre_filter(cycle)
        usable = pre.reject is None and pre.allowed_nodes is None
        results[pod.key] = framework.evaluate(cycle) if usable else None
    return results


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
