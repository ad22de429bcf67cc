"""Typed records for the Kubernetes objects batchsched reads.

Only the fields scheduling needs are kept; everything else in a manifest is ignored. Records
are plain data: the readers in `parse.py` build them, ClusterState indexes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from batchsched.objects.volumes import InlineDisk, PodVolume

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# The condition and reason a scheduler sets on a victim before deleting it (as kube-scheduler
# does; the disruption controller sets a stale one False after two minutes).
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect

    def describe(self) -> str:
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: Literal["Equal", "Exists"]
    value: str
    effect: str  # "" tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement: a label (or `metadata.name` field) test."""

    key: str
    operator: Operator
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[Requirement, ...]
    match_fields: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """A preferred node affinity term: nodes matching `term` score `weight` (1..100)."""

    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class OwnerReference:
    kind: str
    name: str
    uid: str
    controller: bool


ANY_HOST_IP = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port bound on the node (`hostPort` > 0), as NodePorts compares them."""

    ip: str  # ANY_HOST_IP: every address of the node
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """Same port and protocol on the same address, or on every address of either side."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or ANY_HOST_IP in (self.ip, other.ip)


@dataclass(slots=True)
class Node:
    name: str
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    images: dict[str, int] = field(default_factory=dict)  # status.images: each name -> bytes


@dataclass(slots=True)
class PodCondition:
    type: str
    status: str
    last_transition_time: datetime | None
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of a pod's spec.resourceClaims: a claim by name, or by template."""

    name: str
    claim_name: str = ""
    template_name: str = ""
    generated: str = ""  # status.resourceClaimStatuses: the claim made from the template


# Every DeviceClass also answers to this implicit extended resource name (DRA's extended
# resources, KEP-5004): `deviceclass.resource.kubernetes.io/<class name>`.
IMPLICIT_DEVICE_CLASS = "deviceclass.resource.kubernetes.io/"


