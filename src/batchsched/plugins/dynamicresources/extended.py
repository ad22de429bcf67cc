"""Extended resources served by DRA devices (KEP-5004, DeviceClass `extendedResourceName`):
the claim a pod's requests for such a resource become on a node that does not advertise it.

As upstream: the pod gets one claim for all of them, `<pod>-extended-resources` (upstream
creates it with a generated suffix), with a device request per container and resource named
`container-<index>-request-<index>` (the container among initContainers and containers, the
resource among the container's sorted requests). Init containers that run to completion reuse
the devices of the long-lived containers after them, and share the largest request among
themselves. The mappings say which request serves which container's resource
(`status.extendedResourceClaimStatus.requestMappings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from batchsched.objects.dra import EXTENDED_CLAIM_SUFFIX, DeviceRequest, Request, ResourceClaim
from batchsched.objects.records import ContainerDevices, Pod


@dataclass(frozen=True, slots=True)
class RequestMapping:
    container: str
    resource: str
    request: str


@dataclass(frozen=True, slots=True)
class ExtendedClaim:
    claim: ResourceClaim
    mappings: tuple[RequestMapping, ...]


def claim_name(pod: Pod) -> str:
    return f"{pod.name}{EXTENDED_CLAIM_SUFFIX}"


def mapped_requests(pod: Pod, classes: Mapping[str, str]) -> frozenset[str]:
    """The pod's extended resources that a DeviceClass maps."""
    if not classes:
        return frozenset()
    return frozenset(r for r, amount in pod.requests.items() if amount and r in classes)


def extended_claim(
    pod: Pod, resources: Iterable[str], classes: Mapping[str, str]
) -> ExtendedClaim | None:
    """The claim for `resources` (those the node leaves to DRA), or None if there are none."""
    requests: list[DeviceRequest] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        found, mapped = _for_resource(pod.extended_containers, resource, classes[resource])
        requests.extend(found)
        mappings.extend(mapped)
    if not requests:
        return None
    requests.sort(key=lambda r: r.name)
    claim = ResourceClaim(
        pod.namespace, claim_name(pod), tuple(Request(r.name, (r,)) for r in requests)
    )
    return ExtendedClaim(claim, tuple(mappings))


def _request(c: ContainerDevices, resource: str, device_class: str, count: int) -> DeviceRequest:
    name = f"container-{c.index}-request-{c.request_names.index(resource)}"
    return DeviceRequest(name, device_class, (), False, count, False)


def _for_resource(
    containers: tuple[ContainerDevices, ...], resource: str, device_class: str
) -> tuple[list[DeviceRequest], list[RequestMapping]]:
    long_lived: dict[int, DeviceRequest] = {}  # by container index
    long_mappings: list[RequestMapping] = []
    for c in containers:
        amount = dict(c.amounts).get(resource, 0)
        if c.short_lived or not amount:
            continue
        request = _request(c, resource, device_class, amount)
        long_lived[c.index] = request
        long_mappings.append(RequestMapping(c.name, resource, request.name))
    largest: DeviceRequest | None = None
    short_names: set[str] = set()
    short_mappings: list[RequestMapping] = []
    for c in containers:
        amount = dict(c.amounts).get(resource, 0)
        if not c.short_lived or not amount:
            continue
        # The long-lived containers after it (sidecars, the regular ones) hold devices it
        # may use while it runs; it asks only for what they do not cover.
        covered = 0
        own: DeviceRequest | None = None
        for index in sorted(i for i in long_lived if i >= c.index):
            reused = long_lived[index]
            covered += reused.count
            short_mappings.append(RequestMapping(c.name, resource, reused.name))
            if covered >= amount:
                break
        else:
            own = _request(c, resource, device_class, amount - covered)
            short_mappings.append(RequestMapping(c.name, resource, own.name))
        if own is not None:
            short_names.add(own.name)
            if largest is None or largest.count < own.count:
                largest = own
    if largest is not None and len(short_names) > 1:
        # Init containers run one after another: the largest request serves them all.
        short_mappings = [
            RequestMapping(m.container, m.resource, largest.name)
            if m.request in short_names and m.request != largest.name
            else m
            for m in short_mappings
        ]
    requests = ([largest] if largest is not None else []) + [
        long_lived[i] for i in sorted(long_lived)
    ]
    return requests, long_mappings + short_mappings
