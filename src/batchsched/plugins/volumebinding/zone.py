"""VolumeZone (Filter): a bound PersistentVolume's zone and region labels must match the node.

A PV labelled `topology.kubernetes.io/zone` (or region, or their `failure-domain.beta`
forms; several values joined by `__`) fits only nodes carrying one of those values under the
GA or beta key. A node with no zone or region label at all is not constrained, as upstream.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from batchsched.framework.interface import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    QueueingHint,
    Rejection,
)
from batchsched.objects.records import Pod
from batchsched.plugins.volumebinding.claims import claims_read, pod_claims, volume_events
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray

REASON = "node(s) had no available volume zone"

_ZONE = "topology.kubernetes.io/zone"
_REGION = "topology.kubernetes.io/region"
_BETA = {
    "failure-domain.beta.kubernetes.io/zone": _ZONE,
    "failure-domain.beta.kubernetes.io/region": _REGION,
}
TOPOLOGY_LABELS = (*_BETA, _ZONE, _REGION)


class VolumeZone(FilterPlugin):
    name = "VolumeZone"

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        return not pod.volumes

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return volume_events()

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        return claims_read(pod)

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        wanted: list[tuple[str, frozenset[str]]] = []
        for _, volume in pod_claims(cycle).bound:
            if volume is None:
                continue
            for key in TOPOLOGY_LABELS:
                value = volume.labels.get(key)
                if value is not None:
                    wanted.append((key, frozenset(value.split("__"))))
        if not wanted:
            return []
        state = cycle.state
        rejected = np.zeros(candidates.shape[0], dtype=np.bool_)
        for row in np.flatnonzero(candidates):
            node = state.nodes.by_row[row]
            assert node is not None
            labels = node.labels
            if not any(key in labels for key in TOPOLOGY_LABELS):
                continue
            for key, values in wanted:
                value = labels.get(key)
                if value is None:
                    value = labels.get(_BETA.get(key, key))
                if value is None or value not in values:
                    rejected[row] = True
                    break
        return [Rejection(REASON, rejected, resolvable=False)]
