"""What a scheduling pass decides. Each world applies these its own way (DESIGN.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from batchsched.objects.dra import Allocation, ResourceClaim
from batchsched.objects.records import Node, PodGroupStatus
from batchsched.state.volumes import ClaimBinding


@dataclass(frozen=True, slots=True)
class BindVolumes:
    """VolumeBinding's PreBind: bind each PV to its claim (`volume` set) or ask for the claim
    to be provisioned on the node (`volume` empty), then wait up to `timeout_seconds` for the
    PV controller to finish; undone, and the pod tried again, if it does not. A provisioned
    PV's node affinity is checked then against `node` as it was when the pod was placed
    (translated if its in-tree plugin is in `migrated_plugins`, the node's CSINode's)."""

    bindings: tuple[ClaimBinding, ...]
    timeout_seconds: int
    node: Node | None = field(default=None, compare=False)
    migrated_plugins: frozenset[str] = field(default=frozenset(), compare=False)


@dataclass(frozen=True, slots=True)
class ClaimReservation:
    """One claim of a pod: `allocation` is what this scheduler allocated for it (None: the
    claim was allocated already and the pod only joins its `reservedFor`)."""

    claim: str  # namespace/name
    allocation: Allocation | None


@dataclass(frozen=True, slots=True)
class ExtendedClaimReservation:
    """The claim for the pod's extended resources that DRA serves (KEP-5004): created with
    this spec (named `<pod>-extended-resources-<random>`, the pod its controlling owner),
    allocated, and named in the pod's `status.extendedResourceClaimStatus` with `mappings`
    (container, resource, device request)."""

    claim: ResourceClaim
    allocation: Allocation
    mappings: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class ReserveClaims:
    """DynamicResources' PreBind: write each claim's `status.allocation` (if allocated here)
    and add the pod to its `status.reservedFor`; undone if the Binding fails."""

    claims: tuple[ClaimReservation, ...]
    extended: ExtendedClaimReservation | None = None


def allocated_devices(step: ReserveClaims) -> dict[str, tuple[str, ...]]:
    """Claim (namespace/name) -> the devices (driver/pool/device) this step allocates."""
    out = {c.claim: c.allocation for c in step.claims if c.allocation is not None}
    if step.extended is not None:
        out[step.extended.claim.key] = step.extended.allocation
    return {claim: tuple(d.id for d in a.devices) for claim, a in out.items()}


# What a world carries out before a pod's Binding (upstream's PreBind), one per plugin.
PreBind = BindVolumes | ReserveClaims


@dataclass(frozen=True, slots=True)
class Bind:
    pod: str
    node: str
    pre_bind: tuple[PreBind, ...] = ()


@dataclass(frozen=True, slots=True)
class Evict:
    """Delete a victim (after a DisruptionTarget condition) to make room for `preemptor`."""

    pod: str
    node: str
    preemptor: str
    reason: str
    # A reclaim (docs/queues.md#reclaim): the preemptor's queue and the victim's queue. Not
    # in the repr, which the benchmarks' decision hashes read: the reason names both queues.
    reclaim: tuple[str, str] | None = field(default=None, repr=False)
    # A broken promise (docs/backfill.md#broken-promises): the reservation's holder whose
    # start the victim delayed by running past its stated runtime. Not in the repr either.
    broken_promise: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Nominate:
    """Set (node) or clear (None) a pod's `status.nominatedNodeName`."""

    pod: str
    node: str | None


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """The pod stays pending; `message` is the PodScheduled=False condition's message."""

    pod: str
    message: str


@dataclass(frozen=True, slots=True)
class PodGroupUpdate:
    group: str
    status: PodGroupStatus


@dataclass(frozen=True, slots=True)
class Reserve:
    """A node is held for a pod that may only run there (a DaemonSet pod)."""

    node: str
    pod: str
    since: datetime


@dataclass(frozen=True, slots=True)
class Warn:
    """A problem with an object that the scheduler worked around (e.g. a bad annotation)."""

    obj: str
    message: str


@dataclass(frozen=True, slots=True)
class GroupPlaced:
    """A gang with a topology request was placed: where, for a Normal event on its PodGroup
    (docs/topology.md#seeing-it)."""

    group: str
    message: str


@dataclass(frozen=True, slots=True)
class InternalError:
    """An attempt at `pod` raised: the pass went on without it (it is also Unschedulable).

    `error` is one line (type and message); `detail` the traceback, for the world's log.
    """

    pod: str
    error: str
    detail: str


Decision = (
    Bind
    | Evict
    | Nominate
    | Unschedulable
    | PodGroupUpdate
    | Reserve
    | Warn
    | GroupPlaced
    | InternalError
)
