"""Build records from manifest / API JSON dictionaries.

Each reader names the object (`Kind namespace/name`) and the field in its errors. Unknown
fields are skipped here, as the API server's clients skip them; the file loader warns about
them (schema.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import orjson

from batchsched.objects.errors import ManifestError, shown
from batchsched.objects.numbers import INT32_MAX, INT32_MIN, INT64_MAX, NumberError, integer
from batchsched.objects.pod_volumes import pod_disks, pod_volumes
from batchsched.objects.podgroup import GROUP_ANNOTATION, GROUP_LABEL
from batchsched.objects.quantity import (
    CPU,
    DEFAULT_CPU_REQUEST,
    DEFAULT_MEMORY_REQUEST,
    MEMORY,
    PODS,
    QuantityError,
    resource_amount,
)
from batchsched.objects.records import (
    ANY_HOST_IP,
    AffinityTerm,
    ContainerDevices,
    DeviceClass,
    HostPort,
    LabelSelector,
    Namespace,
    Node,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodAffinity,
    PodClaim,
    PodCondition,
    PodDisruptionBudget,
    PodGroup,
    PodGroupStatus,
    PreemptionPolicy,
    PreferredTerm,
    PriorityClass,
    Requirement,
    Selector,
    SpreadConstraint,
    Taint,
    Toleration,
    may_be_device_backed,
)
from batchsched.objects.runtime_bound import (
    KUEUE_LABEL,
    RUNTIME_ANNOTATION,
    BoundError,
    duration_seconds,
    label_seconds,
)
from batchsched.objects.support import refused_field
from batchsched.objects.system_classes import system_class_error
from batchsched.objects.topology import (
    NO_TOPOLOGY,
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    read_topology,
)
from batchsched.objects.volumes import InlineDisk

Json = Mapping[str, Any]
T = TypeVar("T")

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
# Object names as the API server validates them (apimachinery's IsDNS1123Subdomain / Label).
_DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(?:\.{_DNS1123_LABEL})*")
_LABEL = re.compile(_DNS1123_LABEL)
# Times batchsched can add durations to without leaving Python's datetime range.
_EARLIEST, _LATEST = datetime(1, 1, 2, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC)


@functools.cache
def _parts(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def _walked(obj: Any, path: str) -> str:
    """The part of `path` that leads to the first value that is not a mapping."""
    parts = _parts(path)
    for i, part in enumerate(parts):
        if not isinstance(obj, Mapping):
            return ".".join(parts[:i])
        obj = obj.get(part)
    return path


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
        self.label = kind if not self.name else f"{kind} {_abbreviated(self.name)}"
        self.prefix = ""

    def namespaced(self) -> None:
        name = _abbreviated(self.name) or "?"
        self.label = f"{self.kind} {_abbreviated(self.namespace)}/{name}"

    def require_name(self) -> None:
        """metadata.name (and namespace) present and valid, as the API server requires."""
        if not self.name:
            raise self.fail("metadata.name", "is required")
        if len(self.name) > 253 or not _SUBDOMAIN.fullmatch(self.name):
            raise self.fail(
                "metadata.name",
                "must be a DNS-1123 subdomain (at most 253 characters: lower-case letters, "
                "digits, '-' and '.', starting and ending with a letter or digit)",
            )
        if len(self.namespace) > 63 or not _LABEL.fullmatch(self.namespace):
            raise self.fail(
                "metadata.namespace",
                "must be a DNS-1123 label (at most 63 characters: lower-case letters, digits "
                "and '-', starting and ending with a letter or digit)",
            )

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
                where = _walked(obj, path)
                raise self.fail(where, f"must be a mapping, got {shown(value)}")
            value = value.get(part)
            if value is None:
                return default
        if expected is int:  # ints are range-checked: never a bool, never beyond int64
            try:
                return cast(T, integer(value))
            except NumberError as err:
                raise self.fail(path, str(err)) from None
        if type(value) is expected:  # the common case
            return value
        if not isinstance(value, expected):
            raise self.fail(path, f"must be {_type_name(expected)}, got {shown(value)}")
        return value

    def required_str(self, obj: Any, path: str, message: str = "is required") -> str:
        """A string field that must be present and not empty; `message` says so otherwise."""
        value = self.get(obj, path, str, "")
        if not value:
            raise self.fail(path, message)
        return value

    def choice(
        self,
        obj: Any,
        path: str,
        allowed: Sequence[str],
        default: str = "",
        empty_ok: bool = False,
    ) -> str:
        """A string field that must be one of `allowed`; absent, it is `default`. With
        `empty_ok`, an empty or absent value is kept as "" (the caller's own default)."""
        value = self.get(obj, path, str, default)
        if value not in allowed and not (empty_ok and not value):
            raise self.fail(path, f"{value!r} is not one of {', '.join(allowed)}")
        return value

    def integer(self, obj: Any, path: str, default: int, low: int, high: int) -> int:
        """An integer field within its range (Kubernetes' int32 or int64 fields)."""
        raw: Any = self.get(obj, path, object, None)
        if raw is None:
            return default
        try:
            return integer(raw, low, high)
        except NumberError as err:
            raise self.fail(path, str(err)) from None

    def string_map(self, obj: Any, path: str) -> dict[str, str]:
        raw = self.get(obj, path, dict, {})
        out: dict[str, str] = {}
        for key, value in raw.items():
            if not isinstance(value, str):
                raise self.fail(f"{path}.{key}", f"must be a string, got {shown(value)}")
            out[str(key)] = value
        return out

    def strings(self, obj: Any, path: str) -> tuple[str, ...]:
        """A list of strings (a selector's `values`); a null item reads as "", as the API
        server decodes it into a Go []string."""
        out = []
        for i, value in enumerate(self.get(obj, path, list, [])):
            if value is not None and not isinstance(value, str):
                raise self.fail(f"{path}[{i}]", f"must be a string, got {shown(value)}")
            out.append(value or "")
        return tuple(out)

    def time(self, obj: Any, path: str) -> datetime | None:
        raw = self.get(obj, path, object, "")
        if isinstance(raw, datetime):  # YAML read by another loader: an unquoted timestamp
            raw = format_time(raw if raw.tzinfo else raw.replace(tzinfo=UTC))
        if not isinstance(raw, str):
            raise self.fail(path, f"must be an RFC 3339 time, got {shown(raw)}")
        if not raw:
            return None
        try:
            return parse_time(raw)
        except ValueError as err:
            raise self.fail(path, str(err)) from None

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
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "true or false"}
    return names.get(expected, expected.__name__)


