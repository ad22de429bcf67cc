"""What the web UI shows, copied from the scheduler's state at one moment (docs/ui.md).

The thread that owns the state (the live loop, or `batchsched ui` after judging its files)
builds a Board and publishes it (publisher.py); the HTTP threads read Boards only, which are
immutable, and never touch the state. Only what the UI may show is copied: a pod's namespace,
name, queue, requests, priority and status, never more of its spec (env, args, volumes,
annotations).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from batchsched.controllers.queues import queue_statuses
from batchsched.objects.quantity import CPU, format_amount
from batchsched.objects.records import Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import room_text

# Label keys nodes are grouped by on the GPU map when no gang names one (docs/ui.md).
FALLBACK_DOMAIN_KEYS = ("topology.kubernetes.io/zone",)


@dataclass(frozen=True, slots=True)
class Quota:
    """One resource of a queue: its quotas and what its subtree uses (docs/queues.md)."""

    resource: str
    guaranteed: int
    nominal: int
    limit: int | None
    in_use: int
    fair_share: int

    @property
    def borrowed(self) -> int:
        return max(0, self.in_use - self.nominal)

    def text(self, amount: int | None) -> str:
        return "none" if amount is None else format_amount(self.resource, amount)


@dataclass(frozen=True, slots=True)
class QueueView:
    name: str
    parent: str
    depth: int
    weight: float
    priority: int
    quotas: tuple[Quota, ...]
    pending: int  # pods pending in its subtree


@dataclass(frozen=True, slots=True)
class Member:
    pod: str  # namespace/name
    node: str  # "" while pending


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """A pending pod, or a gang (a PodGroup with pending members) as one workload."""

    key: str  # namespace/name of the pod or of the PodGroup
    kind: str  # "pod" or "gang"
    namespace: str
    name: str
    queue: str  # its leaf queue, "" if in none
    priority: int
    requests: tuple[tuple[str, int], ...]  # summed over the pending members, by resource
    reason: str  # why it waits: the scheduler's message, as `explain` prints it
    position: int  # 1-based, in the whole line; 0: chosen across queues by fair share
    queue_position: int  # 1-based, among its queue's workloads; 0 outside any queue
    members: tuple[Member, ...] = ()
    min_member: int = 0
    expected_start: datetime | None = None
    reservation: str = ""  # Backfill's reservation for it, as its message says it
    room_held: str = ""  # when that reservation holds which room on each node

    @property
    def pods(self) -> tuple[str, ...]:
        return tuple(m.pod for m in self.members) if self.members else (self.key,)


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    domains: tuple[str, ...]  # its value of each of the board's domain keys ("" if none)
    total: int  # allocatable of the map's resource
    used: int
    reserved_for: str = ""  # the pod a reservation holds it for
    unschedulable: bool = False
    # Backfill's reservations here, in the order made: (holder "ns/name", when and which room).
    held: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Event:
    at: datetime
    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Preemption:
    at: datetime
    victim: str
    victim_queue: str
    preemptor: str
    preemptor_queue: str
    node: str
    rule: str  # the eviction's reason: the rule that allowed it
    reclaim: bool = False  # taken back by the preemptor's queue (docs/queues.md#reclaim)


@dataclass(frozen=True)
class Board:
    version: int
    taken_at: datetime
    source: str  # what was judged: "the cluster" or the snapshot's files
    queues: tuple[QueueView, ...] = ()
    workloads: tuple[WorkloadView, ...] = ()  # in the order they would be tried
    nodes: tuple[NodeView, ...] = ()
    map_resource: str = CPU
    domain_keys: tuple[str, ...] = ()
    preemptions: tuple[Preemption, ...] = ()  # newest first
    events: Mapping[str, tuple[Event, ...]] | None = None  # None: no history (a snapshot)
    notice: str = ""  # a problem the page should show (e.g. a snapshot that failed to load)
    _by_key: dict[str, WorkloadView] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _namespaces: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        found = set()
        for workload in self.workloads:
            self._by_key[workload.key] = workload
            found.add(workload.namespace)
        for p in self.preemptions:
            found.update(key.partition("/")[0] for key in (p.victim, p.preemptor))
        found.update(n.reserved_for.partition("/")[0] for n in self.nodes if n.reserved_for)
        object.__setattr__(self, "_namespaces", frozenset(found))  # frozen: set once, here

    def workload(self, key: str) -> WorkloadView | None:
        return self._by_key.get(key)

    def queue(self, name: str) -> QueueView | None:
        return next((q for q in self.queues if q.name == name), None)

    def namespaces(self) -> frozenset[str]:
        """The namespaces whose objects the board names (who may see them is asked per
        namespace); found once, as every request asks."""
        return self._namespaces


def map_resource(state: ClusterState) -> str:
    """The resource the node map shows: the first GPU resource nodes offer, else cpu."""
    names = state.nodes.resources.names
    gpus = [n for n in names if "gpu" in n.rsplit("/", 1)[-1]]
    return sorted(gpus)[0] if gpus else CPU


def domain_keys(state: ClusterState) -> tuple[str, ...]:
    """The label keys the GPU map may group nodes by: the keys gangs ask for (narrowest
    first as they name them), then the fallbacks, those that some node carries."""
    keys: list[str] = []
    for group in sorted(state.groups.by_key.values(), key=lambda g: g.key):
        for key in (group.topology.required, *group.topology.preferred):
            if key and key not in keys:
                keys.append(key)
    keys.extend(k for k in FALLBACK_DOMAIN_KEYS if k not in keys)
    labelled = {k for _, node in state.nodes.live() for k in node.labels}
    return tuple(k for k in keys if k in labelled)


def build_board(
    scheduler: Scheduler,
    version: int,
    now: datetime,
    source: str,
    messages: Mapping[str, str],
    preemptions: tuple[Preemption, ...] = (),
    events: Mapping[str, tuple[Event, ...]] | None = None,
    notice: str = "",
) -> Board:
    """The board of the scheduler's state now; `messages`: why each pending pod waits."""
    state = scheduler.state
    keys = domain_keys(state)
    resource = map_resource(state)
    return Board(
        version,
        now,
        source,
        queues=_queues(state),
        workloads=_workloads(scheduler, messages, now),
        nodes=_nodes(state, resource, keys),
        map_resource=resource,
        domain_keys=keys,
        preemptions=preemptions,
        events=events,
        notice=notice,
    )


