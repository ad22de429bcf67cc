"""PodTopology (Filter, Score): a pod's own topology annotations
(docs/topology.md#a-single-pod).

Name: PodTopology. Extension points: Filter (static), Score (static).

One pod always lands in one domain of any key, so what it can ask is to land in a domain at
all: `batchsched.io/topology-required: <key>` keeps it off the nodes without the label
(unresolvably: preemption does not look there); `batchsched.io/topology-preferred:
<key>[,<broader key>...]` is a score, as preferred node affinity is: a node scores by the
narrowest listed key it carries (the first key scores most, each broader one less, a node
with none 0), normalised so the best feasible node scores 100. A PodGroup's annotations are
the group's (coscheduling places the group by them); a member's own apply to that member.
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
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray


def missing_label(key: str) -> str:
    return f"node(s) didn't have the pod's required topology label {key}"


class PodTopology(StaticFilterPlugin, StaticScorePlugin):
    name = "PodTopology"

    def shape(self, pod: Pod) -> Hashable | None:
        return pod.topology.required

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        key = pod.topology.required
        if not key:
            return []
        labelled = np.zeros(state.nodes.rows, dtype=np.bool_)
        labelled[state.nodes.domains(key).flat] = True
        rejected = state.nodes.valid[: state.nodes.rows] & ~labelled
        return [Rejection(missing_label(key), rejected, resolvable=False)] if rejected.any() else []

    def score_shape(self, pod: Pod) -> Hashable | None:
        return pod.topology.preferred or None

    def raw_scores(self, state: ClusterState, pod: Pod) -> IntArray | None:
        keys = pod.topology.preferred
        raw = np.zeros(state.nodes.rows, dtype=np.int64)
        # Broadest first, so that a node's narrowest key is written last.
        for rank, key in reversed(list(enumerate(keys))):
            raw[state.nodes.domains(key).flat] = len(keys) - rank
        return raw if raw.any() else None

    def normalize(self, raw: IntArray, feasible: BoolArray) -> IntArray:
        return normalize_by_max(raw, feasible)