def _abbreviated(name: str) -> str:
    return name if len(name) <= 80 else f"{name[:60]}...({len(name)} characters)"


_RFC3339 = re.compile(
    r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d{1,9})?([Zz]|[+-]\d\d:\d\d)", re.ASCII
)


@functools.lru_cache(maxsize=4096)  # pods made together share their timestamps
def parse_time(raw: str) -> datetime:
    """An RFC 3339 time (`2026-11-22T10:00:00Z`): a date, a time and a zone, as the API has
    them (a bare date or a time without zone is refused, as Go's RFC 3339 parser does),
    between the years 1 and 9000 so that adding a duration to it stays a date."""
    if not _RFC3339.fullmatch(raw):
        raise ValueError(f"{shown(raw)} is not an RFC 3339 time")
    text = raw.upper().replace("Z", "+00:00")
    if "." in text:  # Python takes at most 6 fractional digits: cut nanoseconds to micro
        text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    value = datetime.fromisoformat(text)
    if not _EARLIEST <= value < _LATEST:
        raise ValueError(f"{shown(raw)} is outside the years 1 to 9000")
    return value


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_node(obj: Json) -> Node:
    r = _Reader("Node", obj)
    r.require_name()
    allocatable = r.resources(obj, "status.allocatable") or r.resources(obj, "status.capacity")
    taints = []
    for i, raw in enumerate(r.items(obj, "spec.taints")):
        t = r.at(f"spec.taints[{i}]")
        key = t.required_str(raw, "key")
        effect = t.choice(raw, "effect", _EFFECTS)
        taints.append(Taint(key=key, value=t.get(raw, "value", str, ""), effect=cast(Any, effect)))
    return Node(
        name=r.name,
        allocatable=allocatable,
        labels=r.string_map(obj, "metadata.labels"),
        taints=tuple(taints),
        unschedulable=r.get(obj, "spec.unschedulable", bool, False),
        images=_node_images(r, obj),
    )


def _requirements(r: _Reader, raw_list: list[Any], path: str) -> tuple[Requirement, ...]:
    out = []
    for i, raw in enumerate(raw_list):
        q = r.at(f"{path}[{i}]")
        key = q.required_str(raw, "key")
        op = q.choice(raw, "operator", _OPERATORS)
        values = q.strings(raw, "values")
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


