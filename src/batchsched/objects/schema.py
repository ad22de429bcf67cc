"""The fields of the kinds batchsched reads, for unknown-field warnings.

As kubectl's strict field validation does, a field the API would not know (`nodeSelecter`,
`resources.request`) is reported by its path. A schema maps field names to the schema of
their value: `None` where the value is free-form or not checked (labels, status written by
the system), `Each(schema)` for a list of objects.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union

Schema = Mapping[str, Union["Schema", "Each", None]]


@dataclass(frozen=True, slots=True)
class Each:
    item: Schema


def _free(*names: str) -> dict[str, None]:
    return dict.fromkeys(names)


_OWNER_REFERENCE: Schema = _free(
    "apiVersion", "blockOwnerDeletion", "controller", "kind", "name", "uid"
)
METADATA: Schema = {
    **_free(
        "annotations",
        "creationTimestamp",
        "deletionGracePeriodSeconds",
        "deletionTimestamp",
        "finalizers",
        "generateName",
        "generation",
        "labels",
        "managedFields",
        "name",
        "namespace",
        "resourceVersion",
        "selfLink",
        "uid",
    ),
    "ownerReferences": Each(_OWNER_REFERENCE),
}
_REQUIREMENT: Schema = _free("key", "operator", "values")
_NODE_SELECTOR_TERM: Schema = {
    "matchExpressions": Each(_REQUIREMENT),
    "matchFields": Each(_REQUIREMENT),
}
LABEL_SELECTOR: Schema = {"matchLabels": None, "matchExpressions": Each(_REQUIREMENT)}
_POD_AFFINITY_TERM: Schema = {
    **_free("namespaces", "topologyKey", "matchLabelKeys", "mismatchLabelKeys"),
    "labelSelector": LABEL_SELECTOR,
    "namespaceSelector": LABEL_SELECTOR,
}
_POD_AFFINITY: Schema = {
    "requiredDuringSchedulingIgnoredDuringExecution": Each(_POD_AFFINITY_TERM),
    "preferredDuringSchedulingIgnoredDuringExecution": Each(
        {"weight": None, "podAffinityTerm": _POD_AFFINITY_TERM}
    ),
}
_AFFINITY: Schema = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": Each(_NODE_SELECTOR_TERM)
        },
        "preferredDuringSchedulingIgnoredDuringExecution": Each(
            {"weight": None, "preference": _NODE_SELECTOR_TERM}
        ),
    },
    "podAffinity": _POD_AFFINITY,
    "podAntiAffinity": _POD_AFFINITY,
}
RESOURCES: Schema = _free("claims", "limits", "requests")
_CONTAINER: Schema = {
    **_free(
        "args",
        "command",
        "env",
        "envFrom",
        "image",
        "imagePullPolicy",
        "lifecycle",
        "livenessProbe",
        "name",
        "readinessProbe",
        "resizePolicy",
        "restartPolicy",
        "restartPolicyRules",
        "securityContext",
        "startupProbe",
        "stdin",
        "stdinOnce",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "tty",
        "volumeDevices",
        "volumeMounts",
        "workingDir",
    ),
    "ports": Each(_free("containerPort", "hostIP", "hostPort", "name", "protocol")),
    "resources": RESOURCES,
}
POD_SPEC: Schema = {
    **_free(
        "activeDeadlineSeconds",
        "automountServiceAccountToken",
        "dnsConfig",
        "dnsPolicy",
        "enableServiceLinks",
        "ephemeralContainers",
        "hostAliases",
        "hostIPC",
        "hostNetwork",
        "hostPID",
        "hostUsers",
        "hostname",
        "hostnameOverride",
        "imagePullSecrets",
        "nodeName",
        "nodeSelector",
        "os",
        "overhead",
        "preemptionPolicy",
        "priority",
        "priorityClassName",
        "readinessGates",
        "resourceClaims",
        "restartPolicy",
        "runtimeClassName",
        "schedulerName",
        "schedulingGroup",
        "securityContext",
        "serviceAccount",
        "serviceAccountName",
        "setHostnameAsFQDN",
        "shareProcessNamespace",
        "subdomain",
        "terminationGracePeriodSeconds",
        "topologySpreadConstraints",
        "volumes",
        "workloadRef",
    ),
    "affinity": _AFFINITY,
    "containers": Each(_CONTAINER),
    "initContainers": Each(_CONTAINER),
    "resources": RESOURCES,
    "schedulingGates": Each(_free("name")),
    "tolerations": Each(_free("effect", "key", "operator", "tolerationSeconds", "value")),
}


def _object(**fields: Schema | Each | None) -> Schema:
    return {"apiVersion": None, "kind": None, "metadata": METADATA, **fields}


KINDS: dict[str, Schema] = {
    "Pod": _object(spec=POD_SPEC, status=None),
    "Node": _object(
        spec={
            **_free("configSource", "externalID", "podCIDR", "podCIDRs", "providerID"),
            "taints": Each(_free("effect", "key", "timeAdded", "value")),
            "unschedulable": None,
        },
        status=_free(
            "addresses",
            "allocatable",
            "capacity",
            "conditions",
            "config",
            "daemonEndpoints",
            "declaredFeatures",
            "features",
            "images",
            "nodeInfo",
            "phase",
            "runtimeHandlers",
            "volumesAttached",
            "volumesInUse",
        ),
    ),
    "PriorityClass": _object(**_free("value", "globalDefault", "description", "preemptionPolicy")),
    "PodDisruptionBudget": _object(
        spec={
            **_free("maxUnavailable", "minAvailable", "unhealthyPodEvictionPolicy"),
            "selector": LABEL_SELECTOR,
        },
        status=None,
    ),
    "PodGroup": _object(
        spec=_free("minMember", "minResources", "scheduleTimeoutSeconds"), status=None
    ),
    "DeviceClass": _object(spec=_free("config", "extendedResourceName", "selectors")),
    "PersistentVolumeClaim": _object(
        spec=_free(
            "accessModes",
            "dataSource",
            "dataSourceRef",
            "resources",
            "selector",
            "storageClassName",
            "volumeAttributesClassName",
            "volumeMode",
            "volumeName",
        ),
        status=None,
    ),
    # A PV's spec holds one of many volume sources: only its top level is not checked.
    "PersistentVolume": _object(spec=None, status=None),
    "StorageClass": _object(
        **_free(
            "allowVolumeExpansion",
            "allowedTopologies",
            "mountOptions",
            "parameters",
            "provisioner",
            "reclaimPolicy",
            "volumeBindingMode",
        )
    ),
    "CSINode": _object(
        spec={"drivers": Each(_free("allocatable", "name", "nodeID", "topologyKeys"))}
    ),
    "CSIDriver": _object(spec=None),
    # spec.source may hold an inline volume's whole PV spec: only the top level is checked.
    "VolumeAttachment": _object(spec=_free("attacher", "nodeName", "source"), status=None),
    "CSIStorageCapacity": _object(
        **_free("capacity", "maximumVolumeSize", "storageClassName"), nodeTopology=LABEL_SELECTOR
    ),
}


# Upstream's Workload API (scheduling.k8s.io v1alpha2 and v1beta1: the union of their fields).
_GROUP_POLICY: Schema = {
    **_free("disruptionMode", "priority", "priorityClassName", "preemptionPolicy"),
    "resourceClaims": None,
    "schedulingConstraints": {"topology": Each(_free("key"))},
    "schedulingPolicy": {"basic": {}, "gang": _free("minCount")},
}
UPSTREAM_KINDS: dict[str, Schema] = {
    "PodGroup": _object(
        spec={
            **_GROUP_POLICY,
            **_free("podGroupTemplateRef", "workloadRef", "parentCompositePodGroupName"),
        },
        status=None,
    ),
    "Workload": _object(
        spec={
            **_free("controllerRef", "compositePodGroupTemplates"),
            "podGroupTemplates": Each({**_GROUP_POLICY, "name": None}),
        }
    ),
}
UPSTREAM_API = "scheduling.k8s.io/"


def unknown_fields(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """Paths of the fields in `obj` that its kind does not have (none for other kinds)."""
    upstream = str(obj.get("apiVersion", "")).startswith(UPSTREAM_API)
    schema = (UPSTREAM_KINDS.get(kind) if upstream else None) or KINDS.get(kind)
    return [] if schema is None else list(_walk(schema, obj, ""))


def _walk(schema: Schema, obj: Mapping[str, Any], prefix: str) -> Iterator[str]:
    for name, value in obj.items():
        path = f"{prefix}{name}"
        if name not in schema:
            yield path
            continue
        sub = schema[name]
        if isinstance(sub, Each):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, Mapping):
                        yield from _walk(sub.item, item, f"{path}[{i}].")
        elif sub is not None and isinstance(value, Mapping):
            yield from _walk(sub, value, f"{path}.")
