"""Records for the storage objects the volume plugins read (PVCs, PVs, StorageClasses,
CSINodes, VolumeAttachments, CSIDrivers, CSIStorageCapacities) and for a pod's volumes.

Only what VolumeBinding, VolumeZone, VolumeRestrictions and NodeVolumeLimits read is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from batchsched.objects.records import LabelSelector, NodeSelectorTerm

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
# Set by the PV controller when it has bound a claim: before that, a claim that names a
# volume is only pre-bound, and kube-scheduler treats it as an unbound Immediate claim.
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
# kube-controller-manager's mark for classes whose volumes are made by hand (local PVs).
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@dataclass(frozen=True, slots=True)
class PodVolume:
    """One entry of a pod's spec.volumes that names a PersistentVolumeClaim."""

    name: str
    claim: str  # the claim's name; for a generic ephemeral volume, `<pod>-<volume>`
    ephemeral: bool


# The inline disks VolumeRestrictions keeps apart on a node, as upstream.
RESTRICTED_DISKS = frozenset({"iscsi", "rbd", "gcePersistentDisk", "awsElasticBlockStore"})


@dataclass(frozen=True, slots=True)
class InlineDisk:
    """A disk a pod mounts directly (spec.volumes[*].<kind>): iSCSI, RBD, or a CSI-migrated
    in-tree disk (objects/csi_migration.py). One disk is `kind` and `ident` (iSCSI: the IQN;
    RBD: the pool and image, with any shared Ceph monitor; GCE PD: the pdName; the others:
    their volume ID or disk URI)."""

    kind: str
    ident: tuple[str, ...]
    read_only: bool
    monitors: frozenset[str] = frozenset()
    # For a migrated disk NodeVolumeLimits counts: its CSI driver and volume handle. When the
    # handle cannot be derived, `untranslatable` says why and `handle` is the disk's own ID.
    driver: str = ""
    handle: str = ""
    untranslatable: str = ""

    @property
    def key(self) -> tuple[str, ...]:
        return (self.kind, *self.ident)

    def conflicts(self, other: InlineDisk) -> bool:
        """Both mount it and one writes (RBD: on a shared monitor), as upstream; an EBS
        volume conflicts even read-only."""
        if self.key != other.key or self.kind not in RESTRICTED_DISKS:
            return False
        if self.kind == "awsElasticBlockStore":
            return True
        if self.read_only and other.read_only:
            return False
        return self.kind != "rbd" or bool(self.monitors & other.monitors)


@dataclass(slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str = ""  # spec.volumeName: the PV it is (or is to be) bound to
    # The beta annotation, else spec.storageClassName; "" for none (the scheduler does not
    # apply the default class: admission or the PV controller writes it into the claim).
    storage_class: str = ""
    bind_completed: bool = False
    phase: str = "Pending"  # Lost: its volume is gone
    deletion_timestamp: datetime | None = None
    owner_uids: tuple[str, ...] = ()  # controller owners (an ephemeral claim's pod)
    access_modes: tuple[str, ...] = ()
    request: int = 0  # spec.resources.requests.storage, bytes
    selector: LabelSelector | None = None
    volume_mode: str = "Filesystem"
    # spec.volumeAttributesClassName; "" when unset or empty (upstream's matching treats
    # both as "no class").
    attributes_class: str = ""
    # volume.kubernetes.io/selected-node: where the scheduler asked for it to be provisioned.
    selected_node: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        return bool(self.volume_name) and self.bind_completed


@dataclass(slots=True)
class PersistentVolume:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    node_affinity: tuple[NodeSelectorTerm, ...] = ()  # empty: every node
    # spec.csi's driver and volumeHandle, or what a CSI-migrated in-tree source translates
    # to (objects/csi_migration.py; empty when NodeVolumeLimits does not count it).
    csi_driver: str = ""
    csi_handle: str = ""
    # For a CSI-migrated source: its in-tree plugin's name, the node affinity it takes on
    # where that plugin is migrated (VolumeBinding), and why it cannot be translated, if so.
    migrated_plugin: str = ""
    migrated_affinity: tuple[NodeSelectorTerm, ...] = ()
    untranslatable: str = ""
    capacity: int = 0  # spec.capacity.storage, bytes
    access_modes: tuple[str, ...] = ()
    storage_class: str = ""
    volume_mode: str = "Filesystem"
    attributes_class: str = ""  # spec.volumeAttributesClassName, "" when unset
    claim_ref: str = ""  # "namespace/name" of the claim it is bound or pre-bound to
    # status.phase; a PV written by hand without status is taken as Available.
    phase: str = "Available"
    deleting: bool = False


@dataclass(slots=True)
class StorageClass:
    name: str
    provisioner: str
    volume_binding_mode: str = "Immediate"
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()  # empty: every node


@dataclass(slots=True)
class CSINode:
    name: str
    # The in-tree plugins the node's kubelet serves through CSI (the annotation
    # storage.alpha.kubernetes.io/migrated-plugins).
    migrated_plugins: frozenset[str] = frozenset()
    # Attach limits per driver: spec.drivers[].allocatable.count, where given.
    limits: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class VolumeAttachment:
    """A volume the attach/detach controller attached (or is attaching or detaching) to a
    node; NodeVolumeLimits counts it until the object is gone, as upstream."""

    name: str
    attacher: str  # the CSI driver
    node_name: str
    pv_name: str  # spec.source.persistentVolumeName; "" for an inline volume's attachment


@dataclass(slots=True)
class CSIDriver:
    name: str
    # spec.storageCapacity: provisioning for this driver needs a CSIStorageCapacity with room.
    storage_capacity: bool = False


@dataclass(slots=True)
class CSIStorageCapacity:
    namespace: str
    name: str
    storage_class: str
    node_topology: LabelSelector | None  # None: no node has access to this capacity
    # The largest volume it can make, bytes: maximumVolumeSize if given, else capacity;
    # None when neither is (no room known).
    limit: int | None
    # `capacity` alone, bytes (None if not given): what VolumeBinding's Score weighs a
    # provisioned claim against.
    capacity: int | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
