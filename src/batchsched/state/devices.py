"""DRA facts: ResourceSlices per node, ResourceClaims and their templates, devices in use.

Pools follow upstream's rules: only the slices of a pool's newest generation count, and a pool
is complete when all `resourceSliceCount` slices of that generation are known. A device is in
use while a claim's allocation (other than an admin-access one) names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from batchsched.objects.dra import (
    Allocation,
    Device,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)


@dataclass(frozen=True, slots=True)
class NodeDevices:
    devices: tuple[Device, ...]  # of the newest generation of each pool, in a stable order
    incomplete_pools: tuple[str, ...]  # driver/pool of pools missing slices


@dataclass
class DeviceState:
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # by namespace/name
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    # Whether the world carries out allocations (one-shot does; live mode cannot write a
    # claim's status yet, so pods with claims are refused there: plugins/support.py).
    allocating: bool = False
    # Claims this scheduler allocated, in order: what one-shot reports.
    allocated_here: list[str] = field(default_factory=list)
    # Moves when slices or claims are replaced; between moves, `changed` lists the nodes whose
    # devices came into use (or were given back), in order, so verdicts per node can be kept
    # and refreshed.
    epoch: int = 0
    changed: list[str] = field(default_factory=list)
    _in_use: set[str] | None = None
    _by_node: dict[str, NodeDevices] | None = None

    def upsert_slice(self, resource_slice: ResourceSlice) -> None:
        self.slices[resource_slice.name] = resource_slice
        self._by_node = None
        self._moved()

    def upsert_claim(self, claim: ResourceClaim) -> None:
        self.claims[claim.key] = claim
        self._in_use = None
        self._moved()

    def classes_changed(self) -> None:
        """A DeviceClass was replaced: what its selectors chose may change."""
        self._moved()

    def _moved(self) -> None:
        self.epoch += 1
        self.changed.clear()

    def upsert_template(self, template: ResourceClaimTemplate) -> None:
        self.templates[template.key] = template

    def on_node(self, node: str) -> NodeDevices:
        if self._by_node is None:
            self._by_node = _group_by_node(self.slices.values())
        return self._by_node.get(node, _NONE)

    def in_use(self) -> set[str]:
        if self._in_use is None:
            self._in_use = {
                d.id
                for claim in self.claims.values()
                if claim.allocation is not None
                for d in claim.allocation.devices
                if not d.admin_access
            }
        return self._in_use

    def allocate(self, key: str, allocation: Allocation, pod: str, node: str) -> None:
        """Record an allocation made for `pod` (a pod name in the claim's namespace) on
        `node`, the one node whose devices it uses."""
        claim = self.claims[key]
        self.claims[key] = replace(claim, allocation=allocation)
        if self._in_use is not None:
            self._in_use.update(d.id for d in allocation.devices if not d.admin_access)
        self.changed.append(node)
        self.allocated_here.append(key)
        self.reserve(key, pod)

    def reserve(self, key: str, pod: str) -> None:
        claim = self.claims[key]
        if pod not in claim.reserved_for:
            self.claims[key] = replace(claim, reserved_for=(*claim.reserved_for, pod))

    def restore(
        self, before: Mapping[str, ResourceClaim | None], allocated: int, node: str
    ) -> None:
        """Undo a pod's reservation on `node`: its claims as they were in `before` (None: a
        claim made from a template then, forgotten again), and the allocations reported back
        to the first `allocated`."""
        for key, claim in before.items():
            if claim is None:
                self.claims.pop(key, None)
            else:
                self.claims[key] = claim
        del self.allocated_here[allocated:]
        self._in_use = None
        self.changed.append(node)


_NONE = NodeDevices((), ())


def _group_by_node(slices: Iterable[ResourceSlice]) -> dict[str, NodeDevices]:
    newest: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in sorted(slices, key=lambda s: s.name):
        pool = newest.setdefault((s.driver, s.pool), [])
        if pool and pool[0].generation > s.generation:
            continue
        if pool and pool[0].generation < s.generation:
            pool.clear()
        pool.append(s)
    devices: dict[str, list[Device]] = {}
    incomplete: dict[str, list[str]] = {}
    for (driver, pool_name), group in sorted(newest.items()):
        complete = len(group) >= group[0].slice_count
        for part in group:
            devices.setdefault(part.node_name, []).extend(part.devices)
            if not complete:
                incomplete.setdefault(part.node_name, []).append(f"{driver}/{pool_name}")
    return {
        node: NodeDevices(tuple(found), tuple(sorted(set(incomplete.get(node, ())))))
        for node, found in devices.items()
    }
