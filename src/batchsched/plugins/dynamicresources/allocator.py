"""Structured-parameters allocation of a pod's claims on one node (upstream's
k8s.io/dynamic-resource-allocation/structured, `exactly` requests).

Devices are tried in a stable order (driver, pool, slice name, position), so equal inputs give
equal allocations. Without constraints between requests, taking the first matching free
devices for each request in turn is what upstream's backtracking search also finds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from batchsched.objects.dra import AllocatedDevice, Device, DeviceRequest, ResourceClaim
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


def allocate(
    claims: Sequence[ResourceClaim],
    node: NodeDevices,
    in_use: set[str],
    matcher: Matcher,
) -> dict[str, tuple[AllocatedDevice, ...]] | None:
    """Devices for every claim on this node (claim key -> devices), or None if they do not
    all fit. ClaimError when a claim is wrong whatever the node."""
    taken: set[str] = set()
    out: dict[str, tuple[AllocatedDevice, ...]] = {}
    for claim in claims:
        chosen: list[AllocatedDevice] = []
        for request in claim.requests:
            where = f"resourceclaim {claim.key}, request {request.name}"
            expressions = matcher.expressions(claim, request)
            if request.all and node.incomplete_pools:
                return None  # "all" is unknown while a pool is being updated
            found = []
            for device in node.devices:
                busy = (device.id in in_use or device.id in taken) and not request.admin_access
                if busy and not request.all:
                    continue
                if matcher.matches(device, expressions, where):
                    if busy:
                        return None  # "all" includes a device another claim holds
                    found.append(device)
                    if not request.all and len(found) == request.count:
                        break
            if not found or (not request.all and len(found) < request.count):
                return None
            for device in found:
                if not request.admin_access:
                    taken.add(device.id)
                chosen.append(
                    AllocatedDevice(
                        request.name,
                        device.driver,
                        device.pool,
                        device.name,
                        request.admin_access,
                    )
                )
        out[claim.key] = tuple(chosen)
    return out
