"""DynamicResources (Filter, Reserve): a node fits when the pod's claims can be allocated
there; the chosen node's allocation is then held, so later pods of the pass see the devices
in use, and given back (Unreserve) when a later step fails or raises.

Name: DynamicResources. Extension points: Filter, Reserve.

A claim already allocated pins the pod to the nodes of its `status.allocation.nodeSelector`;
a claim shared by several pods is allocated once, by the first. Reserve returns the PreBind
step: the claims' allocations and reservations a live world writes before the Binding.

Preemption: "cannot allocate all claims" is resolvable (upstream's is not: v1.36's
DynamicResources has no PreFilter extensions, so its preemption never frees devices). The
rejection's `still_fails` shows the claims only the removed pods are reserved for as
deallocated (`DeviceState.release`, as the resourceclaim controller will once they are gone)
and allocates again on that node; a claim another pod still holds stays allocated.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from batchsched.decisions import ClaimReservation, ExtendedClaimReservation, ReserveClaims
from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    QueueingHint,
    Rejection,
    ReservePlugin,
    StaticFilterPlugin,
    StillFails,
)
from batchsched.objects.dra import (
    EXTENDED_CLAIM_SUFFIX,
    Allocation,
    ResourceClaim,
)
from batchsched.objects.records import Pod
from batchsched.objects.support import unsupported_message
from batchsched.plugins.dynamicresources.allocator import (
    ClaimError,
    Matcher,
    allocate,
    blocking_device,
)
from batchsched.plugins.dynamicresources.extended import extended_claim, mapped_requests
from batchsched.plugins.nodeaffinity.plugin import terms_mask
from batchsched.state.cluster import ClusterState
from batchsched.state.devices import EVERY_NODE, NodeDevices
from batchsched.state.nodes import BoolArray

CANNOT_ALLOCATE = "cannot allocate all claims"
ALLOCATED_ELSEWHERE = "resourceclaim allocated for other nodes"


class DynamicResources(StaticFilterPlugin, ReservePlugin):
    name = "DynamicResources"

    def __init__(self) -> None:
        self._state: ClusterState | None = None
        self._matcher: Matcher | None = None
        self._matcher_epoch = -1
        self._kept: dict[Hashable, _Fits] = {}
        # Which nodes each selector term of shared devices selects, while valid.
        self._term_masks: tuple[tuple[int, int, int], list[BoolArray]] | None = None
        # Per pod reserved and not bound yet: its claims as they were before, how many
        # allocations were reported then, and its node; what `unreserve` puts back.
        self._held: dict[str, tuple[dict[str, ResourceClaim | None], int, str]] = {}

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None] | None:
        # Not static after all: devices come free when claims change (the world deallocates
        # them), or when a pod with claims leaves; slices and classes change what exists.
        return {
            ClusterEvent.NODE: None,
            ClusterEvent.DEVICES: None,
            ClusterEvent.NODE_ROOM: self._pod_with_claims_moved,
        }

    @staticmethod
    def _pod_with_claims_moved(change: ClusterChange, pod: Pod) -> bool:
        return change.pods_where(lambda other: bool(other.resource_claims))

    def attach(self, state: ClusterState) -> None:
        self._state = state

    def shape(self, pod: Pod) -> Hashable | None:
        # Devices change with every allocation: a pod with claims, or asking for a resource a
        # DeviceClass maps, is never cached.
        if pod.resource_claims:
            return None
        if self._state is None:  # not attached: which resources are mapped is unknown
            return None if pod.extended_containers else ()
        classes = self._state.device_class_resources
        return None if classes and mapped_requests(pod, classes) else ()

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        mapped = mapped_requests(pod, state.device_class_resources)
        if not pod.resource_claims and not mapped:
            return []
        nodes = state.nodes.valid[: state.nodes.rows]
        try:
            claims = _claims(state, pod)
            pinned = _pinned(state, claims)
            if not pinned.all():
                rejections = [Rejection(ALLOCATED_ELSEWHERE, nodes & ~pinned, False)]
            else:
                rejections = []
            pending = [c for c in claims if c.allocation is None]
            fits = np.zeros(state.nodes.rows, dtype=np.bool_)
            could = np.zeros(state.nodes.rows, dtype=np.bool_)  # with every device free
            groups: list[tuple[BoolArray, list[ResourceClaim]]] = []
            for resources, rows in _left_to_dra(state, mapped):
                extended = extended_claim(pod, resources, state.device_class_resources)
                wanted = pending + ([extended.claim] if extended is not None else [])
                if not wanted:
                    fits |= rows
                    continue
                groups.append((rows, wanted))
                fits |= rows & self._fits(state, wanted)
            rejected = nodes & pinned & ~fits
            if groups and rejected.any():
                for rows, wanted in groups:
                    could |= rows & self._fits(state, wanted, every_free=True)
                # Only devices in use stand in the way: victims holding them may free them.
                check = self._still_fails(state, groups)
                rejections.append(Rejection(CANNOT_ALLOCATE, rejected & could, True, check))
                hopeless = rejected & ~could
                rejections.extend(self._unsupported(state, groups, hopeless))
                rejections.append(Rejection(CANNOT_ALLOCATE, hopeless, False))
            return rejections
        except ClaimError as err:
            return [Rejection(str(err), nodes.copy(), False)]

    def reserve(self, cycle: Cycle, row: int) -> ReserveClaims | None:
        state, pod = cycle.state, cycle.pod
        mapped = mapped_requests(pod, state.device_class_resources)
        if not pod.resource_claims and not mapped:
            return None
        node = state.nodes.name(row)
        claims = _claims(state, pod)
        pending = [c for c in claims if c.allocation is None]
        resources = frozenset(r for r in mapped if _advertised(state, r, row) == 0)
        extended = extended_claim(pod, resources, state.device_class_resources)
        wanted = pending + ([extended.claim] if extended is not None else [])
        devices = state.devices
        for key in [k for k in self._held if k in state.pods.bound or k not in state.pods.by_key]:
            del self._held[key]  # bound or gone since: nothing of theirs is given back
        before = {c.key: devices.claims.get(c.key) for c in wanted + claims}
        self._held[pod.key] = (before, len(devices.allocated_here), node)
        made: dict[str, Allocation] = {}
        if wanted:
            found = allocate(
                wanted, self._node_devices(state, row), devices.in_use(), self._matcher_for(state)
            )
            # The filter passed this node in this same state, so the allocation exists.
            assert found is not None, f"{pod.key}: claims no longer fit on {node}"
            for claim in wanted:
                made[claim.key] = found[claim.key]
                devices.allocate(claim, made[claim.key], pod.name, node)
        for claim in claims:
            devices.reserve(claim.key, pod.name)
        extra = None
        if extended is not None:
            mappings = tuple((m.container, m.resource, m.request) for m in extended.mappings)
            extra = ExtendedClaimReservation(extended.claim, made[extended.claim.key], mappings)
        if not claims and extra is None:
            return None  # every mapped resource is advertised here: nothing to write
        return ReserveClaims(tuple(ClaimReservation(c.key, made.get(c.key)) for c in claims), extra)

    def forget_pods(self, keys: Collection[str]) -> None:
        for key in keys:
            self._held.pop(key, None)

    def unreserve(self, state: ClusterState, pod: Pod) -> None:
        held = self._held.pop(pod.key, None)
        if held is not None:
            state.devices.restore(*held)

    def _unsupported(
        self,
        state: ClusterState,
        groups: list[tuple[BoolArray, list[ResourceClaim]]],
        hopeless: BoolArray,
    ) -> list[Rejection]:
        """The nodes (taken out of `hopeless`) where the claims fail only because devices
        using unsupported fields are passed over, under a reason naming the field."""
        by_reason: dict[str, BoolArray] = {}
        in_use = state.devices.in_use()
        matcher = self._matcher_for(state)
        for row in np.flatnonzero(hopeless).tolist():
            wanted = next(claims for rows, claims in groups if rows[row])
            node = self._node_devices(state, row)
            device = blocking_device(wanted, node, in_use, matcher)
            if device is not None:
                reason = unsupported_message(f'device "{device.id}"', device.unsupported)
                mask = by_reason.setdefault(reason, np.zeros(state.nodes.rows, dtype=np.bool_))
                mask[row] = True
                hopeless[row] = False
        return [Rejection(reason, mask, False) for reason, mask in sorted(by_reason.items())]

    def _still_fails(
        self, state: ClusterState, groups: list[tuple[BoolArray, list[ResourceClaim]]]
    ) -> StillFails:
        """Whether the claims still cannot be allocated on a node once the `removed` pods
        are gone: the claims only they hold are shown deallocated for the check (`groups`:
        the claims wanted, per the rows that want them)."""

        def still_fails(row: int, removed: Collection[str]) -> bool:
            devices = state.devices
            if not any(_may_hold_claims(state, key) for key in removed):
                return True
            held = devices.held_only_by(removed)
            if not held:
                return True
            nodes = [state.nodes.name(row)]
            released = devices.release(held, nodes)
            try:
                wanted = next(claims for rows, claims in groups if rows[row])
                found = allocate(
                    wanted,
                    self._node_devices(state, row),
                    devices.in_use(),
                    self._matcher_for(state),
                )
                return found is None
            finally:
                devices.put_back(released, nodes)

        return still_fails

    def _fits(
        self, state: ClusterState, pending: list[ResourceClaim], every_free: bool = False
    ) -> BoolArray:
        """The nodes where the pending claims can be allocated (`every_free`: could be, were
        no device in use, which is where preemption may help). Kept per claim spec (pods of
        one template ask alike) and refreshed only on the nodes whose devices came into use
        since, which is one node per pod placed."""
        devices = state.devices
        spec = (every_free, tuple((c.requests, c.constraints) for c in pending))
        stamp = (devices.epoch, state.nodes.generation, state.nodes.rows)
        kept = self._kept.get(spec)
        changed = devices.changed[kept.mark :] if kept is not None and not every_free else []
        if kept is not None and kept.stamp == stamp and EVERY_NODE not in changed:
            rows = {state.nodes.row_of[n] for n in changed}
        else:
            kept = _Fits(stamp, 0, np.zeros(state.nodes.rows, dtype=np.bool_))
            rows = set(np.flatnonzero(state.nodes.valid[: state.nodes.rows]).tolist())
        matcher = self._matcher_for(state)
        in_use = set() if every_free else devices.in_use()
        for row in rows:
            node = self._node_devices(state, row)
            kept.fits[row] = allocate(pending, node, in_use, matcher) is not None
        kept.mark = len(devices.changed)
        if len(self._kept) >= _KEPT_LIMIT:
            self._kept.clear()
        self._kept[spec] = kept
        return kept.fits

    def _node_devices(self, state: ClusterState, row: int) -> NodeDevices:
        """The devices usable on the node of `row`, shared ones by their selector terms."""
        devices = state.devices
        terms = devices.node_terms()
        visible: frozenset[int] = frozenset()
        if terms:
            stamp = (devices.epoch, state.nodes.generation, state.nodes.rows)
            if self._term_masks is None or self._term_masks[0] != stamp:
                self._term_masks = (stamp, [terms_mask(state, (t,)) for t in terms])
            visible = frozenset(i for i, mask in enumerate(self._term_masks[1]) if mask[row])
        return devices.on_node(state.nodes.name(row), visible)

    def _matcher_for(self, state: ClusterState) -> Matcher:
        # Its verdicts hold while no slice, claim or class is replaced.
        if self._matcher is None or self._matcher_epoch != state.devices.epoch:
            self._matcher = Matcher(state.device_classes)
            self._matcher_epoch = state.devices.epoch
        return self._matcher


_KEPT_LIMIT = 1024


@dataclass(slots=True)
class _Fits:
    stamp: tuple[int, int, int]  # device epoch, node generation and rows it is valid for
    mark: int  # how much of the devices' change log it has seen
    fits: BoolArray


def claim_key(pod: Pod, index: int) -> str:
    """The key of the claim behind `pod.resource_claims[index]`: named, or made from a
    template (named as the pod's status says, else `<pod>-<entry>` as one-shot names it)."""
    ref = pod.resource_claims[index]
    if ref.claim_name:
        return f"{pod.namespace}/{ref.claim_name}"
    return f"{pod.namespace}/{ref.generated or f'{pod.name}-{ref.name}'}"


def _may_hold_claims(state: ClusterState, key: str) -> bool:
    """Whether the pod (namespace/name) names claims or has one for extended resources."""
    pod = state.pods.by_key.get(key)
    if pod is None:
        return False
    extended = f"{pod.namespace}/{pod.name}{EXTENDED_CLAIM_SUFFIX}"
    return bool(pod.resource_claims) or extended in state.devices.claims


def _claims(state: ClusterState, pod: Pod) -> list[ResourceClaim]:
    """The pod's claims, once each; a template's claim is instantiated if not yet made."""
    devices = state.devices
    out: dict[str, ResourceClaim] = {}
    for i, ref in enumerate(pod.resource_claims):
        key = claim_key(pod, i)
        claim = devices.claims.get(key)
        if ref.template_name and not ref.generated and devices.live:
            # Upstream's "ResourceClaim not created yet": the resourceclaim controller makes
            # it and names it in the pod's status, which brings the pod back.
            raise ClaimError(
                f"waiting for the resourceclaim controller to create the claim of "
                f"spec.resourceClaims {ref.name} (template {ref.template_name})"
            )
        if claim is None and ref.template_name and not devices.live:
            template = devices.templates.get(f"{pod.namespace}/{ref.template_name}")
            if template is None:
                raise ClaimError(
                    f"resourceclaimtemplate {pod.namespace}/{ref.template_name} does not exist"
                )
            name = key.split("/", 1)[1]
            claim = ResourceClaim(
                pod.namespace,
                name,
                template.requests,
                template.constraints,
                controller_uid=pod.uid,
            )
        if claim is None:
            raise ClaimError(f"resourceclaim {key} does not exist")
        if claim.deleting:
            raise ClaimError(f'resourceclaim "{claim.name}" is being deleted')
        if ref.template_name and claim.controller_uid != pod.uid:
            # Upstream's resourceclaim.IsForPod: a claim of the template's name that the pod
            # does not control is someone else's; the pod waits.
            raise ClaimError(
                f"ResourceClaim {key} was not created for Pod {pod.key} (Pod is not owner)"
            )
        out.setdefault(key, claim)
    return list(out.values())


def _advertised(state: ClusterState, resource: str, row: int) -> int:
    col = state.nodes.resources.get(resource)
    return 0 if col is None else int(state.nodes.allocatable[row, col])


def _left_to_dra(
    state: ClusterState, mapped: frozenset[str]
) -> list[tuple[frozenset[str], BoolArray]]:
    """The nodes grouped by which of the pod's mapped resources they leave to DRA (those
    their allocatable lacks; one advertising a resource serves it through its device
    plugin, checked by NodeResourcesFit)."""
    rows = state.nodes.rows
    if not mapped:
        return [(frozenset(), np.ones(rows, dtype=np.bool_))]
    ordered = sorted(mapped)
    codes = np.zeros(rows, dtype=np.int64)
    for bit, resource in enumerate(ordered):
        col = state.nodes.resources.get(resource)
        if col is None:
            codes |= 1 << bit
        else:
            codes |= (state.nodes.allocatable[:rows, col] == 0).astype(np.int64) << bit
    return [
        (frozenset(r for bit, r in enumerate(ordered) if code >> bit & 1), codes == code)
        for code in np.unique(codes).tolist()
    ]


def _pinned(state: ClusterState, claims: list[ResourceClaim]) -> BoolArray:
    """Nodes every allocated claim may be used on."""
    mask = np.ones(state.nodes.rows, dtype=np.bool_)
    for claim in claims:
        if claim.allocation is not None and claim.allocation.node_selector:
            mask &= terms_mask(state, claim.allocation.node_selector)
    return mask
