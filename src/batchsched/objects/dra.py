"""DRA objects (`resource.k8s.io/v1`): ResourceSlices, ResourceClaims, ResourceClaimTemplates.

Only what allocation with structured parameters reads: devices with their attributes and
capacity, per-node pools with generations, device requests (`exactly`), and a claim's
allocation and reservations. Capacities are kept in thousandths (plugins' CEL quantities).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batchsched.objects.parse import Json, _Reader, node_selector_terms, selector_expressions
from batchsched.objects.quantity import QuantityError, parse_quantity
from batchsched.objects.records import NodeSelectorTerm

_ALLOCATION_MODES = ("ExactCount", "All")
_ATTRIBUTE_TYPES = ("int", "bool", "string", "version")


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    # What a CEL selector sees as `device` (driver, attributes and capacity by domain).
    view: Mapping[str, Any]

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int  # spec.pool.resourceSliceCount: slices that make the pool complete
    node_name: str
    devices: tuple[Device, ...]


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str  # "request", or "request/subrequest" for an entry of firstAvailable
    device_class: str
    selectors: tuple[str, ...]
    all: bool  # allocationMode All; otherwise exactly `count` devices
    count: int
    admin_access: bool


@dataclass(frozen=True, slots=True)
class Request:
    """A claim's request: one way to satisfy it, or several in order (firstAvailable)."""

    name: str
    alternatives: tuple[DeviceRequest, ...]


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """constraints[*].matchAttribute: the devices of `requests` (all when empty) share the
    value of this fully qualified attribute."""

    requests: tuple[str, ...]
    domain: str
    attribute: str

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
    constraints: tuple[MatchAttribute, ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[str, ...] = ()  # pod names (same namespace)
    # The pod a claim for extended resources was made for (the extended-resource-claim
    # annotation and the pod as controlling owner), else "".
    extended_for: str = ""

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
    constraints: tuple[MatchAttribute, ...] = ()

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


def _device(r: _Reader, raw: Any, driver: str, pool: str) -> Device:
    name = r.required_str(raw, "name")
    attributes: dict[str, dict[str, Any]] = {}
    for key, value in r.get(raw, "attributes", dict, {}).items():
        a = r.at(f"attributes.{key}")
        given = [t for t in _ATTRIBUTE_TYPES if isinstance(value, Mapping) and t in value]
        if len(given) != 1:
            raise a.fail("", f"needs exactly one of {', '.join(_ATTRIBUTE_TYPES)}")
        expected: type = {"int": int, "bool": bool, "string": str, "version": str}[given[0]]
        domain, ident = _qualified(driver, str(key))
        attributes.setdefault(domain, {})[ident] = a.get(value, given[0], expected, None)
    capacity: dict[str, dict[str, int]] = {}
    for key, value in r.get(raw, "capacity", dict, {}).items():
        c = r.at(f"capacity.{key}")
        raw_value = value.get("value") if isinstance(value, Mapping) else None
        try:
            amount = milli_quantity(raw_value)
        except QuantityError as err:
            raise c.fail("value", str(err)) from None
        domain, ident = _qualified(driver, str(key))
        capacity.setdefault(domain, {})[ident] = amount
    view = {"driver": driver, "attributes": attributes, "capacity": capacity}
    return Device(driver, pool, name, view)


def read_resource_slice(obj: Json) -> ResourceSlice:
    r = _Reader("ResourceSlice", obj)
    r.require_name()
    driver = r.required_str(obj, "spec.driver")
    pool = r.required_str(obj, "spec.pool.name")
    node = r.required_str(
        obj,
        "spec.nodeName",
        "is required: only per-node slices are supported yet "
        "(not spec.allNodes, spec.nodeSelector or spec.perDeviceNodeSelection)",
    )
    count = r.get(obj, "spec.pool.resourceSliceCount", int, 1)
    if count < 1:
        raise r.fail("spec.pool.resourceSliceCount", f"must be at least 1, got {count}")
    devices = tuple(
        _device(r.at(f"spec.devices[{i}]"), raw, driver, pool)
        for i, raw in enumerate(r.items(obj, "spec.devices"))
    )
    return ResourceSlice(
        name=r.name,
        driver=driver,
        pool=pool,
        generation=r.get(obj, "spec.pool.generation", int, 0),
        slice_count=count,
        node_name=node,
        devices=devices,
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
) -> tuple[MatchAttribute, ...]:
    names = {req.name for req in requests} | {
        alt.name for req in requests for alt in req.alternatives
    }
    out = []
    for i, raw in enumerate(r.items(spec, "devices.constraints")):
        c = r.at(f"devices.constraints[{i}]")
        attribute = c.required_str(
            raw, "matchAttribute", "is required (distinctAttribute is not supported yet)"
        )
        domain, _, ident = attribute.rpartition("/")
        if not domain:
            raise c.fail("matchAttribute", f"{attribute!r} must be fully qualified (domain/name)")
        listed = tuple(str(n) for n in c.get(raw, "requests", list, []))
        for name in listed:
            if name not in names:
                raise c.fail("requests", f"{name!r} is not a request of this claim")
        out.append(MatchAttribute(listed, domain, ident))
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
    extended_for = ""
    if r.get(obj, "metadata.annotations", dict, {}).get(EXTENDED_RESOURCE_CLAIM) == "true":
        for owner in r.items(obj, "metadata.ownerReferences"):
            if (
                isinstance(owner, Mapping)
                and owner.get("kind") == "Pod"
                and owner.get("controller")
            ):
                extended_for = str(owner.get("name", ""))
    return ResourceClaim(
        namespace=r.namespace,
        name=r.name,
        requests=requests,
        constraints=_constraints(r.at("spec"), spec, requests),
        allocation=_allocation(r, obj),
        reserved_for=tuple(reserved),
        extended_for=extended_for,
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