def _required_terms(r: _Reader, affinity: Any, path: str) -> tuple[NodeSelectorTerm, ...]:
    """`requiredDuringSchedulingIgnoredDuringExecution` of a node affinity at `path`."""
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    required = r.at(path).get(affinity, key, dict, {})
    if not required:
        return ()
    terms_path = f"{path}.{key}.nodeSelectorTerms"
    raw_terms = r.at(f"{path}.{key}").items(required, "nodeSelectorTerms")
    return node_selector_terms(r, raw_terms, terms_path)


def node_selector_terms(r: _Reader, raw_list: list[Any], path: str) -> tuple[NodeSelectorTerm, ...]:
    """A list of NodeSelectorTerms (pod node affinity, PersistentVolume node affinity)."""
    return tuple(_selector_term(r, raw, f"{path}[{i}]") for i, raw in enumerate(raw_list))


def read_node_affinity(
    raw: Any, label: str, path: str
) -> tuple[tuple[NodeSelectorTerm, ...], tuple[PreferredTerm, ...]]:
    """A NodeAffinity object outside a pod (NodeAffinityArgs `addedAffinity`): its required
    terms and its preferred ones. Errors name `label` and the field under `path`."""
    r = _Reader(label, {})
    if not isinstance(raw, Mapping):
        raise r.fail(path, "must be a mapping")
    return _required_terms(r, raw, path), preferred_terms(r, raw, path)


def _selector_term(r: _Reader, raw: Any, where: str) -> NodeSelectorTerm:
    if not isinstance(raw, Mapping):
        raise r.fail(where, "must be a mapping")
    exprs = _requirements(
        r, r.at(where).items(raw, "matchExpressions"), f"{where}.matchExpressions"
    )
    fields = _requirements(r, r.at(where).items(raw, "matchFields"), f"{where}.matchFields")
    for req in fields:
        if req.key != "metadata.name":
            raise r.fail(f"{where}.matchFields", f"key {req.key!r} must be metadata.name")
    return NodeSelectorTerm(match_expressions=exprs, match_fields=fields)


def preferred_terms(r: _Reader, affinity: Any, path: str) -> tuple[PreferredTerm, ...]:
    """`preferredDuringSchedulingIgnoredDuringExecution` of a node affinity at `path`; terms
    that select nothing (no expressions or fields) are dropped, as kube-scheduler does."""
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    out = []
    for i, raw in enumerate(r.at(path).items(affinity, key)):
        where = f"{path}.{key}[{i}]"
        weight = r.at(where).integer(raw, "weight", 0, 1, 100)
        if weight < 1:  # absent (it is required)
            raise r.fail(f"{where}.weight", f"must be between 1 and 100, got {weight}")
        term = _selector_term(
            r, r.at(where).get(raw, "preference", dict, {}), f"{where}.preference"
        )
        if term.match_expressions or term.match_fields:
            out.append(PreferredTerm(weight, term))
    return tuple(out)


def _images(r: _Reader, spec: Any) -> tuple[str, ...]:
    """Container images named as node.status.images names them: a missing tag is `latest`."""
    out = []
    for field in ("initContainers", "containers"):
        for i, container in enumerate(r.at("spec").items(spec, field)):
            image = container.get("image")
            if type(image) is not str:  # absent, or wrong: the reader says which
                image = r.at(f"spec.{field}[{i}]").get(container, "image", str, "")
            if image:
                tagged = image.rfind(":") > image.rfind("/")
                out.append(image if tagged else f"{image}:latest")
    return tuple(out)


def _node_images(r: _Reader, obj: Json) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, raw in enumerate(r.items(obj, "status.images")):
        img = r.at(f"status.images[{i}]")
        size = img.integer(raw, "sizeBytes", 0, 0, INT64_MAX)
        for name in img.get(raw, "names", list, []):
            if isinstance(name, str):
                out[name] = size
    return out


def _nonzero(requests: dict[str, int]) -> dict[str, int]:
    """A container's requests as scoring counts them (kube-scheduler's non-zero defaults)."""
    return {CPU: DEFAULT_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST, **requests}


