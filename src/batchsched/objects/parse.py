"""Build records from manifest / API JSON dictionaries.

Each reader names the object (`Kind namespace/name`) and the field in its errors. Unknown
fields are skipped here, as the API server's clients skip them; the file loader warns about
them (schema.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from batchsched.objects.errors import ManifestError
from batchsched.objects.podgroup import GROUP_ANNOTATION, GROUP_LABEL
from batchsched.objects.quantity import CPU, MEMORY, PODS, QuantityError, resource_amount
from batchsched.objects.records import (
    DeviceClass,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodCondition,
    PodDisruptionBudget,
    PodGroup,
    PodGroupStatus,
    PriorityClass,
    Requirement,
    Taint,
    Toleration,
)
from batchsched.plugins.support import refused_field

Json = Mapping[str, Any]
T = TypeVar("T")

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


@functools.cache
def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


class _Reader:
    """Typed access to one object's fields, raising ManifestError that names object and field."""

    def __init__(self, kind: str, obj: Json) -> None:
        self.kind = kind
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        name = meta.get("name")
        namespace = meta.get("namespace")
        self.name = name if isinstance(name, str) else ""
        self.namespace = namespace if isinstance(namespace, str) and namespace else "default"
        self.label = kind if not self.name else f"{kind} {self.name}"
        self.prefix = ""

    def namespaced(self) -> None:
        self.label = f"{self.kind} {self.namespace}/{self.name or '?'}"

    def at(self, prefix: str) -> _Reader:
        """A reader for a nested object: errors name the field from the object's root."""
        scoped = object.__new__(_Reader)  # a plain attribute copy: hot when reading big lists
        scoped.__dict__.update(self.__dict__)
        scoped.prefix = f"{self.prefix}.{prefix}" if self.prefix else prefix
        return scoped

    def fail(self, field: str, what: str) -> ManifestError:
        path = f"{self.prefix}.{field}" if self.prefix and field else self.prefix or field
        return ManifestError(what, obj=self.label, field=path)

    def get(self, obj: Any, path: str, expected: type[T], default: T) -> T:
        value: Any = obj
        for part in _parts(path):
            # `dict` first: API objects are dicts, and the Mapping check is slow.
            if type(value) is not dict and not isinstance(value, Mapping):
                return default
            value = value.get(part)
            if value is None:
                return default
        if type(value) is expected:  # the common case, and never a bool taken for an int
            return value
        if expected is int and isinstance(value, bool):
            raise self.fail(path, f"must be an integer, got {value!r}")
        if expected is str and not isinstance(value, str):
            raise self.fail(path, f"must be a string, got {value!r}")
        if not isinstance(value, expected):
            raise self.fail(path, f"must be {_type_name(expected)}, got {value!r}")
        return value

    def string_map(self, obj: Any, path: str) -> dict[str, str]:
        raw = self.get(obj, path, dict, {})
        out: dict[str, str] = {}
        for key, value in raw.items():
            if not isinstance(value, str):
                raise self.fail(f"{path}.{key}", f"must be a string, got {value!r}")
            out[str(key)] = value
        return out

    def time(self, obj: Any, path: str) -> datetime | None:
        raw = self.get(obj, path, str, "")
        if not raw:
            return None
        try:
            return parse_time(raw)
        except ValueError:
            raise self.fail(path, f"{raw!r} is not an RFC 3339 time") from None

    def resources(self, obj: Any, path: str) -> dict[str, int]:
        raw = self.get(obj, path, dict, {})
        out: dict[str, int] = {}
        for resource, value in raw.items():
            try:
                out[str(resource)] = resource_amount(str(resource), value)
            except QuantityError as err:
                raise self.fail(f"{path}.{resource}", str(err)) from None
        return out

    def items(self, obj: Any, path: str) -> list[Any]:
        return self.get(obj, path, list, [])


def _type_name(expected: type[object]) -> str:
    return {dict: "a mapping", list: "a list", int: "an integer", bool: "true or false"}.get(
        expected, expected.__name__
    )


_RFC3339 = re.compile(
    r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d{1,9})?([Zz]|[+-]\d\d:\d\d)", re.ASCII
)


