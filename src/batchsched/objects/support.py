"""Which pod fields batchsched does not implement yet, found when a pod is read
(docs/support.md); the decision to refuse the pod is admission's (scheduling/admission.py).

A pod that uses a field some default-profile plugin of kube-scheduler reads, but that
batchsched does not implement yet, must not be placed as if the field were not there. Each row
of `REFUSED` is one field family and the upstream plugin that reads it; a change implementing
that plugin deletes the row. The field is found once per pod record, when the manifest is read
(`Pod.refused`), so pods that use none of these fields pay nothing per attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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


def unsupported_message(subject: str, field: str) -> str:
    """The one wording of every refusal of what batchsched does not implement: a pod's
    field, a device's or a claim request's (docs/support.md)."""
    return f"{subject} uses {field}, which batchsched does not support yet"


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