def _plain_toleration(raw: Any) -> Toleration | None:
    """A toleration whose fields are all well-formed strings, read without a field reader
    (every pod carries the API server's two default tolerations); None: let the reader say
    what is wrong."""
    if type(raw) is not dict:
        return None
    key, op, value, effect = (raw.get(f) for f in ("key", "operator", "value", "effect"))
    key = "" if key is None else key
    value = "" if value is None else value
    effect = "" if effect is None else effect
    op = "Equal" if op is None else op
    if not (type(key) is type(value) is type(effect) is str) or op not in ("Equal", "Exists"):
        return None
    if (effect and effect not in _EFFECTS) or (not key and op != "Exists"):
        return None
    return _toleration(key, op, value, effect)


@functools.lru_cache(maxsize=1024)
def _toleration(key: str, op: str, value: str, effect: str) -> Toleration:
    """One shared record per distinct toleration (they are frozen): most pods carry the same
    few."""
    return Toleration(key=key, operator=cast(Any, op), value=value, effect=effect)


def _tolerations(r: _Reader, spec: Any) -> tuple[Toleration, ...]:
    out = []
    for i, raw in enumerate(r.at("spec").items(spec, "tolerations")):
        plain = _plain_toleration(raw)
        if plain is not None:
            out.append(plain)
            continue
        t = r.at(f"spec.tolerations[{i}]")
        op = t.choice(raw, "operator", ("Equal", "Exists"), default="Equal")
        effect = t.choice(raw, "effect", _EFFECTS, empty_ok=True)
        key = t.get(raw, "key", str, "")
        if not key and op != "Exists":
            raise t.fail("operator", "must be Exists when key is empty")
        value = t.get(raw, "value", str, "")
        out.append(Toleration(key=key, operator=cast(Any, op), value=value, effect=effect))
    return tuple(out)


def _host_ports(r: _Reader, spec: Any) -> tuple[HostPort, ...]:
    """Ports bound on the node: those with a hostPort, of the containers and of the
    restartable init containers (sidecars, which run alongside them), as upstream counts."""
    host_network = spec.get("hostNetwork")
    if type(host_network) is not bool:  # absent, or wrong: the reader says which
        host_network = r.at("spec").get(spec, "hostNetwork", bool, False)
    if not any(
        type(c) is not dict or c.get("ports") is not None
        for field in ("initContainers", "containers")
        for c in r.at("spec").items(spec, field)
    ):
        return ()  # the common case: no ports, no reader to make
    out = []
    for field in ("initContainers", "containers"):
        for i, container in enumerate(r.at("spec").items(spec, field)):
            c = r.at(f"spec.{field}[{i}]")
            if not isinstance(container, Mapping):
                raise c.fail("", "must be a mapping")
            if field == "initContainers" and container.get("restartPolicy") != "Always":
                continue
            for j, raw in enumerate(c.items(container, "ports")):
                p = c.at(f"ports[{j}]")
                port = p.get(raw, "hostPort", int, 0)
                if host_network and not port:
                    # The API server sets hostPort to containerPort on the host network.
                    port = p.get(raw, "containerPort", int, 0)
                if not 0 <= port <= 65535:
                    raise p.fail("hostPort", f"must be between 0 and 65535, got {port}")
                if port == 0:
                    continue
                protocol = p.choice(raw, "protocol", _PROTOCOLS, empty_ok=True) or "TCP"
                ip = p.get(raw, "hostIP", str, "") or ANY_HOST_IP
                out.append(HostPort(ip=ip, protocol=protocol, port=port))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ContainerRequests:
    requests: dict[str, int]
    sidecar: bool = False  # an init container with restartPolicy Always
    name: str = ""


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
        out.append(ContainerRequests(requests, sidecar, c.get(container, "name", str, "")))
    return out


def _extended_containers(
    inits: list[ContainerRequests], containers: list[ContainerRequests]
) -> tuple[ContainerDevices, ...]:
    out = []
    for index, c in enumerate([*inits, *containers]):
        if not any("/" in name for name in c.requests):  # cpu, memory and the like
            continue
        amounts = tuple(
            (name, amount)
            for name, amount in sorted(c.requests.items())
            if amount and may_be_device_backed(name)
        )
        if amounts:
            short = index < len(inits) and not c.sidecar
            out.append(ContainerDevices(index, c.name, short, tuple(sorted(c.requests)), amounts))
    return tuple(out)


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
        names.append(r.at(f"spec.schedulingGates[{i}]").required_str(raw, "name"))
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


