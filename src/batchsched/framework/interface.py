"""The plugin framework: extension points after kube-scheduler's, vectorised over nodes.

A Filter plugin looks at every candidate node at once and returns Rejections (a reason and the
nodes it applies to); a Score plugin returns one integer score (0..100) per feasible node.
Statuses say whether removing pods could help (`resolvable`), which is what PostFilter
(preemption) needs to know.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from batchsched.decisions import Decision, Evict, PreBind
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.resources import Demand
from batchsched.state.topology import DomainPreemption, DomainSearch

IndexArray = npt.NDArray[np.intp]
# For a rejection that removing particular pods can lift (a port or anti-affinity clash, a
# spread skew): whether node `row` still fails once the pods keyed in `removed` are gone.
StillFails = Callable[[int, Collection[str]], bool]
# Cycle.scratch key: checks (StillFails) a filter passed but that victims could break (the pod's
# required affinity to pods that might be taken); preemption keeps every one of them holding.
PREEMPTION_GUARDS = "preemption.guards"
# Cycle.scratch key: in a group's tentative placement (all or none kept), the members placed
# before this one in the same attempt (a tuple of Pods): a pre-filter that counts a group's
# members together (the Queues limits, docs/queues.md#admission) counts them as in use.
GROUP_PLACED = "group.placed"
# How a plugin orders the nodes preemption finds equally good by kube-scheduler's criteria
# down to the number of victims (as upstream's preemption `OrderedScoreFuncs` may): a key for
# a node row and the victims there, smaller first; the victims' start times, then the node
# names, break the ties left (docs/backfill.md#preemption-takes-the-least-room).
PreemptionTieBreak = Callable[[int, Sequence[Pod]], float]
# Cycle.scratch key: the PreemptionTieBreak the profile's plugins give the pod, if any.
PREEMPTION_TIE_BREAK = "preemption.tie_break"
MAX_NODE_SCORE = 100


@dataclass(slots=True)
class Cycle:
    """One scheduling attempt of one pod: the facts every plugin reads."""

    state: ClusterState
    pod: Pod
    now: datetime
    demand: Demand
    free: IntArray  # room per node as this pod sees it (nominations of others counted)
    scratch: dict[str, Any] = field(default_factory=dict)
    # Seconds since the epoch: the answer of this attempt holds, while the cluster stays as
    # it is, at every time before this one (`changes_at`).
    holds_until: float = math.inf
    # `free` is `state.free_for(pod)` as made for this attempt, unchanged (a plugin that
    # changes it clears this): room that differs from another such pod's of the same
    # priority, neither nominated, only on rows the state's log names.
    own_room: bool = False

    @property
    def priority(self) -> int:
        return self.pod.priority or 0

    @property
    def plain_room(self) -> bool:
        """`free` is `free_for` a pod without a nomination of its own, unchanged: it differs
        from another such room of the same priority only on rows the state's log names."""
        return self.own_room and self.pod.key not in self.state.nominations

    def changes_at(self, when: float) -> None:
        """A plugin whose answer reads the clock (a toleration running out, a backoff or a
        reservation ending) says when that answer may change with the cluster unchanged:
        the scheduler tells a twin of a failed pod the same answer only before then."""
        self.holds_until = min(self.holds_until, when)


@dataclass(frozen=True, slots=True)
class Rejection:
    reason: str
    nodes: BoolArray
    resolvable: bool  # could preemption (removing pods) make these nodes fit?
    # Set when the clash is with particular pods (not room): preemption must remove them.
    still_fails: StillFails | None = None


@dataclass(slots=True)
class Diagnosis:
    """Why a pod fits nowhere: counts per reason, and which nodes preemption could fix."""

    node_count: int
    reason_counts: dict[str, int]
    resolvable: BoolArray  # nodes whose only failures are resolvable
    pre_filter_message: str = ""
    rejected_by: frozenset[str] = frozenset()  # names of the filters that rejected a node
    # Resolvable nodes that failed for a clash with particular pods, with the check that
    # says whether a set of victims lifts it (Rejection.still_fails).
    clashes: list[tuple[BoolArray, StillFails]] = field(default_factory=list)

    def clash_check(self, row: int) -> StillFails | None:
        """Every clash on `row` at once: it still fails while any of them does."""
        checks = [check for nodes, check in self.clashes if nodes[row]]
        if not checks:
            return None
        return lambda r, removed: any(check(r, removed) for check in checks)

    def message(self) -> str:
        if self.pre_filter_message:
            return self.pre_filter_message
        parts = sorted(f"{count} {reason}" for reason, count in self.reason_counts.items())
        detail = ": " + ", ".join(parts) if parts else ""
        return f"0/{self.node_count} nodes are available{detail}."


