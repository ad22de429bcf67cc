"""NodeUnschedulable (Filter): nodes cordoned with `spec.unschedulable` take no new pods,
unless the pod tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from batchsched.framework.interface import Rejection, StaticFilterPlugin
from batchsched.objects.records import Pod, Taint
from batchsched.state.cluster import ClusterState

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
REASON = "node(s) were unschedulable"


class NodeUnschedulable(StaticFilterPlugin):
    name = "NodeUnschedulable"

    def shape(self, pod: Pod) -> Hashable | None:
        return bool(pod.tolerations) and any(
            t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations
        )

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        if self.shape(pod):
            return []
        cordoned = np.zeros(state.nodes.rows, dtype=np.bool_)
        for idx, node in state.nodes.live():
            if node.unschedulable:
                cordoned[idx] = True
        return [Rejection(REASON, cordoned, resolvable=False)] if cordoned.any() else []
