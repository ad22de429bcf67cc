"""Storage capacity for dynamic provisioning, as upstream's binder checks it.

A claim is provisioned on a node only if its class's provisioner is a CSIDriver with
`storageCapacity: true` and a CSIStorageCapacity of that class, whose `nodeTopology` matches
the node's labels, can hold it (`maximumVolumeSize`, else `capacity`, at least the claim's
request). Drivers without a CSIDriver object, or that do not publish capacity, are not
checked; neither are claims without a storage request. The nodes each capacity object
reaches are kept until nodes or capacities change.
"""

from __future__ import annotations

import numpy as np

from batchsched.objects.volumes import CSIStorageCapacity, StorageClass
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray


class CapacityIndex:
    def __init__(self) -> None:
        self._at: tuple[int, int, int] | None = None
        self._reach: dict[str, BoolArray] = {}  # capacity key -> node rows with access

    def room(
        self, state: ClusterState, storage_class: StorageClass, request: int
    ) -> BoolArray | None:
        """The nodes where a volume of `request` bytes of the class has room; None when the
        class's driver does not publish its capacity (no check)."""
        sizes = self.sizes(state, storage_class, request)
        return None if sizes is None else sizes >= 0

    def sizes(
        self, state: ClusterState, storage_class: StorageClass, request: int
    ) -> IntArray | None:
        """Per node, the `capacity` of the first CSIStorageCapacity (by namespace/name) of
        the class that reaches it with room for `request` bytes (0 if it gives none; -1
        where none has room); None when the class's driver does not publish its capacity.
        Upstream takes the first in its informer's order; the name order keeps ours
        deterministic."""
        volumes = state.volumes
        driver = volumes.csi_drivers.get(storage_class.provisioner)
        if request <= 0 or driver is None or not driver.storage_capacity:
            return None
        at = (volumes.capacity_version, state.nodes.generation, state.nodes.rows)
        if at != self._at:
            self._reach.clear()
            self._at = at
        sizes = np.full(state.nodes.rows, -1, dtype=np.int64)
        for key in sorted(volumes.capacities):
            capacity = volumes.capacities[key]
            if capacity.storage_class != storage_class.name:
                continue
            if capacity.limit is not None and capacity.limit >= request:
                first = self._reach_of(state, capacity) & (sizes < 0)
                sizes[first] = capacity.capacity or 0
        return sizes

    def _reach_of(self, state: ClusterState, capacity: CSIStorageCapacity) -> BoolArray:
        reach = self._reach.get(capacity.key)
        if reach is None:
            reach = np.zeros(state.nodes.rows, dtype=np.bool_)
            topology = capacity.node_topology
            if topology is not None:  # without one, no node has access (as upstream)
                for row, node in state.nodes.live():
                    reach[row] = topology.matches(node.labels)
            self._reach[capacity.key] = reach
        return reach