@dataclass(slots=True)
class PreFilterResult:
    """A pre-filter's verdict: None fields mean 'no objection'."""

    reject: str | None = None  # message; the pod stays pending, preemption is not tried
    allowed_nodes: BoolArray | None = None
    by: frozenset[str] = frozenset()  # the plugins that rejected or restricted the pod


@dataclass(slots=True)
class PostFilterResult:
    nominated_node: str | None = None
    decisions: list[Decision] = field(default_factory=list)
    message: str = ""  # appended to the pod's message, e.g. "preemption: 0/5 nodes ..."
    # When trying again may give another answer although the cluster has not changed (e.g. a
    # DaemonSet pod's reservation comes of age): the queue wakes the pod then.
    retry_at: datetime | None = None
    by: frozenset[str] = frozenset()  # the plugins that looked at the pod and found no way


class ClusterEvent(Enum):
    """What changed in the cluster, as queueing hints see it (upstream's ClusterEvent)."""

    NODE = "Node"  # a node was added or removed, or its labels, taints or cordon changed
    NODE_ROOM = "NodeRoom"  # room on some nodes changed: pods, allocatable, nominations
    POLICY = "Policy"  # a PriorityClass or PodDisruptionBudget changed
    POD_GROUP = "PodGroup"  # a PodGroup, or which pods are its members or bound, changed
    VOLUME = "Volume"  # a PersistentVolumeClaim, PersistentVolume, StorageClass or CSINode
    DEVICES = "Devices"  # a ResourceSlice, ResourceClaim or DeviceClass
    NAMESPACE = "Namespace"  # a Namespace (its labels, which affinity terms select by)
    # Anything that may let a waiting pod fit (the state's generation moved): pods leaving,
    # PodGroups, and all of the above; for rules that read more than one kind of object.
    ANY = "Any"


@dataclass(slots=True)
class ClusterChange:
    """The changes since a pod was last found unschedulable."""

    state: ClusterState
    events: frozenset[ClusterEvent]
    rows: IndexArray  # node rows whose room changed (for NODE_ROOM)
    # Where the changes begin in the state's log of changed rows (None: it no longer reaches
    # back), for the pods behind them.
    mark: int | None

    def pods_where(self, relevant: Callable[[Pod], bool]) -> bool:
        """Whether a pod that arrived on, left or began terminating on a changed row may
        matter (`relevant`), or a change came from no known pod (a nomination, a
        reservation, allocatable): what a hint for a rule reading other pods asks of
        NODE_ROOM."""
        if self.mark is None:
            return True
        pods = self.state.nodes.pods_changed_since(self.mark)
        return pods is None or any(pod is None or relevant(pod) for pod in pods)


# A hint: may this change let the pod pass the plugin that rejected it? False must be sure.
PodHint = Callable[[ClusterChange, Pod], bool]


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: hashed by identity, cheaply
class PodsHint:
    """A hint asked for many waiting pods at once (one per shape waiting), against one
    change: `ask` answers, per pod in order, what a `PodHint` would. A hint that reads arrays
    tests every pod in one vectorised step rather than one at a time."""

    ask: Callable[[ClusterChange, Sequence[Pod]], Sequence[bool]]


QueueingHint = PodHint | PodsHint