def parse_time(raw: str) -> datetime:
    """An RFC 3339 time (`2026-11-22T10:00:00Z`): a date, a time and a zone, as the API has
    them (a bare date or a time without zone is refused, as Go's RFC 3339 parser does)."""
    if not _RFC3339.fullmatch(raw):
        raise ValueError(f"{raw!r} is not an RFC 3339 time")
    text = raw.upper().replace("Z", "+00:00")
    if "." in text:  # Python takes at most 6 fractional digits: cut nanoseconds to micro
        text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    return datetime.fromisoformat(text)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_node(obj: Json) -> Node:
    r = _Reader("Node", obj)
    if not r.name:
        raise r.fail("metadata.name", "is required")
    allocatable = r.resources(obj, "status.allocatable") or r.resources(obj, "status.capacity")
    taints = []
    for i, raw in enumerate(r.items(obj, "spec.taints")):
        t = r.at(f"spec.taints[{i}]")
        key = t.get(raw, "key", str, "")
        if not key:
            raise t.fail("key", "is required")
        effect = t.get(raw, "effect", str, "")
        if effect not in _EFFECTS:
            raise t.fail("effect", f"{effect!r} is not one of {', '.join(_EFFECTS)}")
        taints.append(Taint(key=key, value=t.get(raw, "value", str, ""), effect=cast(Any, effect)))
    return Node(
        name=r.name,
        allocatable=allocatable,
        labels=r.string_map(obj, "metadata.labels"),
        taints=tuple(taints),
        unschedulable=r.get(obj, "spec.unschedulable", bool, False),
    )


