"""Structured-parameters allocation of a pod's claims on one node (upstream's
k8s.io/dynamic-resource-allocation/structured): `exactly` and `firstAvailable` requests,
`matchAttribute` constraints.

Devices are tried in a stable order (driver, pool, slice name, position), so equal inputs give
equal allocations; the first combination found wins, as upstream's search has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from batchsched.objects.dra import (
    AllocatedDevice,
    Device,
    DeviceRequest,
    Request,
    ResourceClaim,
)
from batchsched.objects.records import DeviceClass
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
) -> dict[str, tuple[AllocatedDevice, ...]] | None:
    """Devices for every claim on this node (claim key -> devices), or None if they do not
    all fit. ClaimError when a claim is wrong whatever the node."""
    search = _Search(node, in_use, matcher, [(c, r) for c in claims for r in c.requests])
    if not search.fill(0):
        return None
    return {c.key: tuple(search.chosen.get(c.key, ())) for c in claims}


_MISSING = object()


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
        self.chosen: dict[str, list[AllocatedDevice]] = {}
        # (claim key, constraint index) -> the attribute value its devices share, and how
        # many chosen devices hold it.
        self.values: dict[tuple[str, int], tuple[object, int]] = {}
        self.steps = 0

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
            found = [d for d in self.node.devices if self.matcher.matches(d, expressions, where)]
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
        attributes = device.view["attributes"]
        for n, constraint in enumerate(claim.constraints):
            if not constraint.applies(request.name):
                continue
            value = attributes.get(constraint.domain, {}).get(constraint.attribute, _MISSING)
            held = self.values.get((claim.key, n))
            if value is _MISSING or (held is not None and held[0] != value):
                return False
        for n, constraint in enumerate(claim.constraints):
            if constraint.applies(request.name):
                value = attributes[constraint.domain][constraint.attribute]
                held = self.values.get((claim.key, n))
                self.values[(claim.key, n)] = (value, 1 if held is None else held[1] + 1)
        if not request.admin_access:
            self.taken.add(device.id)
        self.chosen.setdefault(claim.key, []).append(
            AllocatedDevice(
                request.name, device.driver, device.pool, device.name, request.admin_access
            )
        )
        return True

    def remove(self, claim: ResourceClaim, request: DeviceRequest, device: Device) -> None:
        for n, constraint in enumerate(claim.constraints):
            if constraint.applies(request.name):
                value, refs = self.values[(claim.key, n)]
                if refs == 1:
                    del self.values[(claim.key, n)]
                else:
                    self.values[(claim.key, n)] = (value, refs - 1)
        self.taken.discard(device.id)
        self.chosen[claim.key].pop()
