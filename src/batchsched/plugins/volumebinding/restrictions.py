"""VolumeRestrictions (Filter): a ReadWriteOncePod claim serves one pod at a time, and an
inline iSCSI, RBD or GCE PD disk one writer per node, an inline EBS volume one pod per node.

While another pod on a node uses such a claim, the pod fits no node. As upstream, preemption
may free the claim: on the node of the pods holding it, evicting them lifts the conflict
(elsewhere it stays: they are not victims there). A pod mounting an iSCSI disk (same IQN) or
an RBD image (same pool and image, a shared monitor) or a GCE PD (same pdName) that a pod on a
node mounts does not fit there unless both mount it read-only; an EBS volume (same volumeID)
not even then. Evicting those pods lifts it, as upstream. Disks reached through claims are
not compared (upstream compares only inline volumes).
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
from batchsched.objects.volumes import READ_WRITE_ONCE_POD
from batchsched.plugins.volumebinding.claims import claims_read, volume_events
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray
from batchsched.state.volumes import claim_key

DISK_CONFLICT = "node(s) had no available disk"
RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


class VolumeRestrictions(FilterPlugin):
    name = "VolumeRestrictions"

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        return not pod.volumes and not pod.disks

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return volume_events()

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        return claims_read(pod), pod.disks

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        return [*self._disk_conflicts(cycle, candidates), *self._claim_conflicts(cycle, candidates)]

    def _disk_conflicts(self, cycle: Cycle, candidates: BoolArray) -> list[Rejection]:
        pod = cycle.pod
        clashes: dict[int, set[str]] = {}  # node row -> pods there mounting a disk it needs
        for disk in pod.disks:
            for other, (row, mounted) in cycle.state.volumes.disk_users.get(disk.key, {}).items():
                if other != pod.key and disk.conflicts(mounted):
                    clashes.setdefault(row, set()).add(other)
        if not clashes:
            return []
        nodes = np.zeros(candidates.shape[0], dtype=np.bool_)
        nodes[list(clashes)] = True

        def still_fails(row: int, removed: Collection[str]) -> bool:
            return not clashes.get(row, set()) <= set(removed)

        return [Rejection(DISK_CONFLICT, nodes & candidates, True, still_fails)]

    def _claim_conflicts(self, cycle: Cycle, candidates: BoolArray) -> list[Rejection]:
        pod = cycle.pod
        volumes = cycle.state.volumes
        holders: set[str] = set()
        for volume in pod.volumes:
            key = claim_key(pod, volume.claim)
            claim = volumes.claims.get(key)
            if claim is not None and READ_WRITE_ONCE_POD in claim.access_modes:
                holders |= volumes.users.get(key, set()) - {pod.key}
        if not holders:
            return []
        held = frozenset(holders)

        def still_fails(row: int, removed: Collection[str]) -> bool:
            return not held <= set(removed)

        return [Rejection(RWOP_CONFLICT, candidates, resolvable=True, still_fails=still_fails)]
