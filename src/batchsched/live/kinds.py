"""The API resources batchsched watches, and how their JSON becomes records and state facts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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
    DeviceClass,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
)
from batchsched.state.cluster import ClusterState

Record = Node | Pod | PriorityClass | PodDisruptionBudget | PodGroup | DeviceClass | Namespace


@dataclass(frozen=True)
class Kind:
    name: str
    path: str  # the cluster-wide collection
    namespaced: bool
    read: Callable[[Mapping[str, Any]], Record]
    upsert: Callable[[ClusterState, Any], None]
    remove: Callable[[ClusterState, str], None]
    optional: bool = False  # a CRD that may not be installed

    def key_of(self, obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        return f"{meta.get('namespace') or 'default'}/{name}" if self.namespaced else name


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
        ClusterState.remove_pod_group,
        optional=True,
    ),
    # Read only for the refusal guard: pods asking for a resource a DeviceClass maps.
    Kind(
        "DeviceClass",
        "/apis/resource.k8s.io/v1/deviceclasses",
        False,
        read_device_class,
        ClusterState.upsert_device_class,
        ClusterState.remove_device_class,
        optional=True,
    ),
    Kind("Pod", "/api/v1/pods", True, read_pod, ClusterState.upsert_pod, ClusterState.remove_pod),
)
KIND_ORDER = {kind.name: i for i, kind in enumerate(KINDS)}
