"""The one registry of the object kinds batchsched reads (docs/architecture.md).

Each kind says its name, whether it is namespaced, how a manifest or API object becomes a
record, where the records are kept (`Objects`' field), and where the API server serves it. The
order of `KINDS` is the order in which a full set of objects is applied to the state, so that
pods meet their PriorityClasses, nodes and groups already there. The file loaders, the
`--kubeconfig` reader, the live informers, `schedule`'s state and the simulator all derive their
lists from here: a new kind is one entry here and one way to apply it in `state/`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from batchsched.objects import volume_parse
from batchsched.objects.dra import (
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    read_resource_claim,
    read_resource_claim_template,
    read_resource_slice,
)
from batchsched.objects.parse import (
    read_device_class,
    read_namespace,
    read_node,
    read_pdb,
    read_pod,
    read_pod_group,
    read_priority_class,
)
from batchsched.objects.queues import (
    KAI_QUEUE_API,
    QUEUE_API,
    QUEUE_APIS,
    VOLCANO_QUEUE_API,
    Queue,
    read_batchsched_queue,
    read_kai_queue,
    read_queue,
    read_volcano_queue,
)
from batchsched.objects.records import (
    CRD_API_VERSION,
    UPSTREAM_GROUP,
    DeviceClass,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Workload,
)
from batchsched.objects.volumes import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)
from batchsched.objects.workload_api import (
    VERSIONS,
    is_upstream,
    read_any_pod_group,
    read_upstream_pod_group,
    read_workload,
)

Record = (
    Node
    | Pod
    | PriorityClass
    | PodDisruptionBudget
    | PodGroup
    | Workload
    | DeviceClass
    | Namespace
    | PersistentVolumeClaim
    | PersistentVolume
    | StorageClass
    | CSINode
    | VolumeAttachment
    | CSIDriver
    | CSIStorageCapacity
    | ResourceSlice
    | ResourceClaim
    | ResourceClaimTemplate
    | Queue
)
Reader = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Collection:
    """Where the API server serves a kind's objects (list and watch)."""

    name: str  # the informer's name: the kind's, or another when a kind has two collections
    path: str  # the cluster-wide collection (for a discovered one, at its newest version)
    read: Reader
    optional: bool = False  # a CRD or API group that may not be served
    # (API group, resource, group/versions newest first): the version is found by discovery.
    discover: tuple[str, str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class Kind:
    name: str  # the objects' `kind`
    field: str  # the `Objects` field that keeps them
    namespaced: bool
    read: Reader  # a manifest of this kind -> its record
    api_versions: tuple[str, ...]  # the apiVersions read, as a current cluster serves them
    collections: tuple[Collection, ...] = ()  # none: read from files only
    # Whether a manifest of this kind is this kind's (a `Workload` may be Kueue's, not
    # upstream's): objects it refuses are not read.
    accepts: Callable[[Mapping[str, Any]], bool] = lambda obj: True
    in_state: bool = True  # applied to the cluster state (a Workload only names templates)

    def key(self, record: Any) -> str:
        """`namespace/name` for namespaced kinds, else the name."""
        return str(record.key if self.namespaced else record.name)


def _one(name: str, field: str, namespaced: bool, read: Reader, path: str, **kw: Any) -> Kind:
    """A kind served at one collection, read there as in files (its apiVersion: the path's)."""
    optional = bool(kw.pop("optional", False))
    collection = Collection(name, path, read, optional)
    return Kind(name, field, namespaced, read, (api_version_of(path),), (collection,), **kw)


def api_version_of(path: str) -> str:
    """`v1` of /api/v1/pods, `group/version` of /apis/group/version/resource."""
    parts = path.strip("/").split("/")
    return parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"


_STORAGE = "/apis/storage.k8s.io/v1"
_DRA = "/apis/resource.k8s.io/v1"  # served by default since 1.34; optional for older clusters

KINDS: tuple[Kind, ...] = (
    _one(
        "PriorityClass",
        "priority_classes",
        False,
        read_priority_class,
        "/apis/scheduling.k8s.io/v1/priorityclasses",
    ),
    _one("Node", "nodes", False, read_node, "/api/v1/nodes"),
    _one("Namespace", "namespaces", False, read_namespace, "/api/v1/namespaces"),
    # Before pods: a pod's queue is read from its labels, its group's, its namespace's.
    Kind(
        "Queue",
        "queues",  # batchsched's, Volcano's and KAI's, by apiVersion (docs/queues.md)
        False,
        read_queue,
        QUEUE_APIS,
        (
            Collection("Queue", f"/apis/{QUEUE_API}/queues", read_batchsched_queue, True),
            Collection(
                "VolcanoQueue", f"/apis/{VOLCANO_QUEUE_API}/queues", read_volcano_queue, True
            ),
            Collection("KaiQueue", f"/apis/{KAI_QUEUE_API}/queues", read_kai_queue, True),
        ),
    ),
    _one("PodDisruptionBudget", "pdbs", True, read_pdb, "/apis/policy/v1/poddisruptionbudgets"),
    Kind(
        "PodGroup",
        "pod_groups",  # of either API: upstream's by its apiVersion, else the CRD
        True,
        read_any_pod_group,
        (CRD_API_VERSION, *reversed(VERSIONS)),
        (
            Collection(
                "PodGroup",
                "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
                read_pod_group,
                optional=True,
            ),
            Collection(
                "UpstreamPodGroup",
                f"/apis/{VERSIONS[0]}/podgroups",
                read_upstream_pod_group,
                optional=True,
                discover=(UPSTREAM_GROUP, "podgroups", VERSIONS),
            ),
        ),
    ),
    Kind(
        "Workload",
        "workloads",
        True,
        read_workload,
        tuple(reversed(VERSIONS)),
        accepts=is_upstream,  # not, say, Kueue's Workload
        in_state=False,
    ),
    _one(
        "DeviceClass",
        "device_classes",
        False,
        read_device_class,
        f"{_DRA}/deviceclasses",
        optional=True,
    ),
    _one(
        "ResourceSlice",
        "resource_slices",
        False,
        read_resource_slice,
        f"{_DRA}/resourceslices",
        optional=True,
    ),
    _one(
        "ResourceClaim",
        "resource_claims",
        True,
        read_resource_claim,
        f"{_DRA}/resourceclaims",
        optional=True,
    ),
    _one(
        "ResourceClaimTemplate",
        "claim_templates",
        True,
        read_resource_claim_template,
        f"{_DRA}/resourceclaimtemplates",
        optional=True,
    ),
    _one(
        "StorageClass",
        "storage_classes",
        False,
        volume_parse.read_storage_class,
        f"{_STORAGE}/storageclasses",
    ),
    _one("PersistentVolume", "volumes", False, volume_parse.read_pv, "/api/v1/persistentvolumes"),
    _one(
        "PersistentVolumeClaim",
        "claims",
        True,
        volume_parse.read_pvc,
        "/api/v1/persistentvolumeclaims",
    ),
    _one("CSINode", "csi_nodes", False, volume_parse.read_csi_node, f"{_STORAGE}/csinodes"),
    _one(
        "VolumeAttachment",
        "attachments",
        False,
        volume_parse.read_volume_attachment,
        f"{_STORAGE}/volumeattachments",
    ),
    _one("CSIDriver", "csi_drivers", False, volume_parse.read_csi_driver, f"{_STORAGE}/csidrivers"),
    _one(
        "CSIStorageCapacity",
        "capacities",
        True,
        volume_parse.read_csi_storage_capacity,
        f"{_STORAGE}/csistoragecapacities",
    ),
    _one("Pod", "pods", True, read_pod, "/api/v1/pods"),
)
BY_NAME: dict[str, Kind] = {kind.name: kind for kind in KINDS}
NAMESPACED = frozenset(kind.name for kind in KINDS if kind.namespaced)
