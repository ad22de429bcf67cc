"""NodeVolumeLimits (Filter): a node attaches at most its CSINode's `allocatable.count`
volumes per CSI driver.

A volume counts once per node however many pods there use it (state/volumes.py keeps the
count of distinct volumes per driver and node). Nodes without a CSINode, or drivers without a
count, have no limit. CSI-migrated in-tree disks, inline or through a PV, count under the
driver and handle they translate to (objects/csi_migration.py), so they share a limit with
the driver's CSI volumes. As upstream, preemption may free attach slots: a node over the
limit fits once the victims there take enough volumes with them. A VolumeAttachment holds its
volume's slot like a pod using it (state/volumes.py), so evicting pods does not free that.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence

import numpy as np

from batchsched.framework.interface import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    QueueingHint,
    Rejection,
)
from batchsched.objects.records import Pod
from batchsched.plugins.volumebinding.claims import claims_read, volume_events
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

REASON = "node(s) exceed max volume count"


class NodeVolumeLimits(FilterPlugin):
    name = "NodeVolumeLimits"

    def __init__(self) -> None:
        self._limits: dict[str, IntArray] = {}  # driver -> limit per row, -1 for none
        self._csi_rows: BoolArray = np.zeros(0, dtype=np.bool_)  # rows with a CSINode
        self._limits_at: tuple[int, int, int] | None = None

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        return not pod.volumes and not any(disk.driver for disk in pod.disks)

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return volume_events()

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        return claims_read(pod), pod.disks

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        state = cycle.state
        volumes = state.volumes
        limits = self._driver_limits(state)
        for disk in cycle.pod.disks:
            if disk.untranslatable:
                # Upstream's translation fails on every node with a CSINode (elsewhere
                # migration is off there and the disk is not looked at).
                rows = self._csi_rows[: candidates.shape[0]]
                return [Rejection(disk.untranslatable, rows & candidates, resolvable=False)]
        wanted = volumes.attachments(cycle.pod)
        if not wanted:
            return []
        rows = candidates.shape[0]
        rejected = np.zeros(rows, dtype=np.bool_)
        drivers = sorted(d for d in set(wanted.values()) if d in limits)
        for driver in drivers:
            limit = limits[driver]
            new = np.zeros(rows, dtype=np.int64)
            for name, of in wanted.items():
                if of == driver:
                    new += 1
                    for row in volumes.volume_rows.get(name, {}):
                        new[row] -= 1  # already attached there: costs nothing
            in_use = np.zeros(rows, dtype=np.int64)
            counts = volumes.attach_counts.get(driver)
            if counts is not None:
                upto = min(rows, counts.shape[0])
                in_use[:upto] = counts[:upto]
            rejected |= (limit[:rows] >= 0) & (new > 0) & (in_use + new > limit[:rows])

        def still_fails(row: int, removed: Collection[str]) -> bool:
            freed = volumes.freed_by(row, removed)
            for driver in drivers:
                limit = int(limits[driver][row])
                counts = volumes.attach_counts.get(driver)
                in_use = int(counts[row]) if counts is not None and row < counts.shape[0] else 0
                in_use -= sum(1 for of in freed.values() if of == driver)
                new = sum(
                    1
                    for name, of in wanted.items()
                    if of == driver
                    and (name in freed or row not in volumes.volume_rows.get(name, {}))
                )
                if limit >= 0 and new > 0 and in_use + new > limit:
                    return True
            return False

        return [Rejection(REASON, rejected & candidates, resolvable=True, still_fails=still_fails)]

    def _driver_limits(self, state: ClusterState) -> dict[str, IntArray]:
        at = (state.volumes.csi_version, state.nodes.generation, state.nodes.rows)
        if at != self._limits_at:
            limits: dict[str, IntArray] = {}
            self._csi_rows = np.zeros(state.nodes.rows, dtype=np.bool_)
            for name, csi_node in state.volumes.csi_nodes.items():
                row = state.nodes.row_of.get(name)
                if row is None:
                    continue
                self._csi_rows[row] = True
                for driver, count in csi_node.limits.items():
                    if driver not in limits:
                        limits[driver] = np.full(state.nodes.rows, -1, dtype=np.int64)
                    limits[driver][row] = count
            self._limits, self._limits_at = limits, at
        return self._limits
