"""NodeName (Filter): a pod that names its node in `spec.nodeName` fits only there."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from batchsched.framework.interface import Rejection, StaticFilterPlugin
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState

REASON = "node(s) didn't match the requested node name"


class NodeName(StaticFilterPlugin):
    name = "NodeName"

    def shape(self, pod: Pod) -> Hashable | None:
        return None if pod.node_name else ""

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        if not pod.node_name:
            return []
        other = state.nodes.valid[: state.nodes.rows].copy()
        idx = state.nodes.row_of.get(pod.node_name)
        if idx is not None:
            other[idx] = False
        return [Rejection(REASON, other, resolvable=False)]
