"""TaintToleration (Filter, Score): taints a pod does not tolerate keep it off or away.

Name: TaintToleration. Extension points: Filter (static), Score (static).

Filter: every NoSchedule and NoExecute taint of a node must be tolerated; a node that fails
reports its first untolerated taint, as kube-scheduler does. Score: the fewer PreferNoSchedule
taints a node has that the pod does not tolerate, the better: counts normalised against the
feasible node with the most (it scores 0, nodes with none 100).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from batchsched.framework.interface import (
    Rejection,
    StaticFilterPlugin,
    StaticScorePlugin,
    normalize_by_max,
)
from batchsched.objects.records import Pod, Taint, Toleration
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect not in _FILTERED_EFFECTS:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


class TaintToleration(StaticFilterPlugin, StaticScorePlugin):
    name = "TaintToleration"

    def score_shape(self, pod: Pod) -> Hashable | None:
        if not pod.tolerations:
            return ()  # (asked per pod placed: most tolerate nothing)
        return tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))

    def raw_scores(self, state: ClusterState, pod: Pod) -> IntArray | None:
        tolerations = self.score_shape(pod)
        assert isinstance(tolerations, tuple)
        raw = np.zeros(state.nodes.rows, dtype=np.int64)
        for idx, node in state.nodes.live():
            raw[idx] = sum(
                taint.effect == "PreferNoSchedule"
                and not any(t.tolerates(taint) for t in tolerations)
                for taint in node.taints
            )
        return raw if raw.any() else None

    def normalize(self, raw: IntArray, feasible: BoolArray) -> IntArray:
        return normalize_by_max(raw, feasible, reverse=True)

    def shape(self, pod: Pod) -> Hashable | None:
        return pod.tolerations

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        by_reason: dict[str, list[int]] = {}
        for idx, node in state.nodes.live():
            if not node.taints:
                continue
            taint = first_untolerated(node.taints, pod.tolerations)
            if taint is not None:
                by_reason.setdefault(
                    f"node(s) had untolerated taint {taint.describe()}", []
                ).append(idx)
        rejections = []
        for reason, rows in by_reason.items():
            mask = np.zeros(state.nodes.rows, dtype=np.bool_)
            mask[np.asarray(rows, dtype=np.intp)] = True
            rejections.append(Rejection(reason, mask, resolvable=False))
        return rejections
