"""ImageLocality (Score): favour nodes that already hold the pod's container images.

Name: ImageLocality. Extension points: Score (static).

As kube-scheduler: each image of the pod (init containers and containers, a missing tag read
as `latest`) that a node lists in `status.images` adds its size scaled by the share of nodes
that hold it (so an image everywhere does not pull every pod to one node); the sum is clamped
to 23 MiB .. 1000 MiB per container and mapped onto 0..100. Pods without images, or whose
images no node holds, are not scored.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from batchsched.framework.interface import MAX_NODE_SCORE, StaticScorePlugin
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

MIB = 2**20
MIN_THRESHOLD = 23 * MIB
MAX_CONTAINER_THRESHOLD = 1000 * MIB


class ImageLocality(StaticScorePlugin):
    name = "ImageLocality"

    def __init__(self) -> None:
        self._holders: dict[str, int] = {}  # image name -> nodes listing it
        self._generation = -1

    def score_shape(self, pod: Pod) -> Hashable | None:
        return pod.images or None

    def _nodes_holding(self, state: ClusterState) -> dict[str, int]:
        if self._generation != state.nodes.generation:
            holders: dict[str, int] = {}
            for _, node in state.nodes.live():
                for name in node.images:
                    holders[name] = holders.get(name, 0) + 1
            self._holders = holders
            self._generation = state.nodes.generation
        return self._holders

    def raw_scores(self, state: ClusterState, pod: Pod) -> IntArray | None:
        holders = self._nodes_holding(state)
        if not any(image in holders for image in pod.images):
            return None
        total = np.zeros(state.nodes.rows, dtype=np.int64)
        for idx, node in state.nodes.live():
            total[idx] = sum(
                int(node.images[image] * (holders[image] / state.nodes.count))
                for image in pod.images
                if image in node.images
            )
        highest = MAX_CONTAINER_THRESHOLD * len(pod.images)
        clamped = np.clip(total, MIN_THRESHOLD, highest)
        scores = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (highest - MIN_THRESHOLD)
        return scores if scores.any() else None

    def normalize(self, raw: IntArray, feasible: BoolArray) -> IntArray:
        return raw  # already 0..100, as upstream (no NormalizeScore)
