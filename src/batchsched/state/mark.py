"""ClusterMark: where the cluster stands, as the one versioned view of "what changed since".

Each owner of a part of the state keeps a version that moves when its part changes; a mark is
those versions read at one moment, with the position in the log of changed node rows. A
later mark compared with an earlier one says which owners changed in between (`changes_from`),
and the log says which node rows did (`Nodes.rows_changed_since(mark.rows)`).

Read a mark's versions by name. It is an immutable named tuple rather than a dataclass because
it is made at every scheduling attempt and the queue compares and hashes marks as often: a
tuple's construction, equality and hash are several times cheaper.
"""

from __future__ import annotations

from typing import NamedTuple


class ClusterMark(NamedTuple):
    rows: int  # position in the log of changed node rows (room, pods, allocatable)
    nodes: int  # nodes added or removed, or their labels, taints, cordon or images changed
    policy: int  # PriorityClasses and PodDisruptionBudgets
    generation: int  # anything that may let a waiting pod fit (it moves with most others)
    groups: int  # PodGroups, which pods are their members, and their members' binding
    volumes: int  # PVCs, PVs, StorageClasses, CSINodes
    devices: int  # DRA: ResourceSlices, ResourceClaims, DeviceClasses, devices in use
    namespaces: int  # Namespaces (their labels, which affinity terms select by)

    def changes_from(self, earlier: ClusterMark) -> frozenset[str]:
        """The names of the versions that moved since `earlier` (`rows` aside: the log of
        changed rows tells which rows moved)."""
        return frozenset(
            name
            for name in VERSIONS
            if getattr(self, name) != getattr(earlier, name)  # a handful of ints
        )


# The fields that are versions of an owner (all but the log position).
VERSIONS = tuple(name for name in ClusterMark._fields if name != "rows")
