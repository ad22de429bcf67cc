"""`batchsched schedule`: manifests in, decisions out.

Passes run until nothing changes. Time does not advance: every pass uses the same `now`, and a
victim of preemption is removed at once, as if its graceful termination had finished, so a
preemptor that got room binds in a later pass.

The output is a plan, net of the passes: a pod bound in one pass and preempted in a later one
appears in neither `bindings` nor `evictions` (it was pending and stays pending, reported with
why), and neither do the other members of its PodGroup bound in this run, so a gang is never
left bound below minMember. Applied in order (evictions, then once the victims are gone the
bindings), it reaches the state the passes reached, less the withdrawn pods.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batchsched.collector import fewer_collections
from batchsched.commands.queues import queue_report
from batchsched.config import SchedulerConfig
from batchsched.controllers import Controllers, Dispatcher, current_warnings, pod_gone
from batchsched.controllers.queues import restore_usage
from batchsched.decisions import (
    Bind,
    Evict,
    PodGroupUpdate,
    Reserve,
    ReserveClaims,
    Unschedulable,
    Warn,
)
from batchsched.objects.dra import claim_status_json, extended_status_json
from batchsched.objects.kinds import KINDS
from batchsched.objects.load import Objects
from batchsched.objects.parse import format_time, pod_group_status_json
from batchsched.objects.quantity import format_amount
from batchsched.objects.records import PodGroup
from batchsched.objects.runtime_bound import planned_as_none
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import StartReservation
from batchsched.state.topology import reported_domains
from batchsched.state.volumes import ClaimBinding

# Each pass binds or evicts at least one pod or the run stops, so this bound is only a guard
# against a bug turning into an endless loop.
_MAX_PASSES = 100_000


APPLY_ORDER = ("evictions", "bindings")


def input_notices(objects: Objects, scheduler_names: list[str]) -> list[str]:
    """Why a plan would be empty for want of input: no Node, or no pending Pod for one of
    `scheduler_names` (pods without schedulerName count as batchsched's, as in manifests)."""
    notes = []
    if not objects.nodes:
        notes.append("no Node in the input: every pending pod stays pending")
    pending = [p for p in objects.pods if not p.node_name and not p.terminated]
    ours = [p for p in pending if not p.scheduler_name or p.scheduler_name in scheduler_names]
    if not objects.pods:
        notes.append("no Pod in the input: nothing to schedule")
    elif not ours:
        others = Counter(p.scheduler_name for p in pending)
        named = ", ".join(f"{n} {name}" for name, n in sorted(others.items()))
        notes.append(
            f"no pending Pod for {' or '.join(scheduler_names)} (spec.schedulerName): "
            + (f"the pending pods name other schedulers ({named})" if named else "none pending")
        )
    return notes


@dataclass(frozen=True, slots=True)
class HeldStart:
    """A Backfill reservation with its room named by node (docs/backfill.md#what-you-see)."""

    reservation: StartReservation
    room: tuple[tuple[str, dict[str, int]], ...]  # per node, by name: what it holds there

    @classmethod
    def of(cls, state: ClusterState, reservation: StartReservation) -> HeldStart:
        return cls(reservation, tuple(reservation.room(state.nodes.name)))

    def to_json(self) -> dict[str, Any]:
        r = self.reservation
        start = None if r.start is None else format_time(r.start)
        # null: it holds its room for good (no expected start, or a holder stating no runtime).
        end = None if r.until is None else format_time(r.until)
        return {
            "holder": r.holder,
            "nodes": list(r.nodes),
            "expectedStart": start,
            "plannedEnd": end,
            "waitsFor": list(r.waits_for),
            "room": [
                {
                    "node": node,
                    "resources": {name: format_amount(name, n) for name, n in sorted(held.items())},
                    "from": start,
                    "until": end,
                }
                for node, held in self.room
            ],
        }


@dataclass
class OneShotResult:
    bindings: list[Bind] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    unschedulable: dict[str, str] = field(default_factory=dict)
    pod_groups: dict[str, PodGroupUpdate] = field(default_factory=dict)
    groups: dict[str, PodGroup] = field(default_factory=dict)  # the records, for their kind
    # Groups asking for a topology: the key their placement is reported by
    # (state.topology.reported_domains) and the domains of that key their members are in.
    topology_keys: dict[str, str] = field(default_factory=dict)
    domains: dict[str, list[str]] = field(default_factory=dict)
    reservations: dict[str, Reserve] = field(default_factory=dict)
    # Backfill's reservations at the end of the run.
    start_reservations: list[HeldStart] = field(default_factory=list)
    warnings: list[Warn] = field(default_factory=list)
    volume_bindings: list[ClaimBinding] = field(default_factory=list)
    # Claims allocated by this run, with their status as the API would have it.
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Pods whose extended resources DRA serves: their status.extendedResourceClaimStatus.
    extended: dict[str, Any] = field(default_factory=dict)
    passes: int = 0
    attempts: int = 0  # scheduling attempts of pods, failed ones included
    # Pods bound and then preempted within the run (left out of the plan): pod -> why.
    withdrawn: dict[str, str] = field(default_factory=dict)
    # The queue tree after the run (commands/queues.py), when there are Queue objects.
    queues: list[dict[str, Any]] = field(default_factory=list)
    _bound_in_pass: dict[str, int] = field(default_factory=dict)

    def bind(self, decision: Bind) -> None:
        self.bindings.append(decision)
        for step in decision.pre_bind:
            if isinstance(step, ReserveClaims) and step.extended is not None:
                name = step.extended.claim.name
                self.extended[decision.pod] = extended_status_json(name, step.extended.mappings)
        self._bound_in_pass[decision.pod] = self.passes

    def evict(self, decision: Evict, state: ClusterState) -> None:
        """A victim; one bound earlier in this run is withdrawn from the plan instead."""
        bound_in = self._bound_in_pass.get(decision.pod)
        if bound_in is None:
            self.evictions.append(decision)
            return
        self.withdrawn[decision.pod] = (
            f"bound to {decision.node} in pass {bound_in}, then preempted by "
            f"{decision.preemptor} in pass {self.passes} ({decision.reason}); the plan leaves "
            "it pending"
        )
        for group, members in state.groups.members.items():
            if decision.pod in members:
                for member in sorted(members - self.withdrawn.keys()):
                    if member in self._bound_in_pass:
                        self.withdrawn[member] = (
                            f"bound in pass {self._bound_in_pass[member]}, but {decision.pod} "
                            f"of its PodGroup {group} was then preempted; the plan leaves the "
                            "gang pending"
                        )

    def net(self) -> None:
        """Drop the withdrawn pods' bindings (and the claim bindings their PreBind would have
        made); report them as unschedulable with why."""
        self.bindings = [b for b in self.bindings if b.pod not in self.withdrawn]
        self.volume_bindings = [b for b in self.volume_bindings if b.pod not in self.withdrawn]
        for pod in self.withdrawn:
            self.extended.pop(pod, None)
        self.unschedulable.update(self.withdrawn)

    def _topology_json(self, name: str) -> dict[str, Any]:
        """A group's topology request and the domains its members are in (docs/topology.md)."""
        domains = self.domains.get(name)
        if domains is None:
            return {}
        out: dict[str, Any] = {"key": self.topology_keys[name], "domains": domains}
        preferred = self.groups[name].topology.preferred
        if preferred:
            out["preferred"] = list(preferred)
        return {"topology": out}

    def to_json(self) -> dict[str, Any]:
        return {
            "applyOrder": list(APPLY_ORDER),
            "bindings": [
                {"pod": b.pod, "node": b.node} for b in sorted(self.bindings, key=lambda b: b.pod)
            ],
            "evictions": [
                {"pod": e.pod, "node": e.node, "preemptor": e.preemptor, "reason": e.reason}
                for e in sorted(self.evictions, key=lambda e: e.pod)
            ],
            "unschedulable": [
                {"pod": pod, "message": message}
                for pod, message in sorted(self.unschedulable.items())
            ],
            "podGroups": [
                {
                    "name": name,
                    "apiVersion": self.groups[name].api_version,
                    "kind": "PodGroup",
                    **pod_group_status_json(self.groups[name], update.status),
                    **self._topology_json(name),
                }
                for name, update in sorted(self.pod_groups.items())
            ],
            # Both kinds of node reservation, told apart by `kind` (docs/schedule.md).
            "reservations": [
                {
                    "kind": "DaemonSet",
                    "holder": f"Pod {r.pod}",
                    "nodes": [r.node],
                    "node": r.node,
                    "pod": r.pod,
                    "since": format_time(r.since),
                }
                for _, r in sorted(self.reservations.items())
            ]
            + [
                {"kind": "Backfill", **held.to_json()}
                for held in sorted(self.start_reservations, key=lambda h: h.reservation.holder)
            ],
            "warnings": [{"object": w.obj, "message": w.message} for w in self.warnings],
            # Which volume each unbound WaitForFirstConsumer claim got (null: provisioned on
            # the node), as PreBind would write it.
            "volumeBindings": [
                {"claim": b.claim, "pod": b.pod, "node": b.node, "volume": b.volume or None}
                for b in sorted(self.volume_bindings, key=lambda b: b.claim)
            ],
            "claims": [
                {"claim": key, "status": status} for key, status in sorted(self.claims.items())
            ],
            "extendedResourceClaims": [
                {"pod": pod, "status": status} for pod, status in sorted(self.extended.items())
            ],
            **({"queues": self.queues, "reclaims": self._reclaims_json()} if self.queues else {}),
        }

    def _reclaims_json(self) -> list[dict[str, str]]:
        """The evictions that were reclaims (docs/queues.md#reclaim), naming both queues."""
        return [
            {
                "victim": e.pod,
                "victimQueue": e.reclaim[1],
                "preemptor": e.preemptor,
                "preemptorQueue": e.reclaim[0],
                "node": e.node,
            }
            for e in sorted(self.evictions, key=lambda e: e.pod)
            if e.reclaim is not None
        ]


def build_state(objects: Objects) -> ClusterState:
    """A ClusterState holding the objects, applied in the kind registry's order (classes
    first, so pod priorities resolve; pods last)."""
    state = ClusterState()
    for kind in KINDS:
        if kind.in_state:
            for record in getattr(objects, kind.field):
                state.apply(kind.name, record)
    return state


def run(
    objects: Objects, config: SchedulerConfig, now: datetime, queueing_hints: bool = True
) -> OneShotResult:
    return settle(objects, config, now, queueing_hints)[0]


def settle(
    objects: Objects, config: SchedulerConfig, now: datetime, queueing_hints: bool = True
) -> tuple[OneShotResult, Scheduler]:
    """Run passes until nothing changes; the result, and the scheduler with its final state.

    With the cycle collector at the simulator's pace: at the default one its walks over the
    cluster's objects grow with the cluster and with the work (issue 18's contended run)."""
    with fewer_collections():
        return _settle(objects, config, now, queueing_hints)


def _bad_runtimes(state: ClusterState) -> list[Warn]:
    """Pods on nodes stating a bad runtime, and PodGroups doing so with none of their members
    pending: no pending message tells them that they are planned as stating none
    (docs/backfill.md#stated-runtimes)."""
    told: list[str] = []
    for pod in state.pods.by_key.values():
        if pod.runtime_error and pod.node_name:
            told.append(pod.runtime_error)
    for key, group in state.groups.by_key.items():
        members = state.groups.members.get(key, ())
        if group.runtime_error and not any(m in state.pods.pending for m in members):
            told.append(group.runtime_error)
    return [Warn(*planned_as_none(error)) for error in sorted(told)]


def _settle(
    objects: Objects, config: SchedulerConfig, now: datetime, queueing_hints: bool
) -> tuple[OneShotResult, Scheduler]:
    state = build_state(objects)
    scheduler = Scheduler(state, config, queueing_hints)
    controllers = Controllers(scheduler)
    result = OneShotResult()
    # With decay on, the usage the Queues store (docs/queues.md#fairness-over-time).
    for name, err in restore_usage(state, now.timestamp()).items():
        note = f"{err}; ignored: its decayed usage starts from 0"
        result.warnings.append(Warn(f"Queue {name}", note))
    plan = _Plan(state, result, controllers.dispatcher)
    while result.passes < _MAX_PASSES:
        result.passes += 1
        scheduler.queue.settle()
        plan.changed = False
        controllers.dispatcher.dispatch(scheduler.schedule_pass(now))
        if not plan.changed:
            break
    # Pods of a foreign scheduler are not ours to report; only our pending pods are.
    result.unschedulable = {
        key: scheduler.messages.get(key, "not attempted")
        for key, pod in state.pods.pending.items()
        if scheduler.owns(pod)
    }
    result.start_reservations = [
        HeldStart.of(state, r) for r in state.start_reservations.by_holder.values()
    ]
    result.volume_bindings = state.volumes.assumed()
    result.net()
    # Every PodGroup with members is reported with its final status, changed or not.
    result.pod_groups.update(controllers.pod_groups.statuses())
    result.groups = {key: state.groups.by_key[key] for key in result.pod_groups}
    for key, group in result.groups.items():
        if group.topology:
            members = [state.pods.by_key[m] for m in sorted(state.groups.members.get(key, ()))]
            found = reported_domains(state, members, group.topology)
            result.topology_keys[key], result.domains[key] = found
    for key in state.devices.allocated_here:
        claim = state.devices.claims.get(key)
        if claim is None or claim.allocation is None:
            continue  # allocated for a pod preempted later in the run, and freed with it
        if all(f"{claim.namespace}/{pod}" in result.withdrawn for pod in claim.reserved_for):
            continue  # allocated only for pods the plan withdrew (their devices stay held)
        result.claims[key] = claim_status_json(claim)
    result.warnings = current_warnings(state, result.warnings) + _bad_runtimes(state)
    if state.queues:
        result.queues = queue_report(state)
    for reservation in list(result.reservations.values()):
        if reservation.pod not in state.pods.pending:
            del result.reservations[reservation.node]
    return result, scheduler


class _Plan:
    """How the one-shot run carries out a pass's decisions: into the plan, a victim gone at
    once (as if its graceful termination had finished). `changed`: whether a pass bound or
    evicted a pod."""

    def __init__(self, state: ClusterState, result: OneShotResult, dispatcher: Dispatcher) -> None:
        self.state = state
        self.result = result
        self.changed = False
        self._seen_warnings: set[tuple[str, str]] = set()
        dispatcher.on(Bind, self._bind)
        dispatcher.on(Evict, self._evict)
        dispatcher.on(PodGroupUpdate, self._group)
        dispatcher.on(Reserve, self._reserve)
        dispatcher.on(Warn, self._warn)
        dispatcher.on(Unschedulable, self._unschedulable)

    def _bind(self, decision: Bind) -> None:
        self.result.bind(decision)
        self.result.attempts += 1
        self.changed = True

    def _evict(self, decision: Evict) -> None:
        self.result.evict(decision, self.state)
        pod_gone(self.state, decision.pod)
        self.changed = True

    def _group(self, decision: PodGroupUpdate) -> None:
        self.result.pod_groups[decision.group] = decision

    def _reserve(self, decision: Reserve) -> None:
        self.result.reservations[decision.node] = decision

    def _warn(self, decision: Warn) -> None:
        if (decision.obj, decision.message) not in self._seen_warnings:
            self._seen_warnings.add((decision.obj, decision.message))
            self.result.warnings.append(decision)  # checked against the final state at the end

    def _unschedulable(self, decision: Unschedulable) -> None:
        self.result.attempts += 1  # the final message per pod is read at the end