def _queues(state: ClusterState) -> tuple[QueueView, ...]:
    tree = state.queues
    statuses = queue_statuses(state)
    out: list[QueueView] = []
    for name, depth in tree.in_tree_order():
        queue, status = tree.queues[name], statuses[name]
        quotas = tuple(
            Quota(r, q.guaranteed, q.nominal, q.limit, status.allocated[r], status.fair_share[r])
            for r, q in sorted(queue.resources.items())
        )
        out.append(
            QueueView(
                name, queue.parent, depth, queue.weight, queue.priority, quotas, status.pending_pods
            )
        )
    return tuple(out)


def _workloads(
    scheduler: Scheduler, messages: Mapping[str, str], now: datetime
) -> tuple[WorkloadView, ...]:
    """The pending pods in queue order, a gang's pending members as one workload at its
    first member's place.

    With Queue objects the queue hands out pods queue by queue, choosing the next queue by
    fair share at each step (docs/queues.md#queue-order): a queued pod's place in its queue
    is known, its place in the whole line is not (position 0); pods in no queue go first."""
    state = scheduler.state
    lanes = bool(state.queues)
    ordered = scheduler.queue.in_order()
    queued = set(ordered)
    # Pods waiting outside the queue (scheduling gates, deletion) come last, by name.
    ordered.extend(
        sorted(k for k, p in state.pods.pending.items() if k not in queued and scheduler.owns(p))
    )
    pods = [p for p in map(state.pods.pending.get, ordered) if p is not None]
    leaves = {p.key: state.queue_of(p).queue for p in pods}
    if lanes:
        pods.sort(key=lambda p: leaves[p.key] != "")  # stable: each queue keeps its order
    out: list[WorkloadView] = []
    seen_groups: set[str] = set()
    per_queue: dict[str, int] = {}
    for pod in pods:
        key = pod.key
        group = state.group_of(pod)
        if group is not None:
            if group.key in seen_groups:
                continue
            seen_groups.add(group.key)
        leaf = leaves[key]
        position = len(out) + 1 if not (lanes and leaf) else 0
        queue_position = 0
        if leaf:
            queue_position = per_queue[leaf] = per_queue.get(leaf, 0) + 1
        priority = state.policy.priority_of(pod)
        reason = messages.get(key, "not attempted yet")
        if group is None:
            start, reservation, room_held = _start(state, f"Pod {key}", now)
            requests = _requests(state, (pod,))
            view = WorkloadView(
                key,
                "pod",
                pod.namespace,
                pod.name,
                leaf,
                priority,
                requests,
                reason,
                position,
                queue_position,
                expected_start=start,
                reservation=reservation,
                room_held=room_held,
            )
            out.append(view)
            continue
        group_key = group.key
        start, reservation, room_held = _start(state, f"PodGroup {group_key}", now)
        members = sorted(state.groups.members.get(group_key, ()))
        group_pods = [state.pods.by_key[m] for m in members if m in state.pods.by_key]
        waiting = tuple(p for p in group_pods if p.key in state.pods.pending)
        out.append(
            WorkloadView(
                group_key,
                "gang",
                group.namespace,
                group.name,
                leaf,
                priority,
                _requests(state, waiting),
                reason,
                position,
                queue_position,
                members=tuple(Member(p.key, p.node_name) for p in group_pods),
                min_member=group.min_member,
                expected_start=start,
                reservation=reservation,
                room_held=room_held,
            )
        )
    return tuple(out)


