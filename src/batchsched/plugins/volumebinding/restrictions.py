"""VolumeRestrictions (Filter): a ReadWriteOncePod claim serves one pod at a time.

While another pod on a node uses such a claim, the pod fits no node. Upstream lets preemption
try to free the claim; batchsched's preemption does not yet account for claims, so the
rejection is unresolvable here (no pod is evicted in vain; docs/volumes.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

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
        for volume in pod.volumes:
            key = claim_key(pod, volume.claim)
            claim = volumes.claims.get(key)
            if claim is None or READ_WRITE_ONCE_POD not in claim.access_modes:
                continue
            if volumes.users.get(key, set()) - {pod.key}:
                return [Rejection(RWOP_CONFLICT, candidates, resolvable=False)]
        return []