def owner_references(r: _Reader, obj: Json) -> tuple[OwnerReference, ...]:
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
    return tuple(owners)


@dataclass(frozen=True, slots=True)
class _SpecFields:
    """What a pod's spec, its nodeName aside, makes of the pod: the same for every pod made
    from one template (a Job's, a Deployment's), so it is read once per distinct spec."""

    requests: dict[str, int]
    nonzero_requests: tuple[int, int]
    scheduler_name: str
    priority: int | None
    priority_class_name: str
    preemption_policy: PreemptionPolicy | None
    node_selector: dict[str, str]
    required_terms: tuple[NodeSelectorTerm, ...]
    preferred_terms: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]
    host_ports: tuple[HostPort, ...]
    spread_constraints: tuple[SpreadConstraint, ...]
    pod_affinity: PodAffinity | None
    images: tuple[str, ...]
    termination_grace_period_seconds: int
    scheduling_gates: tuple[str, ...]
    extended_containers: tuple[ContainerDevices, ...]
    refused: str
    disks: tuple[InlineDisk, ...]
    active_deadline_seconds: int | None


def _read_spec(r: _Reader, spec: Any) -> _SpecFields:
    sp = r.at("spec")
    if not sp.items(spec, "containers"):
        raise r.fail("spec.containers", "must list at least one container")
    regular = _container_requests(r, spec, "containers")
    containers = [c.requests for c in regular]
    inits = _container_requests(r, spec, "initContainers")
    overhead = sp.resources(spec, "overhead")
    pod_level = _pod_level_requests(r, spec)
    requests = pod_requests(containers, inits, overhead, pod_level)
    nonzero = pod_requests(
        [_nonzero(c) for c in containers],
        [ContainerRequests(_nonzero(c.requests), c.sidecar) for c in inits],
        overhead,
        pod_level,
    )
    affinity = sp.get(spec, "affinity.nodeAffinity", dict, {})
    policy = sp.choice(spec, "preemptionPolicy", _PREEMPTION_POLICIES, empty_ok=True)
    priority: int | None = None
    if spec.get("priority") is not None:
        priority = sp.integer(spec, "priority", 0, INT32_MIN, INT32_MAX)
    return _SpecFields(
        requests=requests,
        nonzero_requests=(nonzero.get(CPU, 0), nonzero.get(MEMORY, 0)),
        scheduler_name=sp.get(spec, "schedulerName", str, ""),
        priority=priority,
        priority_class_name=sp.get(spec, "priorityClassName", str, ""),
        preemption_policy=cast(PreemptionPolicy, policy) if policy else None,
        node_selector=sp.string_map(spec, "nodeSelector"),
        required_terms=_required_terms(r, affinity, "spec.affinity.nodeAffinity"),
        preferred_terms=preferred_terms(r, affinity, "spec.affinity.nodeAffinity"),
        tolerations=_tolerations(r, spec),
        host_ports=_host_ports(r, spec),
        spread_constraints=read_spread_constraints(sp, spec, "topologySpreadConstraints"),
        pod_affinity=_pod_affinity(sp, spec),
        images=_images(r, spec),
        termination_grace_period_seconds=sp.integer(
            spec, "terminationGracePeriodSeconds", 30, 0, INT64_MAX
        ),
        scheduling_gates=_scheduling_gates(r, spec),
        extended_containers=_extended_containers(inits, regular),
        refused=refused_field(spec),
        disks=pod_disks(r.label, spec),
        active_deadline_seconds=_active_deadline(sp, spec),
    )


def _active_deadline(sp: _Reader, spec: Any) -> int | None:
    seconds = sp.integer(spec, "activeDeadlineSeconds", 0, 1, INT64_MAX)
    return seconds or None


def _stated_runtime(
    r: _Reader, labels: dict[str, str], annotations: dict[str, str]
) -> tuple[int | None, str]:
    """The Kueue label's bound, else the annotation's (docs/backfill.md), None if neither;
    and "" or, for a bad value, the error naming the object and field. The API server does
    not check either: a bad one leaves the object read (a running pod still holds its room)
    and admission keeps the pod pending with the error (scheduling/admission.py)."""
    for where, raw, read in (
        (f"metadata.labels.{KUEUE_LABEL}", labels.get(KUEUE_LABEL), label_seconds),
        (
            f"metadata.annotations.{RUNTIME_ANNOTATION}",
            annotations.get(RUNTIME_ANNOTATION),
            duration_seconds,
        ),
    ):
        if raw is not None:
            try:
                return read(raw), ""
            except BoundError as err:
                return None, str(r.fail(where, str(err)))
    return None, ""


