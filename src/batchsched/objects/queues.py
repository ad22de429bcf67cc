"""Queue objects: batchsched's own `batchsched.io/v1alpha1` Queue, and Volcano's and KAI's
Queues read into the same record (docs/queues.md#the-queue-object has the mapping).

Each reader checks what an API server would check of one object (quantities, `guaranteed <=
nominal <= limit`); `check_queue_tree` checks what only the whole set shows (unknown parents,
cycles, children guaranteed more than their parent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batchsched.objects.errors import ManifestError, shown
from batchsched.objects.go_duration import go_duration_seconds
from batchsched.objects.numbers import INT32_MAX, INT32_MIN
from batchsched.objects.parse import Json, _Reader, parse_time
from batchsched.objects.quantity import CPU, MEMORY, QuantityError, format_amount, resource_amount

QUEUE_API = "batchsched.io/v1alpha1"
VOLCANO_QUEUE_API = "scheduling.volcano.sh/v1beta1"
KAI_QUEUE_API = "scheduling.run.ai/v2"
QUEUE_APIS = (QUEUE_API, VOLCANO_QUEUE_API, KAI_QUEUE_API)

GPU = "nvidia.com/gpu"
# Volcano's hierarchy hangs every top queue under `root`, which Volcano creates itself.
_VOLCANO_ROOT = "root"
# KAI writes memory in megabytes (10^6 bytes), CPU in millicores, GPUs in devices.
_KAI_RESOURCES = {"cpu": (CPU, 1), "memory": (MEMORY, 10**6), "gpu": (GPU, 1)}
_QUOTA_FIELDS = ("guaranteed", "nominal", "limit")


@dataclass(frozen=True, slots=True)
class QueueQuota:
    """One resource of a queue, in batchsched's units (millicores for CPU, bytes for memory)."""

    guaranteed: int = 0  # never reclaimed below this
    nominal: int = 0  # the entitlement: usage above it is borrowed
    limit: int | None = None  # a hard cap on usage; None: no cap


@dataclass(slots=True)
class Queue:
    name: str
    api_version: str  # which API it was read from (QUEUE_APIS)
    parent: str = ""  # "": a root
    resources: dict[str, QueueQuota] = field(default_factory=dict)  # only the names it limits
    weight: float = 1.0  # share of the surplus beyond nominal quotas
    priority: int = 0  # the surplus goes to higher priorities first
    reclaim_min_runtime: float = 0.0  # seconds: younger pods are never reclaimed
    reclaimable: bool = True  # Volcano's `reclaimable: false`: its pods are never reclaimed
    labels: dict[str, str] = field(default_factory=dict)
    resource_version: str = ""
    uid: str = ""
    # What batchsched last wrote to a batchsched.io Queue's status, as the API server has it,
    # unread: only live mode reads it back, defensively (another writer may have put anything
    # there). Not part of what the queue is: a status write changes no scheduling.
    status: Mapping[str, Any] = field(default_factory=dict, compare=False)


def read_queue(obj: Json) -> Queue:
    """A `kind: Queue` of batchsched, Volcano or KAI, by its apiVersion."""
    api_version = obj.get("apiVersion")
    if api_version == VOLCANO_QUEUE_API:
        return read_volcano_queue(obj)
    if api_version == KAI_QUEUE_API:
        return read_kai_queue(obj)
    return read_batchsched_queue(obj)


