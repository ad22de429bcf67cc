"""NodePorts (Filter): a pod's host ports must be free on the node.

A port clashes with one of a pod on the node (or nominated there with priority at least the
pod's) when port and protocol are equal and the addresses are equal or either is every
address (`0.0.0.0`, what an empty `hostIP` means). Ports come from the containers and the
restartable init containers (sidecars). The rejection is resolvable: preemption may remove
the pods holding the ports, and must remove all of them (`still_fails`).

The ports in use per node are kept in `PortIndex`, which follows ClusterState's log of changed
rows, so an attempt looks only at the nodes where some pod holds a host port. Pods without
host ports skip the plugin and pay nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence

import numpy as np

from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    QueueingHint,
    Rejection,
    RowLocalPlugin,
)
from batchsched.objects.records import HostPort, Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray

REASON = "node(s) didn't have free ports for the requested pod ports"


def clashes(wanted: Sequence[HostPort], held: Sequence[HostPort]) -> bool:
    return any(w.conflicts(h) for w in wanted for h in held)


class PortIndex:
    """The pods holding host ports on each node row, refreshed for the rows that changed."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.holders: dict[int, list[Pod]] = {}
        self._mark = -1

    def sync(self) -> None:
        state = self.state
        changed = state.nodes.rows_changed_since(self._mark) if self._mark >= 0 else None
        rows = range(state.nodes.rows) if changed is None else set(changed)
        pods_on = state.nodes.pods_on
        for row in rows:
            pods = [p for p in pods_on[row].values() if p.host_ports]
            if pods:
                self.holders[row] = pods
            else:
                self.holders.pop(row, None)
        self._mark = state.nodes.change_mark()


class NodePorts(FilterPlugin, RowLocalPlugin):
    name = "NodePorts"

    def __init__(self) -> None:
        self._index: PortIndex | None = None

    def index(self, state: ClusterState) -> PortIndex:
        if self._index is None or self._index.state is not state:
            self._index = PortIndex(state)
        self._index.sync()
        return self._index

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return {ClusterEvent.NODE: None, ClusterEvent.NODE_ROOM: self._port_may_be_free}

    @staticmethod
    def _port_may_be_free(change: ClusterChange, pod: Pod) -> bool:
        """A pod holding a port the pod wants came or went (left: the port is free there)."""
        wanted = pod.host_ports
        return change.pods_where(lambda other: clashes(wanted, other.host_ports))

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        return pod.host_ports

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        return not pod.host_ports

    def blockers(self, cycle: Cycle, row: int) -> list[Pod]:
        """The pods on `row` (bound, or nominated there and at least as important) whose
        host ports clash with the pod's."""
        state, pod = cycle.state, cycle.pod
        held = list(self.index(state).holders.get(row, ()))
        for key in state.nominations.on_row(row):
            other = state.pods.by_key.get(key)
            if other is not None and key != pod.key and (other.priority or 0) >= cycle.priority:
                held.append(other)
        return [other for other in held if clashes(pod.host_ports, other.host_ports)]

    def _rows_to_check(self, cycle: Cycle) -> list[int]:
        rows = set(self.index(cycle.state).holders)
        for key in cycle.state.nominations:
            other = cycle.state.pods.by_key.get(key)
            if other is not None and other.host_ports:
                rows.add(cycle.state.nominations[key])
        return sorted(rows)

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        if not cycle.pod.host_ports:
            return []
        clash = np.zeros(candidates.shape[0], dtype=np.bool_)
        for row in self._rows_to_check(cycle):
            if candidates[row] and self.blockers(cycle, row):
                clash[row] = True
        if not clash.any():
            return []

        def still_fails(row: int, removed: Collection[str]) -> bool:
            return any(
                p.key not in removed and p.deletion_timestamp is None
                for p in self.blockers(cycle, row)
            )

        return [Rejection(REASON, clash, resolvable=True, still_fails=still_fails)]

    def fits_rows(self, cycle: Cycle, rows: IndexArray) -> BoolArray:
        ok = np.ones(rows.shape[0], dtype=np.bool_)
        if cycle.pod.host_ports:
            holders = self.index(cycle.state).holders
            for i, row in enumerate(rows.tolist()):
                if row in holders or cycle.state.nominations.on_row(row):
                    ok[i] = not self.blockers(cycle, row)
        return ok
