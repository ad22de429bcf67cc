"""The storage objects ClusterState holds, which running pods use which claims, and which
volumes are attached where (by the pods there and by VolumeAttachments).

The volume plugins (plugins/volumebinding/) read these. The claim and attachment indexes
follow the pods ClusterState binds and unbinds; a pod's attachments are taken as they are when
it lands on its node (a bound volume's driver and handle do not change).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from batchsched.objects.csi_migration import provisioner_driver
from batchsched.objects.records import Pod
from batchsched.objects.volumes import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    InlineDisk,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)

VolumeObject = (
    PersistentVolumeClaim
    | PersistentVolume
    | StorageClass
    | CSINode
    | VolumeAttachment
    | CSIDriver
    | CSIStorageCapacity
)
CountArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ClaimBinding:
    """A claim the scheduler bound to a volume (or, `volume` empty, asked to provision on
    `node`) for the pod it placed."""

    pod: str
    claim: str
    node: str
    volume: str


def claim_key(pod: Pod, claim: str) -> str:
    return f"{pod.namespace}/{claim}"


class VolumeObjects:
    def __init__(self, node_index: Mapping[str, int] | None = None) -> None:
        self._node_index: Mapping[str, int] = {} if node_index is None else node_index
        self.claims: dict[str, PersistentVolumeClaim] = {}  # "namespace/name"
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.csi_nodes: dict[str, CSINode] = {}
        self.csi_version = 0  # moves when a CSINode changes (attach limits are cached on it)
        self.csi_drivers: dict[str, CSIDriver] = {}
        self.capacities: dict[str, CSIStorageCapacity] = {}  # "namespace/name"
        self.capacity_version = 0  # moves when a CSIStorageCapacity changes
        # Claim key -> keys of the pods on a node that use it (any phase but terminated).
        self.users: dict[str, set[str]] = {}
        # Inline disk (InlineDisk.key) -> pods on a node mounting it, with the node row.
        self.disk_users: dict[tuple[str, ...], dict[str, tuple[int, InlineDisk]]] = {}
        # Attachable volume (`driver/handle`) -> node row -> pods there using it.
        self.volume_rows: dict[str, dict[int, int]] = {}
        # CSI driver -> distinct volumes attached per node row (grown on demand).
        self.attach_counts: dict[str, CountArray] = {}
        self._attachments: dict[str, dict[str, str]] = {}  # pod key -> what it attached
        self._rows: dict[str, int] = {}  # pod key -> the node row it attached them on
        # VolumeAttachments, by name and by the PV and node they name (counted once both
        # are known), and what each counts (`driver/handle`, driver, node row).
        self.volume_attachments: dict[str, VolumeAttachment] = {}
        self._va_by_pv: dict[str, set[str]] = {}
        self._va_by_node: dict[str, set[str]] = {}
        self._va_counted: dict[str, tuple[str, str, int]] = {}
        # Bindings assumed for pods whose PreBind the world has not finished (upstream's
        # assume cache): the claims and PVs as last reported, which the assumption covers
        # until a report shows it carried out, or the pod's bind fails (`revert`).
        self._assumed: dict[str, list[ClaimBinding]] = {}
        self._reported_claims: dict[str, PersistentVolumeClaim] = {}
        self._reported_volumes: dict[str, PersistentVolume] = {}

    def upsert(self, obj: VolumeObject) -> None:
        if isinstance(obj, PersistentVolumeClaim):
            if obj.key in self._reported_claims:
                self._reported_claims[obj.key] = obj
                assumed = self.claims[obj.key]
                if not obj.bound and not obj.selected_node:  # our write not seen yet
                    obj = replace(
                        obj,
                        volume_name=assumed.volume_name,
                        bind_completed=assumed.bind_completed,
                        phase=assumed.phase,
                        selected_node=assumed.selected_node,
                    )
            self.claims[obj.key] = obj
        elif isinstance(obj, PersistentVolume):
            if obj.name in self._reported_volumes:
                self._reported_volumes[obj.name] = obj
                if not obj.claim_ref:  # our claimRef not seen yet
                    assumed_pv = self.volumes[obj.name]
                    obj = replace(obj, claim_ref=assumed_pv.claim_ref, phase=assumed_pv.phase)
            self.volumes[obj.name] = obj
            self._recount(self._va_by_pv.get(obj.name, ()))
        elif isinstance(obj, VolumeAttachment):
            self._unindex(obj.name)
            self.volume_attachments[obj.name] = obj
            self._va_by_pv.setdefault(obj.pv_name, set()).add(obj.name)
            self._va_by_node.setdefault(obj.node_name, set()).add(obj.name)
            self._recount((obj.name,))
        elif isinstance(obj, StorageClass):
            self.classes[obj.name] = obj
        elif isinstance(obj, CSIDriver):
            self.csi_drivers[obj.name] = obj
        elif isinstance(obj, CSIStorageCapacity):
            self.capacities[obj.key] = obj
            self.capacity_version += 1
        else:
            self.csi_nodes[obj.name] = obj
            self.csi_version += 1

    def remove(self, kind: str, key: str) -> None:
        if kind == "PersistentVolumeClaim":
            self.claims.pop(key, None)
            self._reported_claims.pop(key, None)
        elif kind == "PersistentVolume":
            self.volumes.pop(key, None)
            self._reported_volumes.pop(key, None)
            self._recount(self._va_by_pv.get(key, ()))
        elif kind == "VolumeAttachment":
            self._unindex(key)
            self._recount((key,))
        elif kind == "StorageClass":
            self.classes.pop(key, None)
        elif kind == "CSIDriver":
            self.csi_drivers.pop(key, None)
        elif kind == "CSIStorageCapacity":
            self.capacities.pop(key, None)
            self.capacity_version += 1
        else:
            self.csi_nodes.pop(key, None)
            self.csi_version += 1

    def node_changed(self, name: str) -> None:
        """A node came or went: the VolumeAttachments naming it count on its row, or not."""
        self._recount(self._va_by_node.get(name, ()))

    def _unindex(self, name: str) -> None:
        old = self.volume_attachments.pop(name, None)
        if old is not None:
            self._va_by_pv[old.pv_name].discard(name)
            self._va_by_node[old.node_name].discard(name)

    def _recount(self, names: Collection[str]) -> None:
        """Count each VolumeAttachment as upstream's NodeVolumeLimits does: one naming a
        CSI PersistentVolume holds `attacher/volumeHandle` on its node, shared with the pods
        there using that volume (an inline volume's, or an in-tree PV's, is not counted)."""
        for name in list(names):
            counted = self._va_counted.pop(name, None)
            if counted is not None:
                self._attach(*counted, -1)
            va = self.volume_attachments.get(name)
            pv = self.volumes.get(va.pv_name) if va is not None and va.pv_name else None
            row = self._node_index.get(va.node_name) if va is not None else None
            if va is None or pv is None or row is None or pv.migrated_plugin:
                continue
            counted = (f"{va.attacher}/{pv.csi_handle}", va.attacher, row)
            self._va_counted[name] = counted
            self._attach(*counted, 1)

    def bind(self, pod: str, claim: PersistentVolumeClaim, volume: str, node: str) -> ClaimBinding:
        """Assume the claim bound to the volume, or marked for provisioning on the node, as
        PreBind and the PV controller will make it; later pods see the claim bound (or its
        node chosen) until `confirm` or `revert`."""
        self._reported_claims.setdefault(claim.key, claim)
        if volume:
            pv = self.volumes[volume]
            self._reported_volumes.setdefault(volume, pv)
            self.volumes[volume] = replace(pv, claim_ref=claim.key, phase="Bound")
            self.claims[claim.key] = replace(
                claim, volume_name=volume, bind_completed=True, phase="Bound"
            )
        else:
            self.claims[claim.key] = replace(claim, selected_node=node)
        binding = ClaimBinding(pod, claim.key, node, volume)
        self._assumed.setdefault(pod, []).append(binding)
        return binding

    def assumed(self) -> list[ClaimBinding]:
        """The bindings assumed for pods whose bind is not confirmed yet."""
        return [binding for bindings in self._assumed.values() for binding in bindings]

    def confirm(self, pod: str) -> None:
        """The pod's PreBind and Binding are done: the reports take over from the assumption
        (the PV controller's writes may still be on their way, as for upstream's cache)."""
        for binding in self._assumed.pop(pod, []):
            self._reported_claims.pop(binding.claim, None)
            self._reported_volumes.pop(binding.volume, None)

    def revert(self, pod: str) -> None:
        """The pod's bind failed: the claims and PVs are as last reported again."""
        for binding in self._assumed.pop(pod, []):
            claim = self._reported_claims.pop(binding.claim, None)
            if claim is not None:
                self.claims[binding.claim] = claim
            volume = self._reported_volumes.pop(binding.volume, None)
            if volume is not None:
                self.volumes[binding.volume] = volume

    def attachments(self, pod: Pod) -> dict[str, str]:
        """The pod's attachable volumes, `driver/handle` -> driver, as NodeVolumeLimits counts
        them: a bound claim as its PV's CSI driver and handle (an in-tree PV's as it
        translates), an unbound one as its class's provisioner (or the CSI driver an in-tree
        one migrated to) and the claim (a volume to be provisioned), an inline migrated disk
        as it translates (one that does not, under its own ID: never less than a volume)."""
        out: dict[str, str] = {
            f"{disk.driver}/{disk.handle}": disk.driver for disk in pod.disks if disk.driver
        }
        for volume in pod.volumes:
            claim = self.claims.get(claim_key(pod, volume.claim))
            if claim is None:
                continue
            pv = self.volumes.get(claim.volume_name) if claim.volume_name else None
            storage_class = self.classes.get(claim.storage_class)
            if pv is not None:
                driver, handle = pv.csi_driver, pv.csi_handle
            elif storage_class is not None:  # to be provisioned, or its PV is not seen yet
                driver = provisioner_driver(storage_class.provisioner)
                handle = f"{claim.namespace}-{claim.name}"
            else:
                continue
            if driver and handle:
                out[f"{driver}/{handle}"] = driver
        return out

    def freed_by(self, row: int, removed: Collection[str]) -> dict[str, str]:
        """The attachable volumes (`driver/handle` -> driver) no longer attached on node
        `row` once the pods keyed in `removed` are gone."""
        left: dict[str, int] = {}
        drivers: dict[str, str] = {}
        for key in removed:
            if self._rows.get(key) != row:
                continue
            for name, driver in self._attachments.get(key, {}).items():
                left[name] = left.get(name, self.volume_rows[name][row]) - 1
                drivers[name] = driver
        return {name: drivers[name] for name, count in left.items() if count <= 0}

    def place(self, pod: Pod, row: int) -> None:
        """A pod with claim volumes is now on node `row`."""
        for volume in pod.volumes:
            self.users.setdefault(claim_key(pod, volume.claim), set()).add(pod.key)
        for disk in pod.disks:
            self.disk_users.setdefault(disk.key, {})[pod.key] = (row, disk)
        attached = self.attachments(pod)
        self._attachments[pod.key] = attached
        self._rows[pod.key] = row
        for name, driver in attached.items():
            self._attach(name, driver, row, 1)

    def unplace(self, pod: Pod, row: int) -> None:
        for volume in pod.volumes:
            key = claim_key(pod, volume.claim)
            users = self.users.get(key)
            if users is not None:
                users.discard(pod.key)
                if not users:
                    del self.users[key]
        for disk in pod.disks:
            mounted = self.disk_users.get(disk.key)
            if mounted is not None:
                mounted.pop(pod.key, None)
                if not mounted:
                    del self.disk_users[disk.key]
        self._rows.pop(pod.key, None)
        for name, driver in self._attachments.pop(pod.key, {}).items():
            self._attach(name, driver, row, -1)

    def _attach(self, name: str, driver: str, row: int, step: int) -> None:
        """One more (or one fewer) user of the volume on node `row`: a pod or a
        VolumeAttachment. The node's count for the driver moves with the first and last."""
        rows = self.volume_rows.setdefault(name, {})
        users = rows.get(row, 0) + step
        if users:
            rows[row] = users
        else:
            del rows[row]
            if not rows:
                del self.volume_rows[name]
        if users == (1 if step > 0 else 0):
            self._count(driver, row, step)

    def _count(self, driver: str, row: int, step: int) -> None:
        counts = self.attach_counts.get(driver)
        if counts is None or counts.shape[0] <= row:
            size = 0 if counts is None else counts.shape[0]
            grown = np.zeros(max(row + 1, 2 * size, 64), dtype=np.int64)
            if counts is not None:
                grown[:size] = counts
            self.attach_counts[driver] = counts = grown
        counts[row] += step