def stated_runtime_of_group(r: _Reader, obj: Json) -> tuple[int | None, str]:
    """A PodGroup's bound (its annotation) for members stating none, and its error."""
    return _stated_runtime(r, {}, r.string_map(obj, "metadata.annotations"))


class _SpecMemo:
    """The fields of up to `size` distinct specs, keyed by the spec's JSON less its nodeName
    (a bound pod's spec is its template's plus that). A pod list of 10,000 pods from a few
    templates is read at about the JSON decoder's pace (docs/live.md, Start-up and pace).
    Only specs read without error are kept: an error names the pod it came from. When full,
    it starts again empty (one rebinding, safe for the informer threads without a lock)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.kept: dict[bytes, _SpecFields] = {}

    def fields(self, r: _Reader, spec: Any) -> _SpecFields:
        keyed = spec
        if "nodeName" in spec:
            keyed = {k: v for k, v in spec.items() if k != "nodeName"}
        try:
            key = orjson.dumps(keyed)
        except TypeError:  # not JSON (a YAML document's own types): read it, keep nothing
            return _read_spec(r, spec)
        kept = self.kept
        found = kept.get(key)
        if found is None:
            found = _read_spec(r, spec)
            if len(kept) >= self.size:
                self.kept = kept = {}
            kept[key] = found
        return found


_SPECS = _SpecMemo(1024)


def read_pod(obj: Json) -> Pod:
    r = _Reader("Pod", obj)
    r.namespaced()
    r.require_name()
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise r.fail("spec", "is required")
    f = _SPECS.fields(r, spec)
    labels = r.string_map(obj, "metadata.labels")
    annotations = r.string_map(obj, "metadata.annotations")
    stated, runtime_error = _stated_runtime(r, labels, annotations)
    return Pod(
        namespace=r.namespace,
        name=r.name,
        uid=r.get(obj, "metadata.uid", str, ""),
        requests=dict(f.requests),  # copies: a pod's dicts are its own
        scheduler_name=f.scheduler_name,
        node_name=r.at("spec").get(spec, "nodeName", str, ""),
        phase=r.get(obj, "status.phase", str, "") or "Pending",
        priority=f.priority,
        priority_class_name=f.priority_class_name,
        preemption_policy=f.preemption_policy,
        labels=labels,
        annotations=annotations,
        node_selector=dict(f.node_selector),
        required_terms=f.required_terms,
        preferred_terms=f.preferred_terms,
        tolerations=f.tolerations,
        host_ports=f.host_ports,
        spread_constraints=f.spread_constraints,
        pod_affinity=f.pod_affinity,
        images=f.images,
        nonzero_requests=f.nonzero_requests,
        owner_references=owner_references(r, obj),
        conditions=read_conditions(r, obj),
        creation_timestamp=r.time(obj, "metadata.creationTimestamp"),
        start_time=r.time(obj, "status.startTime"),
        deletion_timestamp=r.time(obj, "metadata.deletionTimestamp"),
        max_runtime_seconds=f.active_deadline_seconds or stated,
        runtime_enforced=f.active_deadline_seconds is not None,
        runtime_error=runtime_error,
        nominated_node_name=r.get(obj, "status.nominatedNodeName", str, ""),
        termination_grace_period_seconds=f.termination_grace_period_seconds,
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
        scheduling_gates=f.scheduling_gates,
        resource_claims=_pod_claims(r, obj, spec),
        extended_containers=f.extended_containers,
        refused=f.refused,
        scheduling_group=_scheduling_group(r, obj, spec),
        volumes=pod_volumes(r.label, r.name, spec),
        disks=f.disks,
        topology=read_topology(r, obj, upstream=False)
        if REQUIRED_ANNOTATION in annotations or PREFERRED_ANNOTATION in annotations
        else NO_TOPOLOGY,
    )


def read_namespace(obj: Json) -> Namespace:
    r = _Reader("Namespace", obj)
    r.require_name()
    return Namespace(
        name=r.name,
        labels=r.string_map(obj, "metadata.labels"),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
    )


def read_priority_class(obj: Json) -> PriorityClass:
    r = _Reader("PriorityClass", obj)
    r.require_name()
    if obj.get("value") is None:
        raise r.fail("value", "is required")
    value = r.integer(obj, "value", 0, INT32_MIN, INT32_MAX)
    policy = r.choice(obj, "preemptionPolicy", _PREEMPTION_POLICIES, "PreemptLowerPriority")
    global_default = r.get(obj, "globalDefault", bool, False)
    refused = system_class_error(r.name, value, global_default)
    if refused is not None:
        raise r.fail(*refused)
    return PriorityClass(
        name=r.name,
        value=value,
        global_default=global_default,
        preemption_policy=cast(Any, policy),
        annotations=r.string_map(obj, "metadata.annotations"),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
    )


def read_device_class(obj: Json) -> DeviceClass:
    r = _Reader("DeviceClass", obj)
    r.require_name()
    return DeviceClass(
        name=r.name,
        extended_resource_name=r.get(obj, "spec.extendedResourceName", str, ""),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
        selectors=selector_expressions(r.at("spec"), r.get(obj, "spec", dict, {})),
    )


def read_spread_constraints(r: _Reader, obj: Any, path: str) -> tuple[SpreadConstraint, ...]:
    """`topologySpreadConstraints` of a pod, or a PodTopologySpread `defaultConstraints` list
    (which has no labelSelector: the pod's owner stands in)."""
    out = []
    for i, raw in enumerate(r.items(obj, path)):
        c = r.at(f"{path}[{i}]")
        skew = c.integer(raw, "maxSkew", 0, 1, INT32_MAX)
        if skew < 1:  # absent (it is required)
            raise c.fail("maxSkew", f"must be at least 1, got {skew}")
        key = c.required_str(raw, "topologyKey")
        when = c.choice(raw, "whenUnsatisfiable", ("DoNotSchedule", "ScheduleAnyway"))
        min_domains = c.get(raw, "minDomains", int, 1)
        if min_domains < 1:
            raise c.fail("minDomains", f"must be at least 1, got {min_domains}")
        if min_domains > 1 and when != "DoNotSchedule":
            raise c.fail("minDomains", "may be set only with whenUnsatisfiable: DoNotSchedule")
        policies = []
        for field, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            policies.append(c.choice(raw, field, ("Honor", "Ignore"), default) == "Honor")
        keys = c.strings(raw, "matchLabelKeys")
        selector = raw.get("labelSelector") if isinstance(raw, Mapping) else None
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=key,
                hard=when == "DoNotSchedule",
                selector=Selector.of(
                    None if selector is None else read_label_selector(c, raw, "labelSelector")
                ),
                min_domains=min_domains,
                honor_node_affinity=policies[0],
                honor_node_taints=policies[1],
                match_label_keys=keys,
            )
        )
    return tuple(out)