class Plugin:
    """An extension point's plugin. A PreFilter, Filter or PostFilter whose answer reads the
    clock (`Cycle.now`) must say when that answer can change (`Cycle.changes_at`): the
    scheduler keeps a failed shape's answer for as long as the cluster does not change."""

    name: ClassVar[str]
    # Whether `skips` follows from the pod's shape alone (its demand, the static filters'
    # shapes and what the filters' and scores' `reads` return): the framework then asks once
    # per shape. A plugin whose answer also reads the cluster says False.
    skips_by_shape: ClassVar[bool] = True

    def attach(self, state: ClusterState) -> None:
        """Called once by the scheduler with the state it schedules."""

    def forget_pods(self, keys: Collection[str]) -> None:
        """These pods left the cluster (deleted): drop whatever is kept for them, so that
        what a plugin remembers per pod lives no longer than the pod (docs/live.md)."""

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None] | None:
        """The events that can turn this plugin's rejection into success, each with a hint
        (None: every such event may). A plugin returning None has no hints: a pod it
        rejected is retried after any change, which is always safe."""
        return None

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        """What this plugin reads of the pod beyond its demand and the static filters' shapes
        (e.g. its host ports): pods alike in all of these get the same answer."""
        return ()

    def kin_reads(self, state: ClusterState, pod: Pod) -> Hashable:
        """`reads` less what this plugin's answer depends on only through `verdicts`: pods
        alike in these (and in all else a twin shares) whose verdicts are equal now get the
        same answer from a whole attempt, so one's failure is told the other. All of `reads`
        unless a plugin says `verdicts`."""
        return self.reads(state, pod)

    def verdicts(self, cycle: Cycle) -> Hashable:
        """What this filter says now, node by node, of the pod on the nodes where pods alike
        in `kin_reads` may be told apart (Backfill: the reserved nodes, which a pod's stated
        runtime may let it onto); equal verdicts, equal answers on every node. Only for a
        plugin whose `kin_reads` leaves something of `reads` out."""
        return None

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        """Whether this filter or score has nothing to say about `pod` now: every node passes
        and scores alike. Lets pods without inter-pod constraints keep the cheap paths."""
        return False


class PreFilterPlugin(Plugin):
    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        raise NotImplementedError


class FilterPlugin(Plugin):
    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        """Rejections among `candidates`; nodes in no rejection pass."""
        raise NotImplementedError


class StaticFilterPlugin(FilterPlugin):
    """A filter that depends only on static node properties and the pod's shape.

    Its verdict is cached per `shape(pod)` until node labels, taints or membership change.
    A shape of None means 'do not cache' (e.g. a pod pinned to one node by name).
    """

    def shape(self, pod: Pod) -> Hashable | None:
        raise NotImplementedError

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        raise NotImplementedError

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None] | None:
        # Static node properties change only with a NODE event, by this class's contract.
        return {ClusterEvent.NODE: None}

    def passes_row(self, state: ClusterState, pod: Pod, row: int) -> bool | None:
        """The verdict on one node for a pod whose shape is None (so nothing is cached), when
        the framework needs just that node; None: evaluate every node instead."""
        return None

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        return [
            Rejection(r.reason, r.nodes & candidates, r.resolvable, r.still_fails)
            for r in self.evaluate(cycle.state, cycle.pod)
        ]


class ScorePlugin(Plugin):
    def score(self, cycle: Cycle, feasible: BoolArray) -> IntArray:
        """A score in 0..100 for every node row; only rows in `feasible` are read.

        Scoring whole columns is cheaper than gathering the feasible rows first when most
        nodes are feasible, which is the common case.
        """
        raise NotImplementedError

    def uniform(self, cycle: Cycle) -> bool:
        """Whether this pod scores every node alike (kube-scheduler's PreScore Skip): the
        framework then leaves the plugin out, which changes no choice."""
        return False


class StaticScorePlugin(ScorePlugin):
    """A score that depends only on static node properties (labels, taints, images) and the
    pod, normalised over the feasible nodes as kube-scheduler's NormalizeScore does.

    The framework caches `raw_scores` per `score_shape(pod)` until nodes change and
    normalises them at each selection, so the cached placements stay row-local.
    """

    def score_shape(self, pod: Pod) -> Hashable | None:
        """What the score reads of the pod; None: it scores every node alike (skipped)."""
        raise NotImplementedError

    def raw_scores(self, state: ClusterState, pod: Pod) -> IntArray | None:
        """One raw score per node row, or None when they are all alike."""
        raise NotImplementedError

    def normalize(self, raw: IntArray, feasible: BoolArray) -> IntArray:
        """Scores in 0..100 from the raw ones, judged against the feasible nodes."""
        raise NotImplementedError