def _start(state: ClusterState, holder: str, now: datetime) -> tuple[datetime | None, str, str]:
    """The expected start Backfill's reservation for `holder` gives, the reservation as its
    message says it at `now`, and when it holds which room (docs/backfill.md#what-you-see)."""
    held = state.start_reservations.by_holder.get(holder)
    if held is None:
        return None, "", ""
    rooms = "; ".join(f"{node}: {room_text(room)}" for node, room in held.room(state.nodes.name))
    return held.start, held.message(now), f"{held.span()}: {rooms}"


def _requests(state: ClusterState, pods: tuple[Pod, ...]) -> tuple[tuple[str, int], ...]:
    total: dict[str, int] = {}
    for pod in pods:
        for resource, amount in state.requests_by_name(pod).items():
            total[resource] = total.get(resource, 0) + amount
    return tuple(sorted(total.items()))


def _nodes(state: ClusterState, resource: str, keys: tuple[str, ...]) -> tuple[NodeView, ...]:
    nodes = state.nodes
    col = nodes.resources.get(resource)
    rows = nodes.rows
    if col is None or col >= nodes.allocatable.shape[1]:
        total = used = np.zeros(rows, dtype=np.int64)
    else:
        total = nodes.allocatable[:rows, col]
        used = total - nodes.free[:rows, col]
    held = {row: r.pod for row, r in state.reservations.by_row.items()}
    # Backfill's reservations (docs/backfill.md): held for "Pod ns/name" or "PodGroup ns/name".
    times: dict[int, tuple[tuple[str, str], ...]] = {}
    for row, starts in state.start_reservations.by_row.items():
        held.setdefault(row, starts[0].holder.partition(" ")[2])
        times[row] = tuple(
            (r.holder.partition(" ")[2], f"{r.span()}: {room_text(r.shares[row])}") for r in starts
        )
    out = [
        NodeView(
            node.name,
            tuple(node.labels.get(k, "") for k in keys),
            int(total[row]),
            int(used[row]),
            held.get(row, ""),
            node.unschedulable,
            times.get(row, ()),
        )
        for row, node in nodes.live()
    ]
    out.sort(key=lambda n: (n.domains, n.name))
    return tuple(out)
