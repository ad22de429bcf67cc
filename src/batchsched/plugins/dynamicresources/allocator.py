"""Structured-parameters allocation of a pod's claims on one node (upstream's
k8s.io/dynamic-resource-allocation/structured): `exactly` and `firstAvailable` requests,
`matchAttribute` and `distinctAttribute` constraints, and the node selector each allocation
records (where its devices may be used). A device using a field batchsched does not
implement (`Device.unsupported`) is passed over as if absent; a request using one is refused.

Devices are tried in a stable order (driver, pool, slice name, position), so equal inputs give
equal allocations; the first combination found wins, as upstream's search has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from batchsched.objects.dra import (
    AllocatedDevice,
    Allocation,
    Attribute,
    Device,
    DeviceConstraint,
    DeviceRequest,
    Request,
    ResourceClaim,
)
from batchsched.objects.records import DeviceClass, NodeSelectorTerm, Requirement
from batchsched.objects.support import unsupported_message
from batchsched.plugins.dynamicresources.selectors import CelError, compile_selector
from batchsched.state.devices import NodeDevices


class ClaimError(Exception):
    """A claim that cannot be allocated anywhere as written (upstream's Filter error)."""


@dataclass(slots=True)
class Matcher:
    """Selector verdicts per (expression, device): a device's attributes never change while
    its slice stays, so each pair is evaluated once."""

    classes: Mapping[str, DeviceClass]
    _verdicts: dict[tuple[str, str], bool]

    def __init__(self, classes: Mapping[str, DeviceClass]) -> None:
        self.classes = classes
        self._verdicts = {}

    def expressions(self, claim: ResourceClaim, request: DeviceRequest) -> tuple[str, ...]:
        device_class = self.classes.get(request.device_class)
        if device_class is None:
            raise ClaimError(
                f"resourceclaim {claim.key}, request {request.name}: "
                f"device class {request.device_class} does not exist"
            )
        return (*device_class.selectors, *request.selectors)

    def matches(self, device: Device, expressions: Sequence[str], where: str) -> bool:
        for expression in expressions:
            key = (expression, device.id)
            verdict = self._verdicts.get(key)
            if verdict is None:
                try:
                    verdict = compile_selector(expression).matches(device.view)
                except CelError as err:
                    raise ClaimError(f"{where}: selector {expression!r} {err}") from None
                self._verdicts[key] = verdict
            if not verdict:
                return False
        return True


# Device picks tried per node before giving up on it: the search is exponential in the
# worst case (constraints no combination meets), upstream bounds it by a timeout instead.
STEP_BUDGET = 20_000


def allocate(
    claims: Sequence[ResourceClaim],
    node: NodeDevices,
    in_use: set[str],
    matcher: Matcher,
) -> dict[str, Allocation] | None:
    """An allocation for every claim on this node (by claim key), or None if they do not
    all fit. ClaimError when a claim is wrong whatever the node."""
    for claim in claims:
        for request in claim.requests:
            for alt in request.alternatives:
                if alt.unsupported:
                    subject = f"resourceclaim {claim.key}, request {alt.name}"
                    raise ClaimError(unsupported_message(subject, alt.unsupported))
    search = _Search(node, in_use, matcher, [(c, r) for c in claims for r in c.requests])
    if not search.fill(0):
        return None
    out = {}
    for c in claims:
        chosen = search.chosen.get(c.key, [])
        out[c.key] = Allocation(
            tuple(result for result, _ in chosen), node_selector([d for _, d in chosen])
        )
    return out


def blocking_device(
    claims: Sequence[ResourceClaim],
    node: NodeDevices,
    in_use: set[str],
    matcher: Matcher,
) -> Device | None:
    """A device using an unsupported field that an allocation of the claims on this node
    would take were such devices allocatable, or None (the claims fail without them too,
    or the node has none): what names the field when the pod fails only because of it."""
    if not any(d.unsupported for d in node.devices):
        return None
    search = _Search(node, in_use, matcher, [(c, r) for c in claims for r in c.requests])
    search.lenient = True
    if not search.fill(0):
        return None
    return next((d for chosen in search.chosen.values() for _, d in chosen if d.unsupported), None)


def node_selector(devices: Sequence[Device]) -> tuple[NodeSelectorTerm, ...]:
    """Where an allocation of these devices may be used, as upstream records it: the node of
    any node-local device; else one term with the requirements of the devices' selector
    terms (each once); else nowhere restricted (empty)."""
    fields: list[Requirement] = []
    expressions: list[Requirement] = []
    for device in devices:
        if device.node_name:
            return (
                NodeSelectorTerm((), (Requirement("metadata.name", "In", (device.node_name,)),)),
            )
        if device.node_term is not None:
            _add_new(device.node_term.match_fields, fields)
            _add_new(device.node_term.match_expressions, expressions)
    if fields or expressions:
        return (NodeSelectorTerm(tuple(expressions), tuple(fields)),)
    return ()


def _add_new(requirements: Sequence[Requirement], into: list[Requirement]) -> None:
    for r in requirements:
        if not any(
            o.key == r.key and o.operator == r.operator and set(o.values) == set(r.values)
            for o in into
        ):
            into.append(r)


class _Search:
    """Upstream's allocator: requests in order, each request's alternatives (firstAvailable)
    in order, devices in order; backtrack when a later request or a constraint fails."""

    def __init__(
        self,
        node: NodeDevices,
        in_use: set[str],
        matcher: Matcher,
        slots: list[tuple[ResourceClaim, Request]],
    ) -> None:
        self.node = node
        self.in_use = in_use
        self.matcher = matcher
        self.slots = slots
        self.taken: set[str] = set()
        self.chosen: dict[str, list[tuple[AllocatedDevice, Device]]] = {}
        # (claim key, constraint index) -> the attribute values of the devices chosen under
        # it, in the order chosen.
        self.values: dict[tuple[str, int], list[Attribute]] = {}
        self.steps = 0
        self.lenient = False  # devices with unsupported fields count as allocatable

    def busy(self, device: Device, request: DeviceRequest) -> bool:
        if request.admin_access:
            return False
        return device.id in self.in_use or device.id in self.taken

    def fill(self, index: int) -> bool:
        if index == len(self.slots):
            return True
        claim, request = self.slots[index]
        for alt in request.alternatives:
            where = f"resourceclaim {claim.key}, request {alt.name}"
            expressions = self.matcher.expressions(claim, alt)
            found = [
                d
                for d in self.node.devices
                if (self.lenient or not d.unsupported)
                and self.matcher.matches(d, expressions, where)
            ]
            if alt.all:
                # "All" is unknown while a pool is being updated, and must be free.
                if self.node.incomplete_pools or not found:
                    continue
                if any(self.busy(d, alt) for d in found):
                    continue
                if self.pick(index, claim, alt, found, 0, len(found)):
                    return True
            else:
                free = [d for d in found if not self.busy(d, alt)]
                if self.pick(index, claim, alt, free, 0, alt.count):
                    return True
        return False

    def pick(
        self,
        index: int,
        claim: ResourceClaim,
        request: DeviceRequest,
        free: list[Device],
        start: int,
        left: int,
    ) -> bool:
        """Choose `left` more devices from free[start:], then fill the next requests."""
        if left == 0:
            return self.fill(index + 1)
        for i in range(start, len(free) - left + 1):
            self.steps += 1
            if self.steps > STEP_BUDGET:
                return False
            device = free[i]
            if not self.add(claim, request, device):
                continue
            if self.pick(index, claim, request, free, i + 1, left - 1):
                return True
            self.remove(claim, request, device)
        return False

    def add(self, claim: ResourceClaim, request: DeviceRequest, device: Device) -> bool:
        held: list[tuple[list[Attribute], Attribute]] = []
        for n, constraint in enumerate(claim.constraints):
            if not constraint.applies(request.name):
                continue
            value = device.attributes.get((constraint.domain, constraint.attribute))
            values = self.values.setdefault((claim.key, n), [])
            if value is None or not _admits(constraint, values, value):
                return False
            held.append((values, value))
        for values, value in held:
            values.append(value)
        if not request.admin_access:
            self.taken.add(device.id)
        result = AllocatedDevice(
            request.name, device.driver, device.pool, device.name, request.admin_access
        )
        self.chosen.setdefault(claim.key, []).append((result, device))
        return True

    def remove(self, claim: ResourceClaim, request: DeviceRequest, device: Device) -> None:
        for n, constraint in enumerate(claim.constraints):
            if constraint.applies(request.name):
                self.values[(claim.key, n)].pop()
        self.taken.discard(device.id)
        self.chosen[claim.key].pop()


def _admits(constraint: DeviceConstraint, values: list[Attribute], value: Attribute) -> bool:
    """Whether a device with this attribute value may join the devices holding `values`.
    matchAttribute: the same type and value as the first. distinctAttribute: a value none
    of them has; as upstream, the first held value of another type ends the comparison."""
    if not constraint.distinct:
        return not values or values[0] == value
    for held in values:
        if held[0] != value[0]:
            return True
        if held == value:
            return False
    return True
