"""Objects the informers could not read, told to their owners.

A malformed object (a quantity beyond int64, a priority beyond int32, ...) is left out of the
cluster state so that everything else keeps being scheduled; its owner learns why from a
Warning event on it and, for a pod waiting for one of our profiles, from its PodScheduled
condition. Only the raw JSON is at hand, so every field is read defensively: the object is
malformed by definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batchsched.live.events import ObjectRef
from batchsched.live.kinds import Kind
from batchsched.objects.errors import ManifestError
from batchsched.objects.kinds import api_version_of

MALFORMED_REASON = "MalformedObject"  # the Warning event's reason
_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Malformed:
    kind: str
    key: str
    ref: ObjectRef
    message: str  # names the field and what is wrong with it
    # For a pod that waits for a scheduler (not bound, not finished, not being deleted, no
    # gates): its spec.schedulerName; "" otherwise.
    waiting_for: str = ""
    condition: Mapping[str, Any] | None = None  # its PodScheduled condition as it stands


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def malformed(kind: Kind, key: str, obj: Mapping[str, Any], err: ManifestError) -> Malformed:
    """The report on `obj`, of `kind` as served (its discovered version, if any)."""
    meta = _mapping(obj.get("metadata"))
    ref = ObjectRef(
        kind.manifest_kind,
        _text(meta.get("namespace")),
        _text(meta.get("name")),
        _text(meta.get("uid")),
        # Watch events carry the apiVersion; list items do not.
        api_version=_text(obj.get("apiVersion")) or api_version_of(kind.path),
    )
    message = ": ".join(p for p in (err.field, err.what) if p)
    if kind.name != "Pod":
        return Malformed(kind.name, key, ref, message)
    spec = _mapping(obj.get("spec"))
    status = _mapping(obj.get("status"))
    waiting = not (
        _text(spec.get("nodeName"))
        or meta.get("deletionTimestamp")
        or spec.get("schedulingGates")
        or status.get("phase") in _TERMINAL
    )
    scheduled = None
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled":
            scheduled = cond
    scheduler = _text(spec.get("schedulerName")) or "default-scheduler"
    return Malformed(kind.name, key, ref, message, scheduler if waiting else "", scheduled)
