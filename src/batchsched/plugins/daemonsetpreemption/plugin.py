"""DaemonSetPreemption (PreFilter, Filter, PostFilter) (docs/daemonset.md).

- PreFilter: a DaemonSet pod is evaluated on its one node only; on a node reserved for it,
  nominations of other pods do not count (they cannot go there while it is reserved).
- Filter: a node reserved for a pod takes no other pod. The rejection is unresolvable, so
  general preemption never picks that node for anyone else; freed room waits for the holder.
- PostFilter (DaemonSet pods only): reserve the node; once the reservation is older than
  `preemptionStartDelaySeconds` and the pod still does not fit, evict victims chosen by
  `preemption.daemonset_victims` (the DaemonSet strategy). Other pods are left to the other
  post-filters.

Args: `preemptionStartDelaySeconds` (30, >= 0), `victimSelectionStrategy` ([single, multiple]),
`singleVictimDeviationPercent` (10, 0..100), `maxVictims` (5, >= 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

import numpy as np

from batchsched.decisions import Decision, Evict, Reserve
from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    Diagnosis,
    FilterPlugin,
    IndexArray,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Rejection,
    RowCheck,
    RowLocalPlugin,
)
from batchsched.objects.daemonset import daemonset_node
from batchsched.objects.parse import format_time
from batchsched.objects.records import Pod
from batchsched.plugins.args import ArgsReader
from batchsched.preemption.daemonset_victims import (
    STRATEGIES,
    Clash,
    VictimChooser,
    VictimSettings,
    fits,
    room_with,
)
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray

REASON = "node(s) were reserved for a DaemonSet pod"
ARGS = (
    "preemptionStartDelaySeconds",
    "victimSelectionStrategy",
    "singleVictimDeviationPercent",
    "maxVictims",
)


def read_args(args: Mapping[str, Any] | None) -> tuple[int, VictimSettings]:
    """The start delay in seconds and the victim settings, validated."""
    reader = ArgsReader(DaemonSetPreemption.name, args, ARGS)
    delay = reader.int_in("preemptionStartDelaySeconds", 30, 0)
    strategies = reader.get("victimSelectionStrategy", list, list(STRATEGIES))
    if not strategies:
        raise reader.fail("victimSelectionStrategy", "must name at least one of single, multiple")
    for i, strategy in enumerate(strategies):
        if strategy not in STRATEGIES:
            raise reader.fail(
                f"victimSelectionStrategy[{i}]", f"{strategy!r} is not one of single, multiple"
            )
    if len(set(strategies)) != len(strategies):
        raise reader.fail("victimSelectionStrategy", f"names a strategy twice: {strategies}")
    deviation = reader.int_in("singleVictimDeviationPercent", 10, 0, 100)
    max_victims = reader.int_in("maxVictims", 5, 1)
    return delay, VictimSettings(tuple(strategies), deviation, max_victims)


class DaemonSetPreemption(PreFilterPlugin, FilterPlugin, RowLocalPlugin, PostFilterPlugin):
    name = "DaemonSetPreemption"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.start_delay, settings = read_args(args)
        self.chooser = VictimChooser(settings)
        self._reserved: BoolArray = np.zeros(0, dtype=np.bool_)
        self._reserved_version: tuple[int, int] = (-1, -1)

    # ---- queueing hints ----------------------------------------------------------------

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        # A DaemonSet pod's victims depend on most of the cluster and on time: it is retried
        # after any change. Other pods are only ever kept off reserved nodes.
        return {
            ClusterEvent.NODE: None,
            ClusterEvent.NODE_ROOM: self._unreserved_or_daemon,
            ClusterEvent.POLICY: _is_daemon,
            ClusterEvent.ANY: _is_daemon,
        }

    @staticmethod
    def _unreserved_or_daemon(change: ClusterChange, pod: Pod) -> bool:
        """A changed node is not held for another pod (e.g. its reservation ended)."""
        state = change.state
        if _is_daemon(change, pod) or not state.reservations.by_row:
            return True
        held = {row for row, r in state.reservations.by_row.items() if r.pod != pod.key}
        return any(row not in held for row in change.rows.tolist())

    # ---- pre-filter --------------------------------------------------------------------

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        node = daemonset_node(cycle.pod)
        if node is None:
            return None
        state = cycle.state
        allowed = np.zeros(state.nodes.rows, dtype=np.bool_)
        idx = state.nodes.row_of.get(node)
        if idx is not None:
            allowed[idx] = True
            if state.reservations.by_pod.get(
                cycle.pod.key
            ) == idx and not state.nodes.is_shared_free(cycle.free):
                cycle.free[idx] = state.nodes.free[idx]  # `free` is this cycle's own adjusted copy
                cycle.own_room = False
        return PreFilterResult(allowed_nodes=allowed)

    # ---- filter ------------------------------------------------------------------------

    def _blocked(self, cycle: Cycle) -> BoolArray | None:
        """Nodes reserved for pods other than this one, or None if there are none."""
        state = cycle.state
        if not state.reservations.by_row:
            return None
        version = (state.reservations.version, state.nodes.rows)
        if version != self._reserved_version:
            mask = np.zeros(state.nodes.rows, dtype=np.bool_)
            mask[np.fromiter(state.reservations.by_row, dtype=np.intp)] = True
            self._reserved, self._reserved_version = mask, version
        own = state.reservations.by_pod.get(cycle.pod.key)
        if own is None:
            return self._reserved
        mask = self._reserved.copy()
        mask[own] = False
        return mask

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        blocked = self._blocked(cycle)
        if blocked is None:
            return []
        hit = blocked & candidates
        return [Rejection(REASON, hit, resolvable=False)] if hit.any() else []

    def fits_rows(self, cycle: Cycle, rows: IndexArray) -> BoolArray:
        blocked = self._blocked(cycle)
        if blocked is None:
            return rows >= 0  # all true (row indices are not negative), cheaper than np.ones
        return ~blocked[rows]

    def row_check(self, cycle: Cycle) -> RowCheck | None:
        blocked = self._blocked(cycle)
        if blocked is None:
            return None
        return lambda row: not blocked.item(row)

    # ---- post-filter -------------------------------------------------------------------

    def post_filter(self, cycle: Cycle, diagnosis: Diagnosis) -> PostFilterResult:
        pod = cycle.pod
        node = daemonset_node(pod)
        if node is None:
            return PostFilterResult()
        state = cycle.state
        idx = state.nodes.row_of.get(node)
        if idx is None:
            return _said(f"node {node} does not exist")
        if not diagnosis.resolvable[idx]:
            held = state.reservations.by_row.get(idx)
            if held is not None and held.pod != pod.key:
                return _said(f"node {node} is reserved for {held.pod}")
            return _said(f"node {node} cannot take this pod whatever is removed")
        decisions: list[Decision] = []
        reservation = state.reservations.of(pod.key)
        since = cycle.now if reservation is None else reservation.since
        if reservation is None:
            decisions.append(Reserve(node, pod.key, since))
        start = since + timedelta(seconds=self.start_delay)
        if cycle.now < start:
            waiting = _said(
                f"node {node} is reserved for this pod since {format_time(since)}; "
                f"victims are chosen from {format_time(start)}",
                decisions,
            )
            waiting.retry_at = start  # nothing else may change by then
            cycle.changes_at(start.timestamp())
            return waiting
        if pod.preemption_policy == "Never":
            return _said(
                f"node {node} is reserved for this pod; preemptionPolicy Never: no victims",
                decisions,
            )
        found = diagnosis.clash_check(idx)
        clash = None if found is None else partial(found, idx)
        return self._preempt(cycle, state, idx, node, decisions, clash)

    def _preempt(
        self,
        cycle: Cycle,
        state: ClusterState,
        idx: int,
        node: str,
        decisions: list[Decision],
        check: Clash | None,
    ) -> PostFilterResult:
        pod = cycle.pod
        running: list[Pod] = []
        leaving: list[Pod] = []
        for other in state.nodes.pods_on[idx].values():
            (leaving if other.deletion_timestamp is not None else running).append(other)
        names = state.nodes.resources.names
        free = {names[col]: int(state.nodes.free[idx, col]) for col in range(len(names))}
        room = room_with(free, leaving)  # pods already told to go will free their room
        if leaving and fits(room, pod.requests) and (check is None or not check(())):
            return _said(
                f"waiting for {len(leaving)} pod(s) on node {node} to terminate", decisions
            )
        node_obj = state.nodes.by_row[idx]
        assert node_obj is not None
        selection = self.chooser.choose(
            state, pod, running, node_obj.allocatable, room, cycle.now, check
        )
        decisions.extend(selection.warnings)
        cycle.changes_at(selection.protection_ends)
        if not selection.victims:
            return _said(f"node {node}: {selection.why_none}", decisions)
        reason = (
            f"{self.name}: preempted by DaemonSet pod {pod.key} (priority {pod.priority or 0}) "
            f"to make room on node {node}"
        )
        decisions.extend(
            Evict(v.key, v.node_name or node, pod.key, reason) for v in selection.victims
        )
        # No nomination: the reservation already holds the node for this pod.
        return PostFilterResult(
            decisions=decisions,
            message=f"preemption: evicting {len(selection.victims)} pod(s) on node {node}.",
        )


def _said(what: str, decisions: list[Decision] | None = None) -> PostFilterResult:
    return PostFilterResult(decisions=decisions or [], message=f"preemption: {what}.")


def _is_daemon(change: ClusterChange, pod: Pod) -> bool:
    return daemonset_node(pod) is not None