def _requirements(r: _Reader, raw_list: list[Any], path: str) -> tuple[Requirement, ...]:
    out = []
    for i, raw in enumerate(raw_list):
        q = r.at(f"{path}[{i}]")
        key = q.get(raw, "key", str, "")
        if not key:
            raise q.fail("key", "is required")
        op = q.get(raw, "operator", str, "")
        if op not in _OPERATORS:
            raise q.fail("operator", f"{op!r} is not one of {', '.join(_OPERATORS)}")
        values = tuple(str(v) for v in q.get(raw, "values", list, []))
        if op in ("In", "NotIn") and not values:
            raise q.fail("values", f"must not be empty for operator {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise q.fail("values", f"must be empty for operator {op}")
        if op in ("Gt", "Lt") and (len(values) != 1 or not _is_int(values[0])):
            raise q.fail("values", f"must be one integer for operator {op}")
        out.append(Requirement(key=key, operator=cast(Any, op), values=values))
    return tuple(out)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _node_selector_terms(r: _Reader, spec: Any) -> tuple[NodeSelectorTerm, ...]:
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = r.at("spec").get(spec, path.removeprefix("spec."), dict, {})
    if not required:
        return ()
    terms = []
    for i, raw in enumerate(r.at(path).items(required, "nodeSelectorTerms")):
        where = f"{path}.nodeSelectorTerms[{i}]"
        exprs = _requirements(
            r, r.at(where).items(raw, "matchExpressions"), f"{where}.matchExpressions"
        )
        fields = _requirements(r, r.at(where).items(raw, "matchFields"), f"{where}.matchFields")
        for req in fields:
            if req.key != "metadata.name":
                raise r.fail(f"{where}.matchFields", f"key {req.key!r} must be metadata.name")
        terms.append(NodeSelectorTerm(match_expressions=exprs, match_fields=fields))
    return tuple(terms)


def _tolerations(r: _Reader, spec: Any) -> tuple[Toleration, ...]:
    out = []
    for i, raw in enumerate(r.at("spec").items(spec, "tolerations")):
        t = r.at(f"spec.tolerations[{i}]")
        op = t.get(raw, "operator", str, "Equal")
        if op not in ("Equal", "Exists"):
            raise t.fail("operator", f"{op!r} is not one of Equal, Exists")
        effect = t.get(raw, "effect", str, "")
        if effect and effect not in _EFFECTS:
            raise t.fail("effect", f"{effect!r} is not one of {', '.join(_EFFECTS)}")
        key = t.get(raw, "key", str, "")
        if not key and op != "Exists":
            raise t.fail("operator", "must be Exists when key is empty")
        value = t.get(raw, "value", str, "")
        out.append(Toleration(key=key, operator=cast(Any, op), value=value, effect=effect))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ContainerRequests:
    requests: dict[str, int]
    sidecar: bool = False  # an init container with restartPolicy Always


def _container_requests(r: _Reader, spec: Any, field: str) -> list[ContainerRequests]:
    out = []
    for i, container in enumerate(r.at("spec").items(spec, field)):
        c = r.at(f"spec.{field}[{i}]")
        if not isinstance(container, Mapping):
            raise c.fail("", "must be a mapping")
        requests = _requests_or_limits(c, container, "resources")
        sidecar = False
        if field == "initContainers":
            policy = c.get(container, "restartPolicy", str, "")
            if policy and policy != "Always":
                raise c.fail("restartPolicy", f"{policy!r} is not allowed (only Always, a sidecar)")
            sidecar = policy == "Always"
        out.append(ContainerRequests(requests, sidecar))
    return out


def _requests_or_limits(r: _Reader, obj: Any, path: str) -> dict[str, int]:
    requests = r.resources(obj, f"{path}.requests")
    # As the API server defaults them: limits stand in for requests that are not given.
    for resource, amount in r.resources(obj, f"{path}.limits").items():
        requests.setdefault(resource, amount)
    return requests


def _is_pod_level(resource: str) -> bool:
    return resource in (CPU, MEMORY) or resource.startswith("hugepages-")


def _pod_level_requests(r: _Reader, spec: Any) -> dict[str, int]:
    if spec.get("resources") is None:
        return {}
    requests = _requests_or_limits(r.at("spec"), spec, "resources")
    for resource in requests:
        if not _is_pod_level(resource):
            raise r.fail(
                f"spec.resources.{resource}",
                "is not a pod-level resource (allowed: cpu, memory, hugepages-<size>)",
            )
    return requests


def _add(into: dict[str, int], amounts: dict[str, int]) -> None:
    for resource, amount in amounts.items():
        into[resource] = into.get(resource, 0) + amount


def _max(into: dict[str, int], amounts: dict[str, int]) -> None:
    for resource, amount in amounts.items():
        into[resource] = max(into.get(resource, 0), amount)


def pod_requests(
    containers: list[dict[str, int]],
    init_containers: list[ContainerRequests],
    overhead: dict[str, int],
    pod_level: dict[str, int] | None = None,
) -> dict[str, int]:
    """A pod's requests as kube-scheduler computes them (upstream `PodRequests`).

    Containers are summed. Sidecars (init containers with restartPolicy Always) keep running:
    each adds to that sum and to every init container that starts after it. The result is
    the max of the sum and each init container's peak, pod-level `spec.resources` replaces
    what it names, then overhead is added, plus one `pods` slot.
    """
    total: dict[str, int] = {}
    for requests in containers:
        _add(total, requests)
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in init_containers:
        if init.sidecar:
            _add(total, init.requests)
            _add(sidecars, init.requests)
            _max(init_peak, sidecars)
        else:
            running = dict(init.requests)
            _add(running, sidecars)
            _max(init_peak, running)
    _max(total, init_peak)
    total.update(pod_level or {})
    _add(total, overhead)
    total = {resource: amount for resource, amount in total.items() if amount > 0}
    total[PODS] = 1
    return total


def _scheduling_gates(r: _Reader, spec: Any) -> tuple[str, ...]:
    if not spec.get("schedulingGates"):
        return ()
    names = []
    for i, raw in enumerate(r.at("spec").items(spec, "schedulingGates")):
        name = r.at(f"spec.schedulingGates[{i}]").get(raw, "name", str, "")
        if not name:
            raise r.fail(f"spec.schedulingGates[{i}].name", "is required")
        names.append(name)
    return tuple(names)


def read_conditions(r: _Reader, obj: Json) -> tuple[PodCondition, ...]:
    """`status.conditions` (of a pod, or of an upstream PodGroup: the same fields)."""
    out = []
    for i, raw in enumerate(r.items(obj, "status.conditions")):
        c = r.at(f"status.conditions[{i}]")
        out.append(
            PodCondition(
                type=c.get(raw, "type", str, ""),
                status=c.get(raw, "status", str, ""),
                last_transition_time=c.time(raw, "lastTransitionTime"),
                reason=c.get(raw, "reason", str, ""),
                message=c.get(raw, "message", str, ""),
            )
        )
    return tuple(out)


def _scheduling_group(r: _Reader, obj: Json, spec: Json) -> str:
    """spec.schedulingGroup.podGroupName; naming a group a second way is an error."""
    name = r.at("spec").get(spec, "schedulingGroup.podGroupName", str, "")
    if not name:
        return ""
    annotations = r.string_map(obj, "metadata.annotations")
    labels = r.string_map(obj, "metadata.labels")
    for where, other in (
        (f"annotation {GROUP_ANNOTATION}", annotations.get(GROUP_ANNOTATION)),
        (f"label {GROUP_LABEL}", labels.get(GROUP_LABEL)),
    ):
        if other:
            raise r.fail(
                "spec.schedulingGroup.podGroupName",
                f"names PodGroup {name!r} (scheduling.k8s.io) while the {where} names "
                f"{other!r} (scheduling.x-k8s.io): a pod belongs to one group, named one way",
            )
    return name


def read_pod(obj: Json) -> Pod:
    r = _Reader("Pod", obj)
    r.namespaced()
    if not r.name:
        raise r.fail("metadata.name", "is required")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise r.fail("spec", "is required")
    sp = r.at("spec")
    if not sp.items(spec, "containers"):
        raise r.fail("spec.containers", "must list at least one container")
    requests = pod_requests(
        [c.requests for c in _container_requests(r, spec, "containers")],
        _container_requests(r, spec, "initContainers"),
        sp.resources(spec, "overhead"),
        _pod_level_requests(r, spec),
    )
    policy = sp.get(spec, "preemptionPolicy", str, "")
    if policy and policy not in _PREEMPTION_POLICIES:
        raise r.fail("spec.preemptionPolicy", f"{policy!r} is not one of {_PREEMPTION_POLICIES}")
    priority: int | None = None
    if spec.get("priority") is not None:
        priority = sp.get(spec, "priority", int, 0)
    owners = []
    for i, raw in enumerate(r.items(obj, "metadata.ownerReferences")):
        o = r.at(f"metadata.ownerReferences[{i}]")
        kind = o.get(raw, "kind", str, "")
        name = o.get(raw, "name", str, "")
        if not kind or not name:
            raise o.fail("", "needs kind and name")
        owners.append(
            OwnerReference(
                kind=kind,
                name=name,
                uid=o.get(raw, "uid", str, ""),
                controller=o.get(raw, "controller", bool, False),
            )
        )
    conditions = read_conditions(r, obj)
    grace = sp.get(spec, "terminationGracePeriodSeconds", int, 30)
    return Pod(
        namespace=r.namespace,
        name=r.name,
        uid=r.get(obj, "metadata.uid", str, ""),
        requests=requests,
        scheduler_name=sp.get(spec, "schedulerName", str, ""),
        node_name=sp.get(spec, "nodeName", str, ""),
        phase=r.get(obj, "status.phase", str, "") or "Pending",
        priority=priority,
        priority_class_name=sp.get(spec, "priorityClassName", str, ""),
        preemption_policy=cast(Any, policy or None),
        labels=r.string_map(obj, "metadata.labels"),
        annotations=r.string_map(obj, "metadata.annotations"),
        node_selector=sp.string_map(spec, "nodeSelector"),
        required_terms=_node_selector_terms(r, spec),
        tolerations=_tolerations(r, spec),
        owner_references=tuple(owners),
        conditions=tuple(conditions),
        creation_timestamp=r.time(obj, "metadata.creationTimestamp"),
        start_time=r.time(obj, "status.startTime"),
        deletion_timestamp=r.time(obj, "metadata.deletionTimestamp"),
        nominated_node_name=r.get(obj, "status.nominatedNodeName", str, ""),
        termination_grace_period_seconds=grace,
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
        scheduling_gates=_scheduling_gates(r, spec),
        refused=refused_field(spec),
        scheduling_group=_scheduling_group(r, obj, spec),
    )


def read_priority_class(obj: Json) -> PriorityClass:
    r = _Reader("PriorityClass", obj)
    if not r.name:
        raise r.fail("metadata.name", "is required")
    if obj.get("value") is None:
        raise r.fail("value", "is required")
    value = r.get(obj, "value", int, 0)
    if not INT32_MIN <= value <= INT32_MAX:
        raise r.fail("value", f"{value} is outside the 32-bit integer range")
    policy = r.get(obj, "preemptionPolicy", str, "PreemptLowerPriority")
    if policy not in _PREEMPTION_POLICIES:
        raise r.fail("preemptionPolicy", f"{policy!r} is not one of {_PREEMPTION_POLICIES}")
    return PriorityClass(
        name=r.name,
        value=value,
        global_default=r.get(obj, "globalDefault", bool, False),
        preemption_policy=cast(Any, policy),
        annotations=r.string_map(obj, "metadata.annotations"),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
    )


def read_device_class(obj: Json) -> DeviceClass:
    r = _Reader("DeviceClass", obj)
    if not r.name:
        raise r.fail("metadata.name", "is required")
    return DeviceClass(
        name=r.name,
        extended_resource_name=r.get(obj, "spec.extendedResourceName", str, ""),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
    )


def read_label_selector(r: _Reader, obj: Any, path: str) -> LabelSelector:
    raw = r.get(obj, path, dict, {})
    return LabelSelector(
        match_labels=r.string_map(raw, "matchLabels"),
        match_expressions=_requirements(
            r, r.at(path).items(raw, "matchExpressions"), f"{path}.matchExpressions"
        ),
    )


def read_pdb(obj: Json) -> PodDisruptionBudget:
    r = _Reader("PodDisruptionBudget", obj)
    r.namespaced()
    if not r.name:
        raise r.fail("metadata.name", "is required")
    return PodDisruptionBudget(
        namespace=r.namespace,
        name=r.name,
        selector=read_label_selector(r, obj, "spec.selector"),
        disruptions_allowed=r.get(obj, "status.disruptionsAllowed", int, 0),
    )


def read_pod_group(obj: Json) -> PodGroup:
    r = _Reader("PodGroup", obj)
    r.namespaced()
    if not r.name:
        raise r.fail("metadata.name", "is required")
    if obj.get("spec", {}).get("minMember") is None:
        raise r.fail("spec.minMember", "is required")
    min_member = r.get(obj, "spec.minMember", int, 0)
    if min_member < 1:
        raise r.fail("spec.minMember", f"must be at least 1, got {min_member}")
    timeout = obj.get("spec", {}).get("scheduleTimeoutSeconds")
    status = PodGroupStatus(
        phase=r.get(obj, "status.phase", str, "") or "Pending",
        running=r.get(obj, "status.running", int, 0),
        succeeded=r.get(obj, "status.succeeded", int, 0),
        failed=r.get(obj, "status.failed", int, 0),
        admitted=r.get(obj, "status.admitted", int, 0),
        occupied_by=r.get(obj, "status.occupiedBy", str, ""),
        schedule_start_time=r.time(obj, "status.scheduleStartTime"),
    )
    return PodGroup(
        namespace=r.namespace,
        name=r.name,
        min_member=min_member,
        min_resources=r.resources(obj, "spec.minResources"),
        schedule_timeout_seconds=(
            None if timeout is None else r.get(obj, "spec.scheduleTimeoutSeconds", int, 0)
        ),
        creation_timestamp=r.time(obj, "metadata.creationTimestamp"),
        status=status,
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
    )


def pod_group_status_json(group: PodGroup, status: PodGroupStatus) -> dict[str, Any]:
    """The inverse of the readers' status part: a PodGroup's `status` as its API has it
    (the CRD's phase and counts, or an upstream group's conditions)."""
    if group.upstream:
        return {"conditions": [_condition_json(c) for c in status.conditions]}
    return {
        "phase": status.phase,
        "running": status.running,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "admitted": status.admitted,
        "occupiedBy": status.occupied_by,
        "scheduleStartTime": (
            format_time(status.schedule_start_time)
            if status.schedule_start_time is not None
            else None
        ),
    }


def _condition_json(condition: PodCondition) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
    }
    if condition.last_transition_time is not None:
        out["lastTransitionTime"] = format_time(condition.last_transition_time)
    return out


READERS: dict[str, Callable[[Json], object]] = {
    "Node": read_node,
    "Pod": read_pod,
    "PriorityClass": read_priority_class,
    "PodDisruptionBudget": read_pdb,
    "PodGroup": read_pod_group,
    "DeviceClass": read_device_class,
}
