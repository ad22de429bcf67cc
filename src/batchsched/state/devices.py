"""DRA facts: ResourceSlices per node, ResourceClaims and their templates, devices in use.

Pools follow upstream's rules: only the slices of a pool's newest generation count, and a pool
is complete when all `resourceSliceCount` slices of that generation are known. A device is
local to one node (a slice's or its own `nodeName`) or shared: usable on every node
(`allNodes`) or on the nodes of a selector term; which nodes a term selects is the caller's
to say (`on_node`'s `visible`). A device is in use while a claim's allocation (other than an
admin-access one) names it.

In live mode an allocation made here is assumed (upstream's in-flight allocations and assume
cache): the claim keeps it while the informer still reports the claim unallocated (the PreBind
write is on its way), until a report shows an allocation or the pod's bind fails (`revert`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from batchsched.objects.dra import (
    EXTENDED_CLAIM_SUFFIX,
    Allocation,
    Device,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from batchsched.objects.records import NodeSelectorTerm

# In the change log: devices of shared pools came into use (or were given back), which
# concerns every node.
EVERY_NODE = ""


@dataclass(frozen=True, slots=True)
class NodeDevices:
    devices: tuple[Device, ...]  # of the newest generation of each pool, in a stable order
    incomplete_pools: tuple[str, ...]  # driver/pool of pools missing slices


@dataclass
class DeviceState:
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # by namespace/name
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    # Live mode: a template's claim is the one the resourceclaim controller creates (the
    # pod waits for it), and allocations are assumed until reported. Elsewhere templates are
    # instantiated here and the allocations recorded in `allocated_here`.
    live: bool = False
    # Claims this scheduler allocated, in order: what one-shot reports.
    allocated_here: list[str] = field(default_factory=list)
    # Moves when slices or claims are replaced; between moves, `changed` lists the nodes whose
    # devices came into use (or were given back), in order, so verdicts per node can be kept
    # and refreshed.
    epoch: int = 0
    changed: list[str] = field(default_factory=list)
    _in_use: set[str] | None = None
    _index: _Index | None = None
    # Assumed allocations: claim key -> the claim as last reported (None: in memory only, a
    # claim for extended resources not created yet), and pod key -> the claims allocated for
    # it whose bind is not confirmed.
    _reported: dict[str, ResourceClaim | None] = field(default_factory=dict)
    _assumed_by: dict[str, list[str]] = field(default_factory=dict)

    def upsert_slice(self, resource_slice: ResourceSlice) -> None:
        self.slices[resource_slice.name] = resource_slice
        self._index = None
        self._moved()

    def remove_slice(self, name: str) -> None:
        if self.slices.pop(name, None) is not None:
            self._index = None
            self._moved()

    def upsert_claim(self, claim: ResourceClaim) -> None:
        key = claim.key
        if claim.extended_for and claim.allocation is not None:
            # The claim PreBind created for a pod's extended resources, reported allocated:
            # it takes over from the one assumed in memory.
            made = f"{claim.namespace}/{claim.extended_for}{EXTENDED_CLAIM_SUFFIX}"
            if made in self._reported and self._reported[made] is None:
                del self._reported[made]
                self.claims.pop(made, None)
        if key in self._reported:
            if claim.allocation is None:
                # Our write is not seen yet: the assumed allocation stands.
                self._reported[key] = claim
                assumed = self.claims[key]
                reserved = (
                    *claim.reserved_for,
                    *(p for p in assumed.reserved_for if p not in claim.reserved_for),
                )
                claim = replace(claim, allocation=assumed.allocation, reserved_for=reserved)
            else:
                del self._reported[key]
        self.claims[key] = claim
        self._in_use = None
        self._moved()

    def remove_claim(self, key: str) -> None:
        self._reported.pop(key, None)
        if self.claims.pop(key, None) is not None:
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

    def remove_template(self, key: str) -> None:
        self.templates.pop(key, None)

    def _built(self) -> _Index:
        if self._index is None:
            self._index = _index(self.slices.values())
        return self._index

    def node_terms(self) -> tuple[NodeSelectorTerm, ...]:
        """The selector terms of shared devices, in a stable order (`on_node`'s indexes)."""
        return self._built().terms

    def on_node(self, node: str, visible: frozenset[int] = frozenset()) -> NodeDevices:
        """The devices usable on `node`: its own, every node's, and those of the selector
        terms it matches (`visible`: their indexes in `node_terms()`)."""
        index = self._built()
        if not index.shared:
            return index.local.get(node, _NONE)
        key = (node, visible)
        found = index.combined.get(key)
        if found is None:
            found = index.combined[key] = _combine(index, node, visible)
        return found

    def _wide(self, keys: Iterable[str]) -> bool:
        """Whether the allocations of these claims hold any shared device."""
        shared = self._built().shared_ids
        return bool(shared) and any(
            d.id in shared
            for key in keys
            if (claim := self.claims.get(key)) is not None and claim.allocation is not None
            for d in claim.allocation.devices
        )

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

    def allocate(self, claim: ResourceClaim, allocation: Allocation, pod: str, node: str) -> None:
        """Record an allocation made for `pod` (a pod name in the claim's namespace) on
        `node`, the one node whose devices it uses. The claim may be one made in memory (from
        a template in one-shot, or for extended resources)."""
        key = claim.key
        reported = self.claims.get(key)
        self.claims[key] = replace(claim, allocation=allocation)
        if self._in_use is not None:
            self._in_use.update(d.id for d in allocation.devices if not d.admin_access)
        self.changed.append(EVERY_NODE if self._wide((key,)) else node)
        if self.live:
            self._reported.setdefault(key, reported)
            self._assumed_by.setdefault(f"{claim.namespace}/{pod}", []).append(key)
        else:
            self.allocated_here.append(key)
        self.reserve(key, pod)

    def confirm(self, pod: str) -> None:
        """The pod (namespace/name) is reported bound: its claims' assumptions last until the
        informer reports their allocations."""
        self._assumed_by.pop(pod, None)

    def revert(self, pod: str) -> bool:
        """The pod's PreBind or Binding failed (and was undone): the claims allocated for it
        are as last reported again, their devices free. Whether any came free."""
        freed = False
        for key in self._assumed_by.pop(pod, ()):
            if key in self._reported:  # else reported allocated since: the report stands
                reported = self._reported.pop(key)
                if reported is None:
                    self.claims.pop(key, None)
                else:
                    self.claims[key] = reported
                freed = True
        if freed:
            self._in_use = None
            self._moved()
        return freed

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
        if self._wide(before):
            node = EVERY_NODE
        for key, claim in before.items():
            if claim is None:
                self.claims.pop(key, None)
            else:
                self.claims[key] = claim
            if claim is None or claim.allocation is None:
                self._reported.pop(key, None)  # allocated by this reservation: not assumed
        del self.allocated_here[allocated:]
        self._in_use = None
        self.changed.append(node)

    def pod_gone(
        self, namespace: str, pod: str, named: Iterable[str], owned: Iterable[str], node: str
    ) -> None:
        """As the resourceclaim controller once a pod on `node` is gone: the claims it owned
        (made from its templates, or for its extended resources) are deleted, and it leaves
        the `reservedFor` of the `named` ones, deallocated when no pod is left there."""
        owned, named = list(owned), list(named)
        if self._wide([*owned, *named]):
            node = EVERY_NODE
        for key in owned:
            self.claims.pop(key, None)
        for key in named:
            claim = self.claims.get(key)
            if claim is not None and pod in claim.reserved_for:
                left = tuple(p for p in claim.reserved_for if p != pod)
                allocation = claim.allocation if left else None
                self.claims[key] = replace(claim, allocation=allocation, reserved_for=left)
        self._in_use = None
        self.changed.append(node)

    def held_only_by(self, pods: Iterable[str]) -> list[str]:
        """The allocated claims that only these pods (namespace/name) are reserved for: what
        the resourceclaim controller deallocates once they are gone."""
        if not self.claims:
            return []
        going = set(pods)
        if not going:
            return []
        return [
            key
            for key, claim in self.claims.items()
            if claim.allocation is not None
            and claim.reserved_for
            and all(f"{claim.namespace}/{p}" in going for p in claim.reserved_for)
        ]

    def release(self, keys: Iterable[str], nodes: Iterable[str]) -> list[ResourceClaim]:
        """Show these claims deallocated (their devices free on `nodes`) until `put_back`:
        a preemptor tries the room its victims would leave. The claims as they were."""
        saved = [self.claims[key] for key in keys]
        self._log_freed([c.key for c in saved], nodes)
        for claim in saved:
            self.claims[claim.key] = replace(claim, allocation=None, reserved_for=())
        return saved

    def put_back(self, saved: Iterable[ResourceClaim], nodes: Iterable[str]) -> None:
        """Undo `release`."""
        keys = []
        for claim in saved:
            self.claims[claim.key] = claim
            keys.append(claim.key)
        self._log_freed(keys, nodes)

    def _log_freed(self, keys: list[str], nodes: Iterable[str]) -> None:
        """The devices of these allocated claims change hands on `nodes` (every node for a
        shared device)."""
        if keys:
            self._in_use = None
            self.changed.extend([EVERY_NODE] if self._wide(keys) else nodes)

    def upsert(self, obj: DraObject) -> None:
        if isinstance(obj, ResourceSlice):
            self.upsert_slice(obj)
        elif isinstance(obj, ResourceClaim):
            self.upsert_claim(obj)
        else:
            self.upsert_template(obj)

    def remove(self, kind: str, key: str) -> None:
        if kind == "ResourceSlice":
            self.remove_slice(key)
        elif kind == "ResourceClaim":
            self.remove_claim(key)
        else:
            self.remove_template(key)


DraObject = ResourceSlice | ResourceClaim | ResourceClaimTemplate

_NONE = NodeDevices((), ())

# A device's place in the stable order: driver, pool, slice name, position in the slice.
_Order = tuple[str, str, str, int]


@dataclass
class _Index:
    local: dict[str, NodeDevices]
    # Shared devices with their order, and the index of their term in `terms` (-1: every
    # node); `incomplete` lists the pools (driver/pool) missing slices.
    shared: list[tuple[_Order, Device, int]]
    terms: tuple[NodeSelectorTerm, ...]
    shared_ids: set[str]
    local_order: dict[str, list[tuple[_Order, Device]]]
    local_incomplete: dict[str, set[str]]
    incomplete: set[str]
    combined: dict[tuple[str, frozenset[int]], NodeDevices]


def _index(slices: Iterable[ResourceSlice]) -> _Index:
    newest: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in sorted(slices, key=lambda s: s.name):
        pool = newest.setdefault((s.driver, s.pool), [])
        if pool and pool[0].generation > s.generation:
            continue
        if pool and pool[0].generation < s.generation:
            pool.clear()
        pool.append(s)
    local: dict[str, list[tuple[_Order, Device]]] = {}
    local_incomplete: dict[str, set[str]] = {}
    shared: list[tuple[_Order, Device, int]] = []
    terms: dict[NodeSelectorTerm, int] = {}
    incomplete: set[str] = set()
    for (driver, pool_name), group in sorted(newest.items()):
        pool_id = f"{driver}/{pool_name}"
        if len(group) < group[0].slice_count:
            incomplete.add(pool_id)
            for part in group:
                if part.node_name:  # an empty slice of a node still makes it incomplete there
                    local_incomplete.setdefault(part.node_name, set()).add(pool_id)
        for part in group:
            for position, device in enumerate(part.devices):
                order = (driver, pool_name, part.name, position)
                if device.node_name:
                    local.setdefault(device.node_name, []).append((order, device))
                    if pool_id in incomplete:
                        local_incomplete.setdefault(device.node_name, set()).add(pool_id)
                else:
                    term = device.node_term
                    at = -1 if term is None else terms.setdefault(term, len(terms))
                    shared.append((order, device, at))
    return _Index(
        local={
            node: NodeDevices(
                tuple(d for _, d in found), tuple(sorted(local_incomplete.get(node, ())))
            )
            for node, found in local.items()
        }
        | {
            node: NodeDevices((), tuple(sorted(pools)))
            for node, pools in local_incomplete.items()
            if node not in local
        },
        shared=shared,
        terms=tuple(terms),
        shared_ids={d.id for _, d, _ in shared},
        local_order=local,
        local_incomplete=local_incomplete,
        incomplete=incomplete,
        combined={},
    )


def _combine(index: _Index, node: str, visible: frozenset[int]) -> NodeDevices:
    found = list(index.local_order.get(node, ()))
    found.extend((order, d) for order, d, at in index.shared if at < 0 or at in visible)
    found.sort(key=lambda item: item[0])
    pools = set(index.local_incomplete.get(node, ()))
    pools.update(
        f"{d.driver}/{d.pool}" for _, d in found if f"{d.driver}/{d.pool}" in index.incomplete
    )
    return NodeDevices(tuple(d for _, d in found), tuple(sorted(pools)))
