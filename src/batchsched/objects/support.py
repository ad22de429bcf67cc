"""Which pod fields batchsched honours, and the refusal of the rest (docs/support.md).

A pod that uses a field some default-profile plugin of kube-scheduler reads, but that
batchsched does not implement yet, must not be placed as if the field were not there: it is
refused (never bound, never a preemptor) with a message naming the field. Each row of
`REFUSED` is one field family and the upstream plugin that reads it; a change implementing
that plugin deletes the row. The verdict is computed once per pod record, when the manifest
is read, so pods that use none of these fields pay nothing per attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
    # Top-level spec fields the family lives under: a pod without any of them is not asked,
    # so the common pod costs a few dict lookups.
    under: tuple[str, ...]


def message(path: str) -> str:
    return f"pod uses {path}, which batchsched does not support yet"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _present(value: Any) -> bool:
    return value is not None and value != {} and value != []


def _keyed(field: str, plugin: str, *paths: str) -> Refused:
    """A family of fields under spec (dotted paths), used when present and not empty."""

    def find(spec: Mapping[str, Any]) -> str | None:
        for path in paths:
            value: Any = spec
            for part in path.split("."):
                value = _mapping(value).get(part)
            if _present(value):
                return f"spec.{path}"
        return None

    return Refused(field, plugin, find, tuple(p.split(".")[0] for p in paths))


REFUSED: tuple[Refused, ...] = (
    # spec.schedulingGroup (1.36+) is read (Coscheduling); 1.35's alpha name is not.
    _keyed("spec.workloadRef", "GangScheduling (the Workload API of 1.35)", "workloadRef"),
)


_WATCHED = frozenset(key for row in REFUSED for key in row.under)


def refused_field(spec: Mapping[str, Any]) -> str:
    """The first unsupported field the pod spec uses (its path), or "" if none."""
    used = _WATCHED.intersection(spec)
    for row in REFUSED:
        if not used.isdisjoint(row.under):
            path = row.find(spec)
            if path is not None:
                return path
    return ""


# Not in REFUSED: spec.resourceClaims, and extended resources that a DeviceClass maps
# (through spec.extendedResourceName, or the implicit name), are allocated by DynamicResources
# (not counted by NodeResourcesFit) in every world, by a profile that has the plugin at
# Filter and Reserve; refused under other profiles (`refusal`).


def refusal(
    pod: Pod, device_class_resources: Mapping[str, str], claims_allowed: bool = False
) -> str | None:
    """Why the pod must not be scheduled by batchsched yet, or None.

    `device_class_resources` maps an extended resource to the DeviceClass that claims it;
    `claims_allowed` says whether the pod's profile allocates DRA claims (DynamicResources at
    Filter and Reserve).
    """
    if pod.refused:
        return message(pod.refused)
    if claims_allowed:
        return None
    if pod.resource_claims:
        return message(
            "spec.resourceClaims (allocated with the DynamicResources plugin only: "
            "the profile lacks it at Filter or Reserve)"
        )
    if device_class_resources:
        for resource in pod.requests:
            device_class = device_class_resources.get(resource)
            if device_class is not None:
                return message(
                    f"extended resource {resource} (mapped by DeviceClass {device_class}; "
                    "allocated with the DynamicResources plugin only)"
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
