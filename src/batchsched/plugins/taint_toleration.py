"""TaintToleration (Filter): every NoSchedule and NoExecute taint of a node must be tolerated.

A node that fails reports its first untolerated taint, as kube-scheduler does.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from batchsched.objects.records import Pod, Taint, Toleration
from batchsched.plugins.base import Rejection, StaticFilterPlugin
from batchsched.state.cluster import ClusterState

_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect not in _FILTERED_EFFECTS:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


class TaintToleration(StaticFilterPlugin):
    name = "TaintToleration"

    def shape(self, pod: Pod) -> Hashable | None:
        return pod.tolerations

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        by_reason: dict[str, list[int]] = {}
        for idx, node in state.live_nodes():
            if not node.taints:
                continue
            taint = first_untolerated(node.taints, pod.tolerations)
            if taint is not None:
                by_reason.setdefault(
                    f"node(s) had untolerated taint {taint.describe()}", []
                ).append(idx)
        rejections = []
        for reason, rows in by_reason.items():
            mask = np.zeros(state.rows, dtype=np.bool_)
            mask[np.asarray(rows, dtype=np.intp)] = True
            rejections.append(Rejection(reason, mask, resolvable=False))
        return rejections