def normalize_by_max(raw: IntArray, feasible: BoolArray, reverse: bool = False) -> IntArray:
    """kube-scheduler's DefaultNormalizeScore: scale so the feasible maximum scores 100
    (reversed: scores 0); all zero stays 0 (reversed: 100)."""
    highest = int(raw[feasible].max()) if feasible.any() else 0
    if highest == 0:
        return np.full(raw.shape[0], MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    scaled = MAX_NODE_SCORE * raw // highest
    return MAX_NODE_SCORE - scaled if reverse else scaled


# One node row's filter verdict and score, as a row-local plugin gives them (`row_check`).
RowCheck = Callable[[int], bool]
RowScore = Callable[[int], int]


class RowLocalPlugin(Plugin):
    """A filter and/or score whose verdict on a node depends only on that node's row of
    `free` and `allocatable` and on the pod's demand.

    The framework then keeps a pod shape's results between cycles and refreshes only the rows
    that changed (usually the one node the previous pod was bound to). Whether it `skips` a
    pod, or scores it `uniform`ly, must follow from the pod's shape (its demand and what
    `reads` returns): the framework asks once per shape.
    """

    def fits_rows(self, cycle: Cycle, rows: IndexArray) -> BoolArray:
        raise NotImplementedError

    def score_rows(self, cycle: Cycle, rows: IndexArray) -> IntArray:
        raise NotImplementedError

    def row_check(self, cycle: Cycle) -> RowCheck | None:
        """`fits_rows` for one row at a time, prepared once per cycle: refreshing the few
        rows that changed since the last pod (usually one) costs no arrays then. None:
        every row passes."""
        return lambda row: bool(self.fits_rows(cycle, np.array([row], dtype=np.intp))[0])

    def row_score(self, cycle: Cycle) -> RowScore:
        """`score_rows` for one row at a time, prepared once per cycle (as `row_check`)."""
        return lambda row: int(self.score_rows(cycle, np.array([row], dtype=np.intp))[0])


class ReservePlugin(Plugin):
    def reserve(self, cycle: Cycle, row: int) -> PreBind | None:
        """The pod goes to node `row`: hold what it takes there (e.g. the volumes chosen).
        What the world must write before the pod's Binding, if anything, is returned."""
        raise NotImplementedError

    def unreserve(self, state: ClusterState, pod: Pod) -> None:
        """Give back what `reserve` held for the pod (a group's tentative placement is
        undone). Plugins whose Reserve holds nothing across placements need not."""


class PreemptionOrderPlugin(Plugin):
    """A score plugin that also orders the nodes preemption finds equally good for a pod."""

    criterion = ""  # what its key orders by, as `explain` names it among kube's criteria

    def preemption_tie_break(self, cycle: Cycle) -> PreemptionTieBreak | None:
        """The key for the pod's preemption nodes (None: the order stays kube-scheduler's)."""
        raise NotImplementedError


class PostFilterPlugin(Plugin):
    def post_filter(self, cycle: Cycle, diagnosis: Diagnosis) -> PostFilterResult:
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def sort_key(self, pod: Pod, enqueued: float) -> tuple[Any, ...]:
        raise NotImplementedError


@dataclass(slots=True)
class NodeTotals:
    """One pod's feasibility and weighted total score (-1 where infeasible) on every node of
    the room it was evaluated on."""

    feasible: BoolArray
    total: IntArray
    # The framework's row plan for the pod (opaque here), made at the first refresh: the same
    # pod's results are refreshed many times in one gang search.
    plan: object = None


class PlacementFramework(Protocol):
    """What a group plugin may ask of its profile's Framework (framework.Framework is one)."""

    post_filters: list[PostFilterPlugin]
    queue_sort: QueueSortPlugin

    def pre_filter(self, cycle: Cycle) -> PreFilterResult: ...

    def place(self, cycle: Cycle, allowed: BoolArray | None = None) -> int | Diagnosis: ...

    def evaluate(self, cycle: Cycle) -> NodeTotals | None: ...

    def place_on_rows(
        self, cycle: Cycle, rows: IndexArray, allowed: BoolArray
    ) -> int | Diagnosis: ...

    def place_changed(
        self, cycle: Cycle, base: NodeTotals, rows: IndexArray
    ) -> int | Diagnosis | None: ...

    def choose(
        self, state: ClusterState, pod: Pod, totals: NodeTotals, among: IndexArray | None = None
    ) -> int | None: ...

    def row_local(self, cycle: Cycle) -> bool: ...

    def reserve(self, cycle: Cycle, row: int) -> tuple[PreBind, ...]: ...

    def unreserve(self, state: ClusterState, pod: Pod) -> None: ...

    def static_passing(self, cycle: Cycle) -> BoolArray: ...


class WaitPlugin(Plugin):
    """Told, in the scheduler's order, how each attempt of a pod or gang ended; it may hold
    something for one left pending with no way found (preemption included) and add to its
    message (Backfill's reservations, docs/backfill.md). `holder` is "Pod ns/name" or
    "PodGroup ns/name"."""

    def before_pass(self, state: ClusterState, now: datetime) -> None:
        """A pass begins: refresh or drop what is held."""

    def after_attempt(
        self,
        framework: PlacementFramework,
        state: ClusterState,
        holder: str,
        waiting: Sequence[Pod],
        rejected_by: frozenset[str] | None,
        now: datetime,
    ) -> str:
        """The holder's pods left pending with no way found (none: it was placed, or
        preemption found a way), and the plugins that rejected them (None: not known); what
        to add to their pending message ("" for nothing)."""
        raise NotImplementedError

    def overdue(
        self, state: ClusterState, holder: str, waiting: Sequence[Pod], now: datetime
    ) -> Overdue:
        """After `after_attempt`, for the holder's pods left pending with no way found: the
        evictions owed to what it holds (pods that broke a promise, docs/backfill.md) and
        when to try it again whatever changes."""
        return Overdue()


@dataclass(slots=True)
class Overdue:
    """What a wait plugin asks for a holder left pending: decisions to carry out (evictions,
    nominations), a message part, and a time to try its pods again (None: when the cluster
    changes)."""

    decisions: list[Decision] = field(default_factory=list)
    message: str = ""
    retry_at: float | None = None


@dataclass(slots=True)
class GroupAttempt:
    """One scheduling attempt of a whole group of pods."""

    group: str
    framework: PlacementFramework
    state: ClusterState
    now: datetime
    queued: Callable[[str], bool]  # is this pending pod waiting in this scheduler's queue?


@dataclass(slots=True)
class GroupOutcome:
    """What the scheduler carries out for a group attempt."""

    binds: list[tuple[str, str]] = field(default_factory=list)  # (pod key, node name)
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod key -> message
    decisions: list[Decision] = field(default_factory=list)  # evictions, nominations, events
    retry_at: datetime | None = None  # retry the unschedulable members then, change or not
    # The plugins whose hints may wake the unschedulable members (None: any change does).
    rejected_by: frozenset[str] | None = None


class GroupPlugin(Plugin):
    """Schedules a pod's whole group as one unit (Coscheduling, at the Permit point).

    When the scheduler pops a pod that `group_of` claims, it hands the group to
    `schedule_group` instead of scheduling the pod alone; the plugin must account for every
    queued pending member in the outcome. `after_pass` runs once per pass with the groups
    whose object or members changed and the pass's evictions, e.g. to keep PodGroup status
    current.
    """

    def use_post_filters(self, plugins: Sequence[PostFilterPlugin]) -> None:
        """Told once the post-filter plugins of its profile: a group preempts with them."""

    def group_of(self, pod: Pod) -> str | None:
        raise NotImplementedError

    def schedule_group(self, attempt: GroupAttempt) -> GroupOutcome:
        raise NotImplementedError

    def domains_tried(
        self, framework: PlacementFramework, state: ClusterState, now: datetime, group: str
    ) -> DomainSearch | None:
        """The topology domains the group's next attempt would try (explain shows them), or
        None when it asks for no required topology (docs/topology.md)."""
        return None

    def domain_preemption(
        self, framework: PlacementFramework, state: ClusterState, now: datetime, group: str
    ) -> DomainPreemption | None:
        """The group's preemption inside one domain of its required topology, domain by
        domain, as its next attempt would search (explain shows it); None when it asks for
        no required topology or may not preempt (docs/topology.md)."""
        return None

    def after_pass(
        self, changed: set[str], evicted: Sequence[Evict], now: datetime
    ) -> list[Decision]:
        raise NotImplementedError