def _affinity_terms(r: _Reader, obj: Any, path: str, weighted: bool) -> tuple[AffinityTerm, ...]:
    out = []
    for i, raw in enumerate(r.items(obj, path)):
        c = r.at(f"{path}[{i}]")
        weight = 0
        if weighted:
            weight = c.integer(raw, "weight", 0, 1, 100)
            if weight < 1:  # absent (it is required)
                raise c.fail("weight", f"must be between 1 and 100, got {weight}")
            raw = c.get(raw, "podAffinityTerm", dict, {})
            c = c.at("podAffinityTerm")
        key = c.required_str(raw, "topologyKey")
        selector = raw.get("labelSelector") if isinstance(raw, Mapping) else None
        ns_selector = raw.get("namespaceSelector") if isinstance(raw, Mapping) else None
        out.append(
            AffinityTerm(
                selector=Selector.of(
                    None if selector is None else read_label_selector(c, raw, "labelSelector")
                ),
                topology_key=key,
                namespaces=c.strings(raw, "namespaces"),
                namespace_selector=None
                if ns_selector is None
                else Selector.of(read_label_selector(c, raw, "namespaceSelector")),
                match_label_keys=c.strings(raw, "matchLabelKeys"),
                mismatch_label_keys=c.strings(raw, "mismatchLabelKeys"),
                weight=weight,
            )
        )
    return tuple(out)