def may_be_device_backed(resource: str) -> bool:
    """An extended resource (`domain/name` outside kubernetes.io) or a DeviceClass's implicit
    name: what a DeviceClass may serve with DRA devices (upstream IsDRAExtendedResourceName)."""
    domain, slash, _ = resource.partition("/")
    if not slash:
        return False
    outside = not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))
    return outside or resource.startswith(IMPLICIT_DEVICE_CLASS)


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    """A container's requests for resources a DeviceClass may serve (KEP-5004), kept to name
    the device requests as upstream does (by the container's position and the resource's
    position among all its requests)."""

    index: int  # in initContainers followed by containers
    name: str
    short_lived: bool  # an init container that is not a sidecar
    request_names: tuple[str, ...]  # all its requests' resource names, sorted
    amounts: tuple[tuple[str, int], ...]  # the extended ones


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """Where a gang's members may land, by node label key (docs/topology.md): `required`,
    all members in one domain of that key (nodes sharing its value); `preferred`, keys from
    the narrowest to the broadest, as few domains as possible. Empty: anywhere."""

    required: str = ""
    preferred: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred)


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    requests: dict[str, int] = field(default_factory=dict)
    scheduler_name: str = ""
    node_name: str = ""
    phase: str = "Pending"
    priority: int | None = None  # spec.priority; ClusterState resolves a missing one
    priority_class_name: str = ""
    preemption_policy: PreemptionPolicy | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    preferred_terms: tuple[PreferredTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    pod_affinity: PodAffinity | None = None
    images: tuple[str, ...] = ()  # of init containers and containers, as kubelet would pull
    # cpu and memory as scoring counts them: containers that request none count 100m and
    # 200Mi (kube-scheduler's non-zero defaults); None: derive from `requests`.
    nonzero_requests: tuple[int, int] | None = None
    owner_references: tuple[OwnerReference, ...] = ()
    conditions: tuple[PodCondition, ...] = ()
    creation_timestamp: datetime | None = None
    start_time: datetime | None = None
    deletion_timestamp: datetime | None = None
    # Its stated maximum runtime in seconds, None if it states none (objects/runtime_bound.py).
    max_runtime_seconds: int | None = None
    # Whether that bound is spec.activeDeadlineSeconds, which the kubelet enforces (a label or
    # annotation bound is only a promise: docs/backfill.md#broken-promises).
    runtime_enforced: bool = False
    # A bad label or annotation bound: the error naming the pod and field, "" if none; the
    # pod is then kept pending with it (scheduling/admission.py), and states no runtime.
    runtime_error: str = ""
    nominated_node_name: str = ""
    termination_grace_period_seconds: int = 30
    resource_version: str = ""
    scheduling_gates: tuple[str, ...] = ()
    resource_claims: tuple[PodClaim, ...] = ()
    extended_containers: tuple[ContainerDevices, ...] = ()
    # The first field the pod uses that batchsched does not support yet (objects/support.py);
    # admission (scheduling/admission.py) refuses the pod for it.
    refused: str = ""
    scheduling_group: str = ""  # spec.schedulingGroup.podGroupName (scheduling.k8s.io groups)
    volumes: tuple[PodVolume, ...] = ()  # volumes backed by a PersistentVolumeClaim
    disks: tuple[InlineDisk, ...] = ()  # inline iSCSI and RBD volumes
    topology: TopologyRequest = TopologyRequest()  # its own (immutable: one shared default)
    # "namespace/name", made once: it is read millions of times in a long replay, and a pod
    # is never renamed (a new name is a new Pod).
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    @property
    def terminated(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def condition(self, type_: str) -> PodCondition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    def preempted_since(self) -> datetime | None:
        """When a scheduler marked the pod as its preemption victim (DisruptionTarget True,
        reason PreemptionByScheduler): its deletion is on the way. None when it has not."""
        cond = self.condition(DISRUPTION_TARGET)
        if cond is None or cond.status != "True" or cond.reason != PREEMPTION_BY_SCHEDULER:
            return None
        return cond.last_transition_time


@dataclass(slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    annotations: dict[str, str] = field(default_factory=dict)
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DRA DeviceClass: its device selectors and the extended resource it maps."""

    name: str
    extended_resource_name: str = ""
    resource_version: str = ""
    selectors: tuple[str, ...] = ()  # CEL expressions every device of the class satisfies


@dataclass(slots=True)
class LabelSelector:
    match_labels: dict[str, str]
    match_expressions: tuple[Requirement, ...]

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(_label_requirement_holds(req, labels) for req in self.match_expressions)


def _label_requirement_holds(req: Requirement, labels: dict[str, str]) -> bool:
    present = req.key in labels
    if req.operator == "In":
        return present and labels[req.key] in req.values
    if req.operator == "NotIn":
        return not present or labels[req.key] not in req.values
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    return False


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector in a hashable form; `nothing` is a null selector (matches no pod).

    `owner` narrows it to pods with that controller (kind, name): the stand-in for the
    selector of a pod's ReplicaSet or StatefulSet when spread constraints are defaulted.
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()
    nothing: bool = False
    owner: tuple[str, str] | None = None

    @classmethod
    def of(cls, selector: LabelSelector | None) -> Selector:
        if selector is None:
            return cls(nothing=True)
        labels = tuple(sorted(selector.match_labels.items()))
        return cls(labels, selector.match_expressions)

    def matches(self, pod: Pod) -> bool:
        if not self.matches_labels(pod.labels):
            return False
        return self.owner is None or self.owner in controllers_of(pod)

    def matches_labels(self, labels: dict[str, str]) -> bool:
        if self.nothing:
            return False
        if any(labels.get(k) != v for k, v in self.match_labels):
            return False
        return all(_label_requirement_holds(req, labels) for req in self.match_expressions)

    def with_label_keys(
        self, labels: dict[str, str], match: tuple[str, ...], mismatch: tuple[str, ...] = ()
    ) -> Selector:
        """`matchLabelKeys` / `mismatchLabelKeys`: each key the owner carries joins the
        selector as `key In (its value)` / `key NotIn (its value)`."""
        extra = tuple(Requirement(k, "In", (labels[k],)) for k in match if k in labels)
        extra += tuple(Requirement(k, "NotIn", (labels[k],)) for k in mismatch if k in labels)
        if not extra or self.nothing:
            return self
        return Selector(self.match_labels, self.match_expressions + extra, False, self.owner)


def controllers_of(pod: Pod) -> tuple[tuple[str, str], ...]:
    return tuple((ref.kind, ref.name) for ref in pod.owner_references if ref.controller)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One `topologySpreadConstraints` entry (`matchLabelKeys` still to be merged: that
    needs the incoming pod's labels)."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (else ScheduleAnyway)
    selector: Selector
    min_domains: int = 1
    honor_node_affinity: bool = True  # nodeAffinityPolicy: Honor (default) or Ignore
    honor_node_taints: bool = False  # nodeTaintsPolicy: Honor or Ignore (default)
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod (anti-)affinity term as written (`weight` > 0 for preferred terms)."""

    selector: Selector
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: Selector | None = None  # None: not set
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()
    weight: int = 0


@dataclass(frozen=True, slots=True)
class PodAffinity:
    required: tuple[AffinityTerm, ...] = ()
    preferred: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred_anti: tuple[AffinityTerm, ...] = ()

    def label_keys(self) -> set[str]:
        """The pod label keys these terms read (selectors, matchLabelKeys, mismatchLabelKeys):
        pods that differ only in other labels match them alike."""
        keys: set[str] = set()
        for term in (*self.required, *self.preferred, *self.required_anti, *self.preferred_anti):
            keys.update(k for k, _ in term.selector.match_labels)
            keys.update(req.key for req in term.selector.match_expressions)
            keys.update(term.match_label_keys, term.mismatch_label_keys)
        return keys


@dataclass(slots=True)
class Namespace:
    """Read for its labels: pod affinity terms select namespaces by label."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    resource_version: str = ""


@dataclass(slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class PodGroupStatus:
    phase: str = "Pending"
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    admitted: int = 0
    occupied_by: str = ""
    schedule_start_time: datetime | None = None
    # Upstream (scheduling.k8s.io) groups only: PodGroupScheduled / PodGroupInitiallyScheduled
    # and DisruptionTarget, as kube-scheduler writes them.
    conditions: tuple[PodCondition, ...] = ()

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


CRD_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
UPSTREAM_GROUP = "scheduling.k8s.io"


@dataclass(slots=True)
class PodGroup:
    """A gang, whichever API declared it: the scheduler-plugins CRD (`scheduling.x-k8s.io`),
    or upstream's Workload API (`scheduling.k8s.io` v1alpha2 / v1beta1).

    `gang` False is upstream's `basic` policy (members schedule one by one); `disrupt_whole`
    is the victim unit rule (CRD groups and upstream `PodGroup`/`all` mode: the running group
    goes whole or not at all; upstream `Pod`/`single`: members are preempted one by one).
    """

    namespace: str
    name: str
    min_member: int
    min_resources: dict[str, int] = field(default_factory=dict)
    schedule_timeout_seconds: int | None = None
    creation_timestamp: datetime | None = None
    status: PodGroupStatus = field(default_factory=PodGroupStatus)
    resource_version: str = ""
    api_version: str = CRD_API_VERSION
    gang: bool = True
    disrupt_whole: bool = True
    priority: int | None = None  # spec.priority; else priority_class_name's value
    priority_class_name: str = ""
    workload: str = ""  # `workloadName/templateName` of the Workload template it came from
    topology: TopologyRequest = field(default_factory=TopologyRequest)
    labels: dict[str, str] = field(default_factory=dict)  # e.g. its queue (docs/queues.md)
    # Its members' stated maximum runtime, for those stating none (objects/runtime_bound.py).
    max_runtime_seconds: int | None = None
    # A bad annotation bound: the error naming the group and field, "" if none; its pending
    # members are kept pending with it (scheduling/admission.py).
    runtime_error: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def upstream(self) -> bool:
        return self.api_version.startswith(UPSTREAM_GROUP + "/")


@dataclass(slots=True)
class WorkloadTemplate:
    name: str
    gang: bool
    min_member: int
    disrupt_whole: bool
    priority: int | None = None
    priority_class_name: str = ""


@dataclass(slots=True)
class Workload:
    """An upstream Workload (scheduling.k8s.io): the templates its PodGroups are made from."""

    namespace: str
    name: str
    api_version: str
    templates: tuple[WorkloadTemplate, ...] = ()
    controller: str = ""  # `Kind/name` of spec.controllerRef

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
