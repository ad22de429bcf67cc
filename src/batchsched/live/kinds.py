"""The API resources batchsched watches, and how their JSON becomes records and state facts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import orjson

from batchsched.live.client import ApiError, KubeClient
from batchsched.objects import volume_parse
from batchsched.objects.dra import (
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
from batchsched.objects.records import (
    UPSTREAM_GROUP,
    DeviceClass,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
)
from batchsched.objects.workload_api import VERSIONS, read_upstream_pod_group
from batchsched.state.cluster import ClusterState
from batchsched.state.devices import DraObject
from batchsched.state.volumes import VolumeObject

Record = (
    Node
    | Pod
    | PriorityClass
    | PodDisruptionBudget
    | PodGroup
    | DeviceClass
    | Namespace
    | VolumeObject
    | DraObject
)


@dataclass(frozen=True)
class Kind:
    name: str
    path: str  # the cluster-wide collection
    namespaced: bool
    read: Callable[[Mapping[str, Any]], Record]
    upsert: Callable[[ClusterState, Any], None]
    remove: Callable[[ClusterState, str], None]
    optional: bool = False  # a CRD that may not be installed
    manifest_kind: str = ""  # the objects' `kind`, when `name` differs from it
    # (API group, resource, group/versions newest first): the path is found by discovery.
    discover: tuple[str, str, tuple[str, ...]] | None = None
    api_version: str = ""  # the discovered group/version

    def served(self, client: KubeClient) -> Kind:
        """This kind at the version the API server serves (itself if not discovered).

        Raises ApiError 404 when no known version is served, as a missing CRD does.
        """
        if self.discover is None:
            return self
        group, resource, versions = self.discover
        found = served_version(client, group, resource, versions)
        return replace(self, path=f"/apis/{found}/{resource}", api_version=found)

    def read_object(self, obj: Mapping[str, Any]) -> Record:
        """The record of one object; list items carry no apiVersion, so the served one is
        added for readers that depend on it."""
        if self.api_version and not obj.get("apiVersion"):
            obj = {**obj, "apiVersion": self.api_version}
        return self.read(obj)

    def key_of(self, obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        return f"{meta.get('namespace') or 'default'}/{name}" if self.namespaced else name


def _remove_volume_object(kind: str, state: ClusterState, key: str) -> None:
    state.remove_volume_object(kind, key)


def _remove_dra_object(kind: str, state: ClusterState, key: str) -> None:
    state.remove_dra_object(kind, key)


# Applied in this order when a full list arrives, so pods find their priority classes,
# nodes and groups already there.
KINDS: tuple[Kind, ...] = (
    Kind(
        "PriorityClass",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        False,
        read_priority_class,
        ClusterState.upsert_priority_class,
        ClusterState.remove_priority_class,
    ),
    Kind(
        "Node",
        "/api/v1/nodes",
        False,
        read_node,
        ClusterState.upsert_node,
        ClusterState.remove_node,
    ),
    Kind(
        "Namespace",
        "/api/v1/namespaces",
        False,
        read_namespace,
        ClusterState.upsert_namespace,
        ClusterState.remove_namespace,
    ),
    Kind(
        "PodDisruptionBudget",
        "/apis/policy/v1/poddisruptionbudgets",
        True,
        read_pdb,
        ClusterState.upsert_pdb,
        ClusterState.remove_pdb,
    ),
    Kind(
        "PodGroup",
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
        True,
        read_pod_group,
        ClusterState.upsert_pod_group,
        lambda state, key: _remove_group(state, key, upstream=False),
        optional=True,
    ),
    # DRA (resource.k8s.io/v1, served by default since Kubernetes 1.34; optional for older
    # clusters): classes, the drivers' slices, claims and the templates pods name.
    Kind(
        "DeviceClass",
        "/apis/resource.k8s.io/v1/deviceclasses",
        False,
        read_device_class,
        ClusterState.upsert_device_class,
        ClusterState.remove_device_class,
        optional=True,
    ),
    *(
        Kind(
            name,
            f"/apis/resource.k8s.io/v1/{plural}",
            name != "ResourceSlice",
            read,
            ClusterState.upsert_dra_object,
            partial(_remove_dra_object, name),
            optional=True,
        )
        for name, plural, read in (
            ("ResourceSlice", "resourceslices", read_resource_slice),
            ("ResourceClaim", "resourceclaims", read_resource_claim),
            ("ResourceClaimTemplate", "resourceclaimtemplates", read_resource_claim_template),
        )
    ),
    Kind(
        "UpstreamPodGroup",
        f"/apis/{VERSIONS[0]}/podgroups",
        True,
        read_upstream_pod_group,
        ClusterState.upsert_pod_group,
        lambda state, key: _remove_group(state, key, upstream=True),
        optional=True,
        manifest_kind="PodGroup",
        discover=(UPSTREAM_GROUP, "podgroups", VERSIONS),
    ),
    *(
        Kind(
            name,
            path,
            name in ("PersistentVolumeClaim", "CSIStorageCapacity"),
            read,
            ClusterState.upsert_volume_object,
            partial(_remove_volume_object, name),
        )
        for name, path, read in (
            (
                "StorageClass",
                "/apis/storage.k8s.io/v1/storageclasses",
                volume_parse.read_storage_class,
            ),
            ("PersistentVolume", "/api/v1/persistentvolumes", volume_parse.read_pv),
            ("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", volume_parse.read_pvc),
            ("CSINode", "/apis/storage.k8s.io/v1/csinodes", volume_parse.read_csi_node),
            (
                "VolumeAttachment",
                "/apis/storage.k8s.io/v1/volumeattachments",
                volume_parse.read_volume_attachment,
            ),
            ("CSIDriver", "/apis/storage.k8s.io/v1/csidrivers", volume_parse.read_csi_driver),
            (
                "CSIStorageCapacity",
                "/apis/storage.k8s.io/v1/csistoragecapacities",
                volume_parse.read_csi_storage_capacity,
            ),
        )
    ),
    Kind("Pod", "/api/v1/pods", True, read_pod, ClusterState.upsert_pod, ClusterState.remove_pod),
)
KIND_ORDER = {kind.name: i for i, kind in enumerate(KINDS)}


def served_version(client: KubeClient, group: str, resource: str, versions: tuple[str, ...]) -> str:
    """The first of `versions` in which the API server serves `resource` (discovery)."""
    body = orjson.loads(client.request("GET", f"/apis/{group}"))
    served = {str(v.get("groupVersion")) for v in body.get("versions") or []}
    for version in versions:
        if version in served:
            listing = orjson.loads(client.request("GET", f"/apis/{version}"))
            if any(r.get("name") == resource for r in listing.get("resources") or []):
                return version
    raise ApiError(
        404, "NotFound", f"the server serves {resource} in none of {', '.join(versions)}"
    )


def _remove_group(state: ClusterState, key: str, upstream: bool) -> None:
    """Forget a deleted PodGroup, unless the group now held under that key is of the other
    API (a CRD and an upstream PodGroup may share a namespace and name)."""
    group = state.pod_groups.get(key)
    if group is not None and group.upstream == upstream:
        state.remove_pod_group(key)
