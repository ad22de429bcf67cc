"""VolumeRestrictions (Filter): a ReadWriteOncePod claim serves one pod at a time.

While another pod on a node uses such a claim, the pod fits no node. As upstream, preemption
may free the claim: on the node of the pods holding it, evicting them lifts the conflict
(elsewhere it stays: they are not victims there).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence

from batchsched.objects.records import Pod
from batchsched.objects.volumes import READ_WRITE_ONCE_POD
from batchsched.plugins.base import Cycle, FilterPlugin, Rejection
from batchsched.plugins.volumebinding.claims import claims_read
from batchsched.state.cluster import BoolArray, ClusterState
from batchsched.state.volumes import claim_key

RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


class VolumeRestrictions(FilterPlugin):
    name = "VolumeRestrictions"

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        return not pod.volumes

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        return claims_read(pod)

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
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
