"""Which pod fields batchsched honours, and the refusal of the rest (docs/support.md).

A pod that uses a field some default-profile plugin of kube-scheduler reads, but that
batchsched does not implement yet, must not be placed as if the field were not there: it is
refused (never bound, never a preemptor) with a message naming the field. Each row of
`REFUSED` is one field family and the upstream plugin that reads it; a change implementing
that plugin deletes the row. The verdict is computed once per pod record, when the manifest
is read, so pods that use none of these fields pay nothing per attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from batchsched.objects.records import Pod

# Finds the first use of a field family in a pod's spec: the path used, or None.
Detector = Callable[[Mapping[str, Any]], str | None]


@dataclass(frozen=True, slots=True)
class Refused:
    field: str  # the field family as docs/support.md names it
    plugin: str  # the kube-scheduler plugin that reads it
    find: Detector


def message(path: str) -> str:
    return f"pod uses {path}, which batchsched does not support yet"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                yield i, item


def _present(value: Any) -> bool:
    return value is not None and value != {} and value != []


def _key(path: str) -> Detector:
    """A field under spec, used when present and not empty."""
    parts = path.split(".")

    def find(spec: Mapping[str, Any]) -> str | None:
        value: Any = spec
        for part in parts:
            value = _mapping(value).get(part)
        return f"spec.{path}" if _present(value) else None

    return find


def _host_ports(spec: Mapping[str, Any]) -> str | None:
    # With hostNetwork the API server sets hostPort to the containerPort: every port is one.
    host_network = spec.get("hostNetwork") is True
    for group in ("initContainers", "containers"):
        for i, container in _items(spec.get(group)):
            if group == "initContainers" and container.get("restartPolicy") != "Always":
                continue  # an init container's ports are gone before the pod runs
            for j, port in _items(container.get("ports")):
                if port.get("hostPort") or (host_network and port.get("containerPort")):
                    return f"spec.{group}[{i}].ports[{j}].hostPort"
    return None


def _volumes(*sources: str) -> Detector:
    def find(spec: Mapping[str, Any]) -> str | None:
        for i, volume in _items(spec.get("volumes")):
            for source in sources:
                if volume.get(source) is not None:
                    return f"spec.volumes[{i}].{source}"
        return None

    return find


# Inline in-tree volumes that VolumeRestrictions checks for conflicts or NodeVolumeLimits
# counts against a node's attach limit (through CSI migration).
IN_TREE_DISKS = (
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cinder",
    "gcePersistentDisk",
    "iscsi",
    "portworxVolume",
    "rbd",
    "vsphereVolume",
)

# Every DeviceClass also answers to this implicit extended resource name (DRA's extended
# resources): `deviceclass.resource.kubernetes.io/<class name>`.
IMPLICIT_DEVICE_CLASS = "deviceclass.resource.kubernetes.io/"


def _implicit_device_class(spec: Mapping[str, Any]) -> str | None:
    for group in ("initContainers", "containers"):
        for i, container in _items(spec.get(group)):
            resources = _mapping(container.get("resources"))
            for kind in ("requests", "limits"):
                for name in _mapping(resources.get(kind)):
                    if str(name).startswith(IMPLICIT_DEVICE_CLASS):
                        return f"spec.{group}[{i}].resources.{kind}.{name}"
    return None


# Not only a pod field: an extended resource that a DeviceClass maps (through
# spec.extendedResourceName, or the implicit name) is allocated by DynamicResources, not
# counted by NodeResourcesFit. The explicit names are known from the DeviceClasses: `refusal`.
DEVICE_CLASS_ROW = "extended resources mapped by a DeviceClass"

REFUSED: tuple[Refused, ...] = (
    Refused("spec.affinity.podAffinity", "InterPodAffinity", _key("affinity.podAffinity")),
    Refused("spec.affinity.podAntiAffinity", "InterPodAffinity", _key("affinity.podAntiAffinity")),
    Refused(
        "spec.topologySpreadConstraints",
        "PodTopologySpread",
        _key("topologySpreadConstraints"),
    ),
    Refused("spec.containers[*].ports[*].hostPort", "NodePorts", _host_ports),
    Refused(
        "spec.volumes[*].persistentVolumeClaim",
        "VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits",
        _volumes("persistentVolumeClaim"),
    ),
    Refused(
        "spec.volumes[*].ephemeral",
        "VolumeBinding, VolumeZone, NodeVolumeLimits",
        _volumes("ephemeral"),
    ),
    Refused(
        "spec.volumes[*] in-tree disks",
        "VolumeRestrictions, NodeVolumeLimits",
        _volumes(*IN_TREE_DISKS),
    ),
    Refused("spec.resourceClaims", "DynamicResources", _key("resourceClaims")),
    Refused(
        "spec.schedulingGroup",
        "GangScheduling (Workload API)",
        lambda spec: _key("schedulingGroup")(spec) or _key("workloadRef")(spec),
    ),
    Refused(DEVICE_CLASS_ROW, "DynamicResources", _implicit_device_class),
    Refused(
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        "NodeAffinity (score)",
        _key("affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"),
    ),
)


def refused_field(spec: Mapping[str, Any]) -> str:
    """The first unsupported field the pod spec uses (its path), or "" if none."""
    for row in REFUSED:
        path = row.find(spec)
        if path is not None:
            return path
    return ""


def refusal(pod: Pod, device_class_resources: Mapping[str, str]) -> str | None:
    """Why the pod must not be scheduled by batchsched yet, or None.

    `device_class_resources` maps an extended resource to the DeviceClass that claims it.
    """
    if pod.refused:
        return message(pod.refused)
    if device_class_resources:
        for resource in pod.requests:
            device_class = device_class_resources.get(resource)
            if device_class is not None:
                return message(
                    f"extended resource {resource} (mapped by DeviceClass {device_class} "
                    "through spec.extendedResourceName)"
                )
    return None


def not_ready(pod: Pod) -> str | None:
    """Why a pending pod is not to be attempted at all, or None (SchedulingGates, and
    kube-scheduler's skip of pods being deleted)."""
    if pod.deletion_timestamp is not None:
        return "not scheduled: the pod is being deleted (metadata.deletionTimestamp is set)"
    if pod.scheduling_gates:
        return f"waiting for its scheduling gates: {', '.join(pod.scheduling_gates)}"
    return None
