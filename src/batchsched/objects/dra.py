"""DRA objects (`resource.k8s.io/v1`): ResourceSlices, ResourceClaims, ResourceClaimTemplates.

Only what allocation with structured parameters reads: devices with their attributes and
capacity, pools with generations and where their devices may be used (one node, every node, a
node selector, or per device), device requests (`exactly`, `firstAvailable`), constraints, and
a claim's allocation and reservations. A device's CEL view holds capacities and versions as
the tagged values of `objects/cel_values.py`. Fields allocation does not implement are only
detected, so that a device or request using one is never served as if they were absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batchsched.objects.cel_values import quantity_value, semver_value
from batchsched.objects.parse import (
    Json,
    _Reader,
    node_selector_terms,
    owner_references,
    selector_expressions,
)
from batchsched.objects.quantity import QuantityError, parse_quantity
from batchsched.objects.records import NodeSelectorTerm
from batchsched.objects.semver import SemverError, parse_semver

_ALLOCATION_MODES = ("ExactCount", "All")
_ATTRIBUTE_TYPES = ("int", "bool", "string", "version")


# A typed attribute value, as constraints compare them: ("int" | "bool" | "string" |
# "version", value); a version's value is its text without build metadata.
Attribute = tuple[str, object]


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    # What a CEL selector sees as `device` (driver, attributes and capacity by domain).
    view: Mapping[str, Any]
    # (domain, name) -> the typed value, for matchAttribute and distinctAttribute.
    attributes: Mapping[tuple[str, str], Attribute]
    # Where it may be used: the one node named, else the nodes of `node_term`, else (both
    # empty) every node; from its slice, or its own fields under perDeviceNodeSelection.
    node_name: str = ""
    node_term: NodeSelectorTerm | None = None
    # The first field it uses that batchsched does not implement (UNSUPPORTED_DEVICE_FIELDS,
    # or its slice's spec.sharedCounters), else "": such a device is never allocated.
    unsupported: str = ""

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"


# Device fields of partitionable devices, device taints, binding conditions and consumable
# capacity: each changes who may have the device (or how much of it), which allocation
# here does not model, so a device carrying one is left alone rather than handed out.
UNSUPPORTED_DEVICE_FIELDS = (
    "consumesCounters",
    "taints",
    "bindingConditions",
    "bindingFailureConditions",
    "bindsToNode",
    "allowMultipleAllocations",
)
# Request fields (of `exactly` and of a firstAvailable entry) allocation does not honour:
# the key, and the field as a refusal names it.
UNSUPPORTED_REQUEST_FIELDS = (("tolerations", "tolerations"), ("capacity", "capacity.requests"))


def _used(value: Any) -> bool:
    return value is not None and value is not False and value != {} and value != []


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int  # spec.pool.resourceSliceCount: slices that make the pool complete
    node_name: str  # spec.nodeName; "" for the other node selections
    devices: tuple[Device, ...]
    # spec.nodeSelector's one term; None with nodeName, allNodes or perDeviceNodeSelection.
    node_term: NodeSelectorTerm | None = None
    per_device: bool = False  # spec.perDeviceNodeSelection


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str  # "request", or "request/subrequest" for an entry of firstAvailable
    device_class: str
    selectors: tuple[str, ...]
    all: bool  # allocationMode All; otherwise exactly `count` devices
    count: int
    admin_access: bool
    unsupported: str = ""  # the first of UNSUPPORTED_REQUEST_FIELDS it uses, else ""


@dataclass(frozen=True, slots=True)
class Request:
    """A claim's request: one way to satisfy it, or several in order (firstAvailable)."""

    name: str
    alternatives: tuple[DeviceRequest, ...]


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    """constraints[*]: the devices of `requests` (all when empty) share the value of this
    fully qualified attribute (matchAttribute), or each has a different one
    (distinctAttribute)."""

    requests: tuple[str, ...]
    domain: str
    attribute: str
    distinct: bool = False

    def applies(self, request: str) -> bool:
        return not self.requests or any(
            request == r or request.startswith(f"{r}/") for r in self.requests
        )


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class Allocation:
    devices: tuple[AllocatedDevice, ...]
    node_selector: tuple[NodeSelectorTerm, ...]  # empty: usable on every node


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    requests: tuple[Request, ...]
    constraints: tuple[DeviceConstraint, ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()  # pod names (same namespace)
    # The pod a claim for extended resources was made for (the extended-resource-claim
    # annotation and the pod as controlling owner), else "".
    extended_for: str = ""
    # The uid of its controlling owner (ownerReferences with controller: true), None without
    # one: a claim made from a pod's template must be controlled by that pod.
    controller_uid: str | None = None
    deleting: bool = False  # metadata.deletionTimestamp is set

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"
# A pod's claim for extended resources is `<pod><suffix>` until the API server names it
# (`generateName`: the suffix, a dash and random characters).
EXTENDED_CLAIM_SUFFIX = "-extended-resources"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    requests: tuple[Request, ...]
    constraints: tuple[DeviceConstraint, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def allocation_json(allocation: Allocation) -> dict[str, Any]:
    """A claim's `status.allocation` as the API has it."""
    results = [
        {"request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device}
        | ({"adminAccess": True} if d.admin_access else {})
        for d in allocation.devices
    ]
    out: dict[str, Any] = {"devices": {"results": results}}
    if allocation.node_selector:
        out["nodeSelector"] = {
            "nodeSelectorTerms": [
                {
                    kind: [
                        {"key": r.key, "operator": r.operator, "values": list(r.values)}
                        for r in reqs
                    ]
                    for kind, reqs in (
                        ("matchExpressions", term.match_expressions),
                        ("matchFields", term.match_fields),
                    )
                    if reqs
                }
                for term in allocation.node_selector
            ]
        }
    return out


def claim_status_json(claim: ResourceClaim) -> dict[str, Any]:
    """A claim's `status` as the API has it (allocation and pod reservations)."""
    status: dict[str, Any] = {}
    if claim.allocation is not None:
        status["allocation"] = allocation_json(claim.allocation)
    status["reservedFor"] = [{"resource": "pods", "name": name} for name in claim.reserved_for]
    return status


def extended_status_json(claim_name: str, mappings: tuple[tuple[str, str, str], ...]) -> Any:
    """A pod's `status.extendedResourceClaimStatus`: its claim for extended resources and
    which device request serves each container's resource."""
    return {
        "requestMappings": [
            {"containerName": c, "resourceName": r, "requestName": q} for c, r, q in mappings
        ],
        "resourceClaimName": claim_name,
    }


def milli_quantity(value: object) -> int:
    """A quantity in thousandths, rounded up, so CEL compares exact integers."""
    return math.ceil(parse_quantity(value) * 1000)


def _qualified(driver: str, name: str) -> tuple[str, str]:
    """(domain, identifier) of an attribute or capacity name; unqualified names belong to the
    driver's domain, as upstream's CEL environment exposes them."""
    domain, _, ident = name.rpartition("/")
    return (domain or driver, ident)


def _unsupported_device_field(raw: Any) -> str:
    for key in UNSUPPORTED_DEVICE_FIELDS:
        if _used(raw.get(key)):
            return f"devices[].{key}"
    capacity = raw.get("capacity")
    if isinstance(capacity, Mapping) and any(
        isinstance(c, Mapping) and _used(c.get("requestPolicy")) for c in capacity.values()
    ):
        return "devices[].capacity.requestPolicy"
    return ""


def _device(
    r: _Reader, raw: Any, driver: str, pool: str, where: _Where, shared_counters: bool
) -> Device:
    name = r.required_str(raw, "name")
    unsupported = "spec.sharedCounters" if shared_counters else ""
    unsupported = _unsupported_device_field(raw) or unsupported
    attributes: dict[str, dict[str, Any]] = {}
    typed: dict[tuple[str, str], Attribute] = {}
    for key, value in r.get(raw, "attributes", dict, {}).items():
        a = r.at(f"attributes.{key}")
        given = [t for t in _ATTRIBUTE_TYPES if isinstance(value, Mapping) and t in value]
        if len(given) != 1:
            raise a.fail("", f"needs exactly one of {', '.join(_ATTRIBUTE_TYPES)}")
        kind = given[0]
        expected: type = {"int": int, "bool": bool, "string": str, "version": str}[kind]
        domain, ident = _qualified(driver, str(key))
        plain: Any = a.get(value, kind, expected, None)
        seen: object = plain
        if kind == "version":
            try:
                version = parse_semver(str(plain))
            except SemverError as err:
                raise a.fail("version", str(err)) from None
            seen, plain = semver_value(version), version.text()
        attributes.setdefault(domain, {})[ident] = seen
        typed[(domain, ident)] = (kind, plain)
    capacity: dict[str, dict[str, Any]] = {}
    for key, value in r.get(raw, "capacity", dict, {}).items():
        c = r.at(f"capacity.{key}")
        raw_value = value.get("value") if isinstance(value, Mapping) else None
        try:
            amount = milli_quantity(raw_value)
        except QuantityError as err:
            raise c.fail("value", str(err)) from None
        domain, ident = _qualified(driver, str(key))
        capacity.setdefault(domain, {})[ident] = quantity_value(amount)
    if where.per_device:
        where = _node_selection(r, raw, per_slice=False)
    view = {"driver": driver, "attributes": attributes, "capacity": capacity}
    return Device(driver, pool, name, view, typed, where.node_name, where.node_term, unsupported)


@dataclass(frozen=True, slots=True)
class _Where:
    node_name: str = ""
    node_term: NodeSelectorTerm | None = None
    per_device: bool = False


def _node_selection(r: _Reader, obj: Any, per_slice: bool) -> _Where:
    """Where a slice's (or, under perDeviceNodeSelection, a device's) devices may be used:
    exactly one of its node selection fields is set, as the API server validates."""
    node = r.get(obj, "nodeName", str, "")
    selector = r.get(obj, "nodeSelector", dict, {})
    everywhere = r.get(obj, "allNodes", bool, False)
    per_device = per_slice and r.get(obj, "perDeviceNodeSelection", bool, False)
    if sum(map(bool, (node, selector, everywhere, per_device))) != 1:
        fields = "nodeName, nodeSelector, allNodes" + (
            " or perDeviceNodeSelection" if per_slice else " (perDeviceNodeSelection)"
        )
        raise r.fail("", f"needs exactly one of {fields}")
    term = None
    if selector:
        terms = node_selector_terms(
            r,
            r.at("nodeSelector").items(selector, "nodeSelectorTerms"),
            "nodeSelector.nodeSelectorTerms",
        )
        if len(terms) != 1:
            raise r.fail(
                "nodeSelector.nodeSelectorTerms", f"must have exactly 1 term, got {len(terms)}"
            )
        term = terms[0]
    return _Where(node, term, per_device)


def read_resource_slice(obj: Json) -> ResourceSlice:
    r = _Reader("ResourceSlice", obj)
    r.require_name()
    driver = r.required_str(obj, "spec.driver")
    pool = r.required_str(obj, "spec.pool.name")
    where = _node_selection(r.at("spec"), r.get(obj, "spec", dict, {}), per_slice=True)
    count = r.get(obj, "spec.pool.resourceSliceCount", int, 1)
    if count < 1:
        raise r.fail("spec.pool.resourceSliceCount", f"must be at least 1, got {count}")
    # A pool's counters are shared by devices of its other slices too, so a slice that
    # declares them takes its own devices out as well, should it have any.
    shared_counters = _used(r.get(obj, "spec.sharedCounters", list, []))
    devices = tuple(
        _device(r.at(f"spec.devices[{i}]"), raw, driver, pool, where, shared_counters)
        for i, raw in enumerate(r.items(obj, "spec.devices"))
    )
    return ResourceSlice(
        name=r.name,
        driver=driver,
        pool=pool,
        generation=r.get(obj, "spec.pool.generation", int, 0),
        slice_count=count,
        node_name=where.node_name,
        devices=devices,
        node_term=where.node_term,
        per_device=where.per_device,
    )


def _requests(r: _Reader, spec: Any) -> tuple[Request, ...]:
    out = []
    for i, raw in enumerate(r.items(spec, "devices.requests")):
        q = r.at(f"devices.requests[{i}]")
        name = q.required_str(raw, "name")
        exactly = q.get(raw, "exactly", dict, {})
        first = q.items(raw, "firstAvailable")
        if bool(exactly) == bool(first):
            raise q.fail("", "needs exactly one of exactly, firstAvailable")
        if exactly:
            out.append(Request(name, (_device_request(q.at("exactly"), exactly, name, True),)))
            continue
        alternatives = []
        for j, sub in enumerate(first):
            s = q.at(f"firstAvailable[{j}]")
            sub_name = s.required_str(sub, "name")
            alternatives.append(_device_request(s, sub, f"{name}/{sub_name}", False))
        out.append(Request(name, tuple(alternatives)))
    return tuple(out)


def _constraints(
    r: _Reader, spec: Any, requests: tuple[Request, ...]
) -> tuple[DeviceConstraint, ...]:
    names = {req.name for req in requests} | {
        alt.name for req in requests for alt in req.alternatives
    }
    out = []
    for i, raw in enumerate(r.items(spec, "devices.constraints")):
        c = r.at(f"devices.constraints[{i}]")
        given = [k for k in ("matchAttribute", "distinctAttribute") if c.get(raw, k, str, "")]
        if len(given) != 1:
            raise c.fail("", "needs exactly one of matchAttribute, distinctAttribute")
        attribute = c.get(raw, given[0], str, "")
        domain, _, ident = attribute.rpartition("/")
        if not domain:
            raise c.fail(given[0], f"{attribute!r} must be fully qualified (domain/name)")
        listed = tuple(str(n) for n in c.get(raw, "requests", list, []))
        for name in listed:
            if name not in names:
                raise c.fail("requests", f"{name!r} is not a request of this claim")
        out.append(DeviceConstraint(listed, domain, ident, given[0] == "distinctAttribute"))
    return tuple(out)


def _device_request(e: _Reader, exactly: Any, name: str, admin_allowed: bool) -> DeviceRequest:
    device_class = e.required_str(exactly, "deviceClassName")
    mode = e.choice(exactly, "allocationMode", _ALLOCATION_MODES, "ExactCount")
    count = e.get(exactly, "count", int, 1)
    if count < 1:
        raise e.fail("count", f"must be at least 1, got {count}")
    return DeviceRequest(
        name=name,
        device_class=device_class,
        selectors=selector_expressions(e, exactly),
        all=mode == "All",
        count=count,
        admin_access=admin_allowed and e.get(exactly, "adminAccess", bool, False),
        unsupported=next(
            (shown for k, shown in UNSUPPORTED_REQUEST_FIELDS if _used(exactly.get(k))), ""
        ),
    )


def _allocation(r: _Reader, obj: Any) -> Allocation | None:
    raw = r.get(obj, "status.allocation", dict, {})
    if not raw:
        return None
    a = r.at("status.allocation")
    devices = []
    for i, result in enumerate(a.items(raw, "devices.results")):
        d = a.at(f"devices.results[{i}]")
        request, driver, pool, device = (
            d.get(result, k, str, "") for k in ("request", "driver", "pool", "device")
        )
        if not (request and driver and pool and device):
            raise d.fail("", "needs request, driver, pool and device")
        admin = d.get(result, "adminAccess", bool, False)
        devices.append(AllocatedDevice(request, driver, pool, device, admin))
    selector = a.get(raw, "nodeSelector", dict, {})
    terms = (
        node_selector_terms(
            a,
            a.at("nodeSelector").items(selector, "nodeSelectorTerms"),
            "nodeSelector.nodeSelectorTerms",
        )
        if selector
        else ()
    )
    return Allocation(tuple(devices), terms)


def read_resource_claim(obj: Json) -> ResourceClaim:
    r = _Reader("ResourceClaim", obj)
    r.namespaced()
    r.require_name()
    reserved = []
    for i, raw in enumerate(r.items(obj, "status.reservedFor")):
        ref = r.at(f"status.reservedFor[{i}]")
        if ref.get(raw, "resource", str, "") == "pods":
            reserved.append(ref.get(raw, "name", str, ""))
    spec = r.get(obj, "spec", dict, {})
    requests = _requests(r.at("spec"), spec)
    controller = next((o for o in owner_references(r, obj) if o.controller), None)
    extended = r.get(obj, "metadata.annotations", dict, {}).get(EXTENDED_RESOURCE_CLAIM)
    extended_for = (
        controller.name
        if extended == "true" and controller is not None and controller.kind == "Pod"
        else ""
    )
    return ResourceClaim(
        namespace=r.namespace,
        name=r.name,
        requests=requests,
        constraints=_constraints(r.at("spec"), spec, requests),
        allocation=_allocation(r, obj),
        reserved_for=tuple(reserved),
        extended_for=extended_for,
        controller_uid=None if controller is None else controller.uid,
        deleting=bool(r.get(obj, "metadata.deletionTimestamp", str, "")),
    )


def read_resource_claim_template(obj: Json) -> ResourceClaimTemplate:
    r = _Reader("ResourceClaimTemplate", obj)
    r.namespaced()
    r.require_name()
    spec = r.get(obj, "spec.spec", dict, {})
    requests = _requests(r.at("spec.spec"), spec)
    return ResourceClaimTemplate(
        r.namespace, r.name, requests, _constraints(r.at("spec.spec"), spec, requests)
    )