def _pod_affinity(r: _Reader, spec: Any) -> PodAffinity | None:
    """`affinity.podAffinity` and `affinity.podAntiAffinity`, or None when neither has a term."""
    affinity = spec.get("affinity")
    if affinity is None or (
        type(affinity) is dict
        and affinity.get("podAffinity") is None
        and affinity.get("podAntiAffinity") is None
    ):
        return None
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    found = PodAffinity(
        required=_affinity_terms(r, spec, f"affinity.podAffinity.{required}", False),
        preferred=_affinity_terms(r, spec, f"affinity.podAffinity.{preferred}", True),
        required_anti=_affinity_terms(r, spec, f"affinity.podAntiAffinity.{required}", False),
        preferred_anti=_affinity_terms(r, spec, f"affinity.podAntiAffinity.{preferred}", True),
    )
    return found if found != PodAffinity() else None


def read_defaults(raw: list[Any]) -> tuple[SpreadConstraint, ...]:
    """PodTopologySpreadArgs `defaultConstraints`: constraints without a labelSelector."""
    r = _Reader("PodTopologySpreadArgs", {})
    for i, item in enumerate(raw):
        if isinstance(item, Mapping) and "labelSelector" in item:
            raise r.fail(
                f"defaultConstraints[{i}].labelSelector",
                "must not be set: the selector is deduced for each pod",
            )
    return read_spread_constraints(r, {"defaultConstraints": raw}, "defaultConstraints")


def selector_expressions(r: _Reader, obj: Any) -> tuple[str, ...]:
    """The CEL expressions of a `selectors` list (a DeviceClass's or a device request's)."""
    out = []
    for i, raw in enumerate(r.items(obj, "selectors")):
        out.append(r.at(f"selectors[{i}]").required_str(raw, "cel.expression"))
    return tuple(out)


def _pod_claims(r: _Reader, obj: Json, spec: Any) -> tuple[PodClaim, ...]:
    if spec.get("resourceClaims") is None:
        return ()
    generated = {
        r.get(s, "name", str, ""): r.get(s, "resourceClaimName", str, "")
        for s in r.items(obj, "status.resourceClaimStatuses")
    }
    out = []
    for i, raw in enumerate(r.at("spec").items(spec, "resourceClaims")):
        c = r.at(f"spec.resourceClaims[{i}]")
        name = c.required_str(raw, "name")
        claim = c.get(raw, "resourceClaimName", str, "")
        template = c.get(raw, "resourceClaimTemplateName", str, "")
        if bool(claim) == bool(template):
            raise c.fail("", "needs exactly one of resourceClaimName, resourceClaimTemplateName")
        out.append(PodClaim(name, claim, template, generated.get(name, "")))
    return tuple(out)


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
    r.require_name()
    return PodDisruptionBudget(
        namespace=r.namespace,
        name=r.name,
        selector=read_label_selector(r, obj, "spec.selector"),
        disruptions_allowed=r.integer(obj, "status.disruptionsAllowed", 0, 0, INT32_MAX),
    )


def read_pod_group(obj: Json) -> PodGroup:
    r = _Reader("PodGroup", obj)
    r.namespaced()
    r.require_name()
    min_member = r.integer(obj, "spec.minMember", 0, 1, INT32_MAX)
    if min_member == 0:
        raise r.fail("spec.minMember", "is required")
    timeout = r.integer(obj, "spec.scheduleTimeoutSeconds", -1, 0, INT32_MAX)
    bound, runtime_error = stated_runtime_of_group(r, obj)
    status = PodGroupStatus(
        phase=r.get(obj, "status.phase", str, "") or "Pending",
        running=r.integer(obj, "status.running", 0, 0, INT32_MAX),
        succeeded=r.integer(obj, "status.succeeded", 0, 0, INT32_MAX),
        failed=r.integer(obj, "status.failed", 0, 0, INT32_MAX),
        admitted=r.integer(obj, "status.admitted", 0, 0, INT32_MAX),
        occupied_by=r.get(obj, "status.occupiedBy", str, ""),
        schedule_start_time=r.time(obj, "status.scheduleStartTime"),
    )
    return PodGroup(
        namespace=r.namespace,
        name=r.name,
        min_member=min_member,
        min_resources=r.resources(obj, "spec.minResources"),
        schedule_timeout_seconds=None if timeout < 0 else timeout,
        creation_timestamp=r.time(obj, "metadata.creationTimestamp"),
        status=status,
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
        topology=read_topology(r, obj, upstream=False),
        labels=r.string_map(obj, "metadata.labels"),
        max_runtime_seconds=bound,
        runtime_error=runtime_error,
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