def read_batchsched_queue(obj: Json) -> Queue:
    r = _Reader("Queue", obj)
    r.require_name()
    spec = r.get(obj, "spec", dict, {})
    s = r.at("spec")
    resources: dict[str, QueueQuota] = {}
    for resource, entry in s.get(spec, "resources", dict, {}).items():
        at = s.at(f"resources.{resource}")
        if not isinstance(entry, Mapping):
            raise at.fail("", f"must be a mapping of {', '.join(_QUOTA_FIELDS)}")
        unknown = sorted(set(entry) - set(_QUOTA_FIELDS))
        if unknown:
            raise at.fail(unknown[0], f"unknown field (allowed: {', '.join(_QUOTA_FIELDS)})")
        amounts = {name: _amount(at, str(resource), name, entry.get(name)) for name in entry}
        guaranteed = amounts.get("guaranteed") or 0
        nominal = amounts.get("nominal", guaranteed)
        limit = amounts.get("limit")
        resources[str(resource)] = _quota(r, QUEUE_API, str(resource), guaranteed, nominal, limit)
    weight = s.get(spec, "weight", object, 1)
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not 0 <= weight < math.inf
    ):
        # An infinite weight has no share to compute (docs/queues.md#fair-share).
        raise s.fail("weight", f"must be a finite number >= 0, got {shown(weight)}")
    return Queue(
        name=r.name,
        api_version=QUEUE_API,
        parent=s.get(spec, "parent", str, ""),
        resources=resources,
        weight=float(weight),
        priority=s.integer(spec, "priority", 0, INT32_MIN, INT32_MAX),
        reclaim_min_runtime=_duration(s, spec, "reclaimMinRuntime"),
        labels=r.string_map(obj, "metadata.labels"),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
        uid=r.get(obj, "metadata.uid", str, ""),
        status=_mapping(obj.get("status")),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


USAGE_TIME = "lastUpdateTime"  # the key of status.usage that says when it was written


@dataclass(frozen=True, slots=True)
class StoredUsage:
    """A queue's decayed usage as batchsched wrote it to status.usage."""

    amounts: dict[str, float]  # resource -> amount x seconds, in batchsched's units
    at: datetime


def usage_unit(resource: str) -> int:
    """batchsched's units in one unit of `resource` as status.usage writes it (CPU in
    core-seconds, the rest in their own units times seconds)."""
    return 1000 if resource == CPU else 1


def stored_usage(queue: Queue) -> StoredUsage | None:
    """The decayed usage in a batchsched Queue's `status.usage` (None if there is none); an
    error naming the field when it is not what batchsched writes (another writer's)."""
    raw = queue.status.get("usage")
    if raw is None:
        return None
    where = f"Queue {queue.name}"
    if not isinstance(raw, Mapping):
        what = f"must be a mapping of resource to amount and {USAGE_TIME}, got {shown(raw)}"
        raise ManifestError(what, obj=where, field="status.usage")
    stamp = raw.get(USAGE_TIME)
    try:
        if not isinstance(stamp, str):
            raise ValueError(f"{shown(stamp)} is not an RFC 3339 time")
        at = parse_time(stamp)
    except ValueError as err:
        raise ManifestError(str(err), obj=where, field=f"status.usage.{USAGE_TIME}") from None
    amounts: dict[str, float] = {}
    for resource, value in raw.items():
        if resource == USAGE_TIME:
            continue
        try:
            amount = float(value) if isinstance(value, str | int | float) else math.nan
        except ValueError:
            amount = math.nan
        if isinstance(value, bool) or not 0 <= amount < math.inf:
            what = f"must be a number >= 0 (the resource times seconds), got {shown(value)}"
            raise ManifestError(what, obj=where, field=f"status.usage.{resource}")
        amounts[str(resource)] = amount * usage_unit(str(resource))
    return StoredUsage(amounts, at)


def read_volcano_queue(obj: Json) -> Queue:
    """Volcano: `guarantee.resource` -> guaranteed, `deserved` -> nominal (else guaranteed),
    `capability` -> limit; `parent: root` is a root (Volcano creates `root` itself)."""
    r = _Reader("Queue", obj)
    r.require_name()
    spec = r.get(obj, "spec", dict, {})
    s = r.at("spec")
    levels = {
        "guaranteed": ("guarantee.resource", s.get(spec, "guarantee.resource", dict, {})),
        "nominal": ("deserved", s.get(spec, "deserved", dict, {})),
        "limit": ("capability", s.get(spec, "capability", dict, {})),
    }
    resources: dict[str, QueueQuota] = {}
    for resource in sorted({str(name) for _, values in levels.values() for name in values}):
        amounts = {
            level: _amount(s.at(path), resource, resource, values[resource])
            for level, (path, values) in levels.items()
            if resource in values
        }
        guaranteed = amounts.get("guaranteed") or 0
        nominal = amounts.get("nominal", guaranteed)
        limit = amounts.get("limit")
        resources[resource] = _quota(r, VOLCANO_QUEUE_API, resource, guaranteed, nominal, limit)
    parent = s.get(spec, "parent", str, "")
    return Queue(
        name=r.name,
        api_version=VOLCANO_QUEUE_API,
        parent="" if parent == _VOLCANO_ROOT else parent,
        resources=resources,
        weight=float(s.integer(spec, "weight", 1, 1, 65535)),
        priority=s.integer(spec, "priority", 0, INT32_MIN, INT32_MAX),
        reclaimable=s.get(spec, "reclaimable", bool, True),
        labels=r.string_map(obj, "metadata.labels"),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
        uid=r.get(obj, "metadata.uid", str, ""),
    )


def read_kai_queue(obj: Json) -> Queue:
    """KAI: per `resources.{cpu,memory,gpu}`, `quota` -> guaranteed and nominal, `limit` ->
    limit (-1: none), `overQuotaWeight` -> weight (the GPU's, else CPU's, else memory's). A
    resource with neither quota nor limit (both -1 or absent) is not limited."""
    r = _Reader("Queue", obj)
    r.require_name()
    spec = r.get(obj, "spec", dict, {})
    s = r.at("spec")
    resources: dict[str, QueueQuota] = {}
    weights: list[float] = []
    for kai_name in ("gpu", "cpu", "memory"):
        entry = s.get(spec, f"resources.{kai_name}", dict, None)
        if entry is None:
            continue
        at = s.at(f"resources.{kai_name}")
        resource, factor = _KAI_RESOURCES[kai_name]
        quota = _kai_amount(at, entry, "quota", factor)
        limit = _kai_amount(at, entry, "limit", factor)
        weight = entry.get("overQuotaWeight")
        if weight is not None:
            bad = isinstance(weight, bool) or not isinstance(weight, int | float)
            if bad or not 0 <= weight < math.inf:
                what = f"must be a finite number >= 0, got {shown(weight)}"
                raise at.fail("overQuotaWeight", what)
            weights.append(float(weight))
        if quota is not None or limit is not None:
            guaranteed = quota or 0
            resources[resource] = _quota(r, KAI_QUEUE_API, resource, guaranteed, guaranteed, limit)
    return Queue(
        name=r.name,
        api_version=KAI_QUEUE_API,
        parent=s.get(spec, "parentQueue", str, ""),
        resources=resources,
        weight=weights[0] if weights else 1.0,
        priority=s.integer(spec, "priority", 0, INT32_MIN, INT32_MAX),
        reclaim_min_runtime=_duration(s, spec, "reclaimMinRuntime"),
        labels=r.string_map(obj, "metadata.labels"),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
        uid=r.get(obj, "metadata.uid", str, ""),
    )


def _amount(at: _Reader, resource: str, field_name: str, value: Any) -> int:
    try:
        return resource_amount(resource, value)
    except QuantityError as err:
        raise at.fail(field_name, f"{err} (a quantity such as 8, 500m or 64Gi)") from None


def _kai_amount(at: _Reader, entry: Mapping[str, Any], name: str, factor: int) -> int | None:
    """A KAI number in batchsched's units; -1 (KAI's "unlimited") and absent: None."""
    value = entry.get(name)
    if value is None or value == -1:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise at.fail(name, f"must be a number >= 0, or -1 for none, got {shown(value)}")
    return math.ceil(value * factor)


@dataclass(frozen=True)
class _Fields:
    """How one API spells a queue's fields, for errors (`{r}`: the resource's name there)."""

    parent: str
    guaranteed: str
    nominal: str
    nominal_word: str
    limit_word: str


_FIELDS = {
    QUEUE_API: _Fields(
        "spec.parent",
        "spec.resources.{r}.guaranteed",
        "spec.resources.{r}.nominal",
        "nominal",
        "limit",
    ),
    VOLCANO_QUEUE_API: _Fields(
        "spec.parent", "spec.guarantee.resource.{r}", "spec.deserved.{r}", "deserved", "capability"
    ),
    KAI_QUEUE_API: _Fields(
        "spec.parentQueue",
        "spec.resources.{r}.quota",
        "spec.resources.{r}.quota",
        "quota",
        "limit",
    ),
}
_KAI_NAMES = {ours: kai for kai, (ours, _) in _KAI_RESOURCES.items()}


def _field(queue_api: str, which: str, resource: str) -> str:
    spelled = _KAI_NAMES.get(resource, resource) if queue_api == KAI_QUEUE_API else resource
    return str(getattr(_FIELDS[queue_api], which)).format(r=spelled)


def _quota(
    r: _Reader, queue_api: str, resource: str, guaranteed: int, nominal: int, limit: int | None
) -> QueueQuota:
    names = _FIELDS[queue_api]
    if guaranteed > nominal:
        raise r.fail(
            _field(queue_api, "guaranteed", resource),
            f"{format_amount(resource, guaranteed)} is more than {names.nominal_word} "
            f"{format_amount(resource, nominal)} (guaranteed <= nominal <= limit)",
        )
    if limit is not None and nominal > limit:
        raise r.fail(
            _field(queue_api, "nominal", resource),
            f"{format_amount(resource, nominal)} is more than {names.limit_word} "
            f"{format_amount(resource, limit)} (guaranteed <= nominal <= limit)",
        )
    return QueueQuota(guaranteed, nominal, limit)


def _duration(s: _Reader, spec: Any, name: str) -> float:
    raw = s.get(spec, name, str, "")
    if not raw:
        return 0.0
    seconds = go_duration_seconds(raw)
    if seconds is None:
        raise s.fail(name, f"{shown(raw)} is not a duration (such as 90s, 10m or 1h30m)")
    return seconds


def check_queue_tree(queues: list[Queue]) -> None:
    """Refuse a set of queues that is not a tree an API server would accept (the first of
    `queue_tree_errors`)."""
    errors = queue_tree_errors(queues)
    if errors:
        raise errors[0]


def queue_tree_errors(
    queues: list[Queue], unreadable: Mapping[str, str] | None = None
) -> list[ManifestError]:
    """What makes a set of queues not a tree, at most one error per queue: first, by name, a
    parent that is not a queue (or one that exists but cannot be read: `unreadable`, name ->
    its field and what is allowed) and a cycle of parents (on every queue whose parents lead
    into one); then, by name, children whose guaranteed amounts of a resource add up to more
    than the parent guarantees (for the resources the parent names), on the parent."""
    by_name = {q.name: q for q in queues}
    errors: dict[str, ManifestError] = {}
    for queue in sorted(queues, key=lambda q: q.name):
        parent_field = _field(queue.api_version, "parent", "")
        if queue.parent and queue.parent not in by_name:
            why = unreadable.get(queue.parent) if unreadable else None
            known = ", ".join(sorted(by_name)) or "none"
            what = (
                f"Queue {queue.parent!r} cannot be read: {why}"
                if why
                else f"no Queue {queue.parent!r} (known: {known})"
            )
            errors[queue.name] = _tree_error(queue, parent_field, what)
            continue
        seen = [queue.name]
        up = queue.parent
        while up in by_name:
            if up in seen:
                cycle = " -> ".join([*seen[seen.index(up) :], up])
                errors[queue.name] = _tree_error(
                    queue, parent_field, f"the parents form a cycle: {cycle}"
                )
                break
            seen.append(up)
            up = by_name[up].parent
    over: dict[str, ManifestError] = {}
    children: dict[str, list[Queue]] = {}
    for queue in queues:
        if queue.parent:
            children.setdefault(queue.parent, []).append(queue)
    for name in sorted(children):
        parent = by_name.get(name)
        if parent is None or name in errors:
            continue
        for resource, quota in sorted(parent.resources.items()):
            total = sum(
                c.resources[resource].guaranteed for c in children[name] if resource in c.resources
            )
            if total > quota.guaranteed:
                kids = ", ".join(
                    f"{c.name} {format_amount(resource, c.resources[resource].guaranteed)}"
                    for c in sorted(children[name], key=lambda c: c.name)
                    if resource in c.resources and c.resources[resource].guaranteed
                )
                over[name] = _tree_error(
                    parent,
                    _field(parent.api_version, "guaranteed", resource),
                    f"{format_amount(resource, quota.guaranteed)} is less than its children "
                    f"guarantee together ({format_amount(resource, total)}: {kids})",
                )
                break
    return [errors[name] for name in sorted(errors)] + [over[name] for name in sorted(over)]


def _tree_error(queue: Queue, field_path: str, what: str) -> ManifestError:
    return ManifestError(what, obj=f"Queue {queue.name}", field=field_path)
