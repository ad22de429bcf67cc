"""Topology domains as arrays: for a label key, each node row's domain index (-1 without it).

Rebuilt per key when node labels or membership change (ClusterState.node_generation), so an
attempt maps rows to domains with one array lookup. Shared by PodTopologySpread and
InterPodAffinity.
"""

from __future__ import annotations

import numpy as np

from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


class TopologyDomains:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._generation = -1
        self._rows = -1
        self._keys: dict[str, tuple[IntArray, list[str]]] = {}

    def _fresh(self) -> None:
        state = self.state
        if self._generation != state.nodes.generation or self._rows != state.nodes.rows:
            self._keys.clear()
            self._generation = state.nodes.generation
            self._rows = state.nodes.rows

    def of(self, key: str) -> tuple[IntArray, list[str]]:
        """Each row's domain index for `key`, and the domain values by index."""
        self._fresh()
        found = self._keys.get(key)
        if found is None:
            index: dict[str, int] = {}
            dom = np.full(self.state.nodes.rows, -1, dtype=np.int64)
            for row, node in self.state.nodes.live():
                value = node.labels.get(key)
                if value is not None:
                    dom[row] = index.setdefault(value, len(index))
            found = self._keys[key] = (dom, list(index))
        return found

    def having(self, keys: tuple[str, ...]) -> BoolArray:
        """Rows of live nodes carrying every one of `keys`."""
        mask = self.state.nodes.valid[: self.state.nodes.rows].copy()
        for key in keys:
            mask &= self.of(key)[0] >= 0
        return mask
