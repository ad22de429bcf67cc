"""The discrete-event loop: a virtual clock, the scheduling core, and a world that obeys it.

The clock is a number of seconds since the scenario's start. Events (job submitted, work
finished, a terminating pod gone, a job's pods recreated) are applied in time order; after each
batch of events at one time the very same Scheduler that runs in a cluster makes a pass, and
its decisions are carried out here as a cluster would: a bound pod starts running, a victim
terminates after its grace period and its job loses the work since its last checkpoint.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import IntEnum

from batchsched.collector import fewer_collections, kept_to_the_end
from batchsched.config import SchedulerConfig
from batchsched.controllers import Controllers, current_warnings, pod_gone
from batchsched.decisions import (
    Bind,
    BindVolumes,
    Decision,
    Evict,
    InternalError,
    PodGroupUpdate,
    Reserve,
    ReserveClaims,
    Unschedulable,
    Warn,
    allocated_devices,
)
from batchsched.objects.quantity import CPU
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import Queue
from batchsched.objects.records import Node, Pod, PodCondition, PodGroup, PriorityClass
from batchsched.objects.volumes import PodVolume
from batchsched.preemption.reasons import HELD_BY_TOLERATION
from batchsched.preemption.toleration_policy import parse_policy
from batchsched.scheduling.scheduler import Scheduler
from batchsched.sim.devices import ScenarioDevices
from batchsched.sim.metrics import (
    BackfillRecord,
    JobRecord,
    RunResult,
    Timeline,
    gpu_resource,
    tracked_resources,
)
from batchsched.sim.queue_metrics import QueueMeter
from batchsched.sim.topology import domains_spanned
from batchsched.sim.workload import GPU_MILLI, GROUP_ANNOTATION, JOB_LABEL, JobSpec
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import holder_pods
from batchsched.state.volumes import VolumeObject


class Kind(IntEnum):
    """What an event of the heap does (submissions wait beside it: `Simulation._submits`)."""

    FINISH = 1
    GONE = 2
    RECREATE = 3


_FINISH, _GONE, _RECREATE = Kind.FINISH, Kind.GONE, Kind.RECREATE


@dataclass(eq=False, slots=True)
class Unit:
    """Pods that run and restart together: a whole gang, or one pod of an ordinary job."""

    job: JobRun
    index: int
    pod_indices: range
    needed: int  # bound pods needed before work progresses
    done: float = 0.0  # work saved by checkpoints
    running_since: float | None = None
    token: int = 0  # bumped when a scheduled finish no longer holds
    attempt: int = 0
    pods: list[str] = field(default_factory=list)
    bound: set[str] = field(default_factory=set)
    terminating: set[str] = field(default_factory=set)
    restarting: bool = False
    finished: bool = False
    pace: float = 1.0  # wall seconds per second of work (a gang's topology slowdown)


@dataclass(eq=False, slots=True)
class JobRun:
    spec: JobSpec
    record: JobRecord
    units: list[Unit] = field(default_factory=list)
    unfinished: int = 0
    usage: list[tuple[int, int]] = field(default_factory=list)  # see Simulation._usage
    queue_path: list[int] = field(default_factory=list)  # its queue and ancestors (QueueMeter)
    queue_amount: int = 0  # what each of its pods asks of the queues' share resource


ProgressHook = Callable[[float], None]


class Simulation:
    def __init__(
        self,
        name: str,
        nodes: Iterable[Node],
        priority_classes: Iterable[PriorityClass],
        jobs: Iterable[JobSpec],
        config: SchedulerConfig,
        start: datetime,
        seed: int = 0,
        until: float | None = None,
        storage: Iterable[VolumeObject] = (),
        devices: ScenarioDevices | None = None,
        queues: Iterable[Queue] = (),
        queues_on: bool = True,
    ) -> None:
        """`queues` are measured per queue; with `queues_on` they are also in the cluster and
        the jobs' pods carry their queue's label (else the scheduler never sees them)."""
        self.name = name
        self.seed = seed
        self.start = start
        self.until = until
        self.state = ClusterState()
        for pc in priority_classes:
            self.state.upsert_priority_class(pc)
        for node in nodes:
            self.state.upsert_node(node)
        for obj in storage:
            self.state.upsert_volume_object(obj)  # never changed in place: shared by runs
        self._add_devices(devices or ScenarioDevices())
        queue_list = list(queues)
        self._queues_on = queues_on and bool(queue_list)
        if self._queues_on:
            for queue in queue_list:
                self.state.upsert_queue(queue)
        self.scheduler = Scheduler(self.state, config)
        self.controllers = Controllers(self.scheduler)
        on = self.controllers.dispatcher.on
        on(Bind, self._bind)
        on(Evict, self._evicted)
        on(Unschedulable, self._unschedulable)
        on(PodGroupUpdate, self.controllers.pod_groups.record)
        on(Reserve, self._reserve)
        on(Warn, self._warn)
        on(InternalError, self._warn)
        # Nominate: the scheduler keeps nominations in ClusterState itself.
        # A pod that failed is retried after max_unschedulable_seconds even if no change
        # helps it (as kube-scheduler does). Only a rule that reads the clock can then decide
        # otherwise: a toleration that runs out, a node reservation that ages into preemption.
        # Without one the retry repeats the same answer, so it is skipped, which keeps a
        # saturated cluster with thousands of waiting pods fast.
        self._stale_after = self.scheduler.queue.max_unschedulable_seconds
        self._clock_rules = False
        self._read_clock(
            any(
                parse_policy(pc).toleration_seconds > 0
                for pc in self.state.policy.priority_classes.values()
            )
        )
        self.now = 0.0
        self._stamp = (math.nan, start)  # the last instant made a date, and that date
        self._events: list[tuple[float, int, Kind, object]] = []
        self._seq = 0
        self.jobs: list[JobRun] = []
        with fewer_collections():
            for spec in jobs:
                self.jobs.append(JobRun(spec, _record(spec)))
        # The submissions, known from the start, wait in submission order beside the heap of
        # the events the run makes (a heap of every job would be deeper for each of those):
        # at one time they come first, in job order, as if pushed before any other event.
        self._submits = sorted(self.jobs, key=lambda run: run.spec.submit)
        self._submitted = 0  # how many of them were taken
        self._unit_of: dict[str, Unit] = {}
        # When each unschedulable pod last failed: the queue retries a pod after
        # max_unschedulable_seconds even if nothing changed, and the clock must stop there.
        self._failed_at: dict[str, float] = {}
        self._stale: list[tuple[float, float, str, int]] = []
        classes = sorted({j.record.group for j in self.jobs})
        self._class_col = {c: i for i, c in enumerate(classes)}
        self._pending_by_class = [0] * len(classes)
        self._resources = tracked_resources(list(self.state.nodes.resources.names))
        self._resource_cols = [self.state.nodes.resources.intern(r) for r in self._resources]
        self._used = [0.0] * len(self._resources)
        self.timeline = Timeline(self._resources, classes)
        gpu = gpu_resource(self._resources)
        self._gpu_col = self.state.nodes.resources.intern(gpu) if gpu else None
        self._gpu_scale = 1000.0 if gpu == GPU_MILLI else 1.0
        self._meter = self._queue_meter(queue_list, gpu)
        self._fragmented = (
            -1,
            0.0,
        )  # (state change mark, GPUs free on partly used nodes)
        self._partly_free: list[int] = []  # per node row: its GPUs free if partly used
        self._partly_total = 0
        self.decisions: dict[str, int] = {}
        self._warnings: list[Warn] = []
        self.reservations: dict[str, Reserve] = {}
        self.backfill = BackfillRecord()
        self._start_recorded: set[str] = set()  # holders whose job's expected start is kept

    # ---- the loop ----------------------------------------------------------------------

    def run(self, progress: ProgressHook | None = None) -> RunResult:
        began = time.perf_counter()
        self.advance(self.until, progress)
        return RunResult(
            name=self.name,
            seed=self.seed,
            jobs=[j.record for j in self.jobs],
            timeline=self.timeline,
            capacity=self._capacity(),
            end_time=self.now,
            decisions=self.decisions,
            warnings=self.warnings(),
            wall_seconds=time.perf_counter() - began,
            node_gpus=self._node_gpus(),
            queues=self._meter.timeline if self._meter is not None else None,
            backfill=self.backfill,
        )

    def warnings(self) -> list[str]:
        """The warnings that still hold at the current time, each once."""
        return [f"{w.obj}: {w.message}" for w in current_warnings(self.state, self._warnings)]

    def advance(self, horizon: float | None, progress: ProgressHook | None = None) -> None:
        """Process events in time order, with a scheduling pass after each instant's batch,
        until nothing can change any more or the clock would pass `horizon`."""
        self._sample()
        with kept_to_the_end():
            while (t := self._next_time()) is not None:
                if horizon is not None and t > horizon:
                    self.now = max(self.now, horizon)
                    return
                self.now = t
                self._handle_due(t)
                self._schedule()
                self._sample()
                if progress is not None:
                    progress(t)

    def step(self) -> list[Decision]:
        """The scheduling passes of the current instant, their decisions carried out."""
        return self._schedule()

    def add_pod(self, pod: Pod) -> None:
        """A pod that is no job's (e.g. from a snapshot): scheduled and evicted like any."""
        self.state.upsert_pod(pod)
        if pod.key in self.state.pods.bound:
            self._account(self._usage(pod.requests), 1)

    def _next_time(self) -> float | None:
        """The next event, or an earlier queue wakeup while events remain.

        With no event left nothing can change any more: pods still pending stay pending.
        """
        t = self._first_event_time()
        if t is None:
            return None
        wakeup = self.scheduler.queue.next_wakeup()
        if wakeup is not None:
            # A wakeup the last pass did not reach is a rounding artefact: step past it.
            t = min(t, max(self._virtual(wakeup), self.now + 1e-6))
        while self._stale:
            due, failed, key, nudges = self._stale[0]
            if self._failed_at.get(key) != failed or key not in self.state.pods.pending:
                heapq.heappop(self._stale)  # retried since, or gone
            elif due <= self.now:
                # Float rounding of the clock kept the queue from seeing the pod as stale at
                # `due`: look again a microsecond later (a few times at most).
                heapq.heappop(self._stale)
                if nudges < 3:
                    heapq.heappush(self._stale, (self.now + 1e-6, failed, key, nudges + 1))
            else:
                t = min(t, due)
                break
        return max(t, self.now)

    def _schedule(self) -> list[Decision]:
        """Passes at `now` until a pass leaves the cluster as it found it.

        A pass that evicts changes the cluster; the next pass lets the queue see that change
        at once (pods it woke start their backoff now, as in a cluster), not at the next event.
        Each pod fails at most once per instant, so this ends.
        """
        applied: list[Decision] = []
        while True:
            generation = self.state.generation
            decisions = []
            held = self.state.start_reservations.by_holder
            for step in self.scheduler.pass_steps(self._clock(self.now)):
                if held:
                    self._watch_reservations(step)
                decisions.extend(step)
            if decisions:  # (most passes of a replay decide nothing: instants that end work)
                self.apply(decisions)
                applied.extend(decisions)
            if self.state.generation == generation:
                return applied

    def _watch_reservations(self, step: list[Decision]) -> None:
        """As the pass goes: each job's first expected start, and the jobs bound on nodes
        reserved for another (backfilled; docs/backfill.md)."""
        held = self.state.start_reservations
        row_of = self.state.nodes.row_of
        for decision in step:
            if isinstance(decision, Bind):
                reserved = held.by_row.get(row_of[decision.node], ())
                unit = self._unit_of.get(decision.pod)
                # Beside another's reservation, not starting its own (a node may hold
                # several; a holder's is given back as it binds).
                if (
                    unit is not None
                    and unit.job.record.name not in self.backfill.expected_start
                    and any(self._job_of(r.holder) is not unit.job for r in reserved)
                ):
                    self.backfill.backfilled.add(unit.job.record.name)
        # A job's first expected start is kept: a holder whose job has one is not looked up
        # again at every step (a holder's name is its own job's for good).
        recorded = self._start_recorded
        for holder, reservation in held.by_holder.items():
            if reservation.start is None or holder in recorded:
                continue
            job = self._job_of(holder)
            if job is not None:
                recorded.add(holder)
                expected = self._virtual(reservation.start.timestamp())
                self.backfill.expected_start.setdefault(job.record.name, expected)

    def _job_of(self, holder: str) -> JobRun | None:
        """The job of a reservation's holder ("Pod ns/name" or "PodGroup ns/name")."""
        members = holder_pods(holder, self.state.groups.members)
        unit = next((u for m in members if (u := self._unit_of.get(m)) is not None), None)
        return None if unit is None else unit.job

    # ---- events ------------------------------------------------------------------------

    def _push(self, t: float, kind: Kind, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, kind, payload))

    def _first_event_time(self) -> float | None:
        """When the next event is due; None when none is left."""
        events, submits, taken = self._events, self._submits, self._submitted
        if taken < len(submits):
            due = submits[taken].spec.submit
            return due if not events or due <= events[0][0] else events[0][0]
        return events[0][0] if events else None

    def _handle_due(self, t: float) -> None:
        """Handle every event due at `t` or before, in time order (a submission first at one
        time), including those the handling makes due."""
        events, submits = self._events, self._submits
        while True:
            taken = self._submitted
            if taken < len(submits):
                run = submits[taken]
                due = run.spec.submit
                if due <= t and (not events or due <= events[0][0]):
                    self._submitted = taken + 1
                    self._submit(run)
                    continue
            if not events or events[0][0] > t:
                return
            _, _, kind, payload = heapq.heappop(events)
            # (the kinds compared as the module's names: an enum member looked up on its
            # class costs more than the comparison, at each of ~160k events per replay)
            if kind is _FINISH:
                assert isinstance(payload, tuple)
                unit, token = payload
                if unit.token == token:
                    self._finish(unit)
            elif kind is _GONE:
                assert isinstance(payload, str)
                self._gone(payload)
            else:
                assert kind is _RECREATE and isinstance(payload, Unit)
                payload.restarting = False
                payload.attempt += 1
                self._create_pods(payload)

    def _submit(self, job: JobRun) -> None:
        spec = job.spec
        job.usage = self._usage(spec.requests)
        if self._meter is not None:
            job.queue_path = self._meter.path(spec.queue)
            job.queue_amount = spec.requests.get(self._meter.timeline.resource, 0)
        if spec.gang:
            assert spec.min_member is not None
            self.state.upsert_pod_group(
                PodGroup(
                    namespace=spec.namespace,
                    name=spec.name,
                    min_member=spec.min_member,
                    creation_timestamp=self._clock(self.now),
                    topology=spec.topology.request,
                )
            )
            job.units = [Unit(job, 0, range(spec.pods), spec.min_member)]
        else:
            job.units = [Unit(job, i, range(i, i + 1), 1) for i in range(spec.pods)]
        job.unfinished = len(job.units)
        for unit in job.units:
            self._create_pods(unit)

    def _add_devices(self, devices: ScenarioDevices) -> None:
        """The scenario's DRA objects; this world plays the resourceclaim controller too
        (`_remove`)."""
        for device_class in devices.classes:
            self.state.upsert_device_class(device_class)
        for resource_slice in devices.slices:
            self.state.apply("ResourceSlice", resource_slice)
        for template in devices.templates:
            self.state.apply("ResourceClaimTemplate", template)

    def _create_pods(self, unit: Unit) -> None:
        spec = unit.job.spec
        created = self._clock(self.now)
        unit.pods = []
        unit.bound = set()
        annotations = {GROUP_ANNOTATION: spec.name} if spec.gang else {}
        labels = {**spec.labels, JOB_LABEL: spec.name}
        if spec.queue and self._queues_on:
            labels[QUEUE_LABEL] = spec.queue
        suffix = f"-r{unit.attempt}" if unit.attempt else ""
        last = unit.pod_indices[-1] if unit.pod_indices else None
        for i in unit.pod_indices:
            name = f"{spec.name}-{i}{suffix}"
            pod = Pod(
                namespace=spec.namespace,
                name=name,
                uid=f"{spec.namespace}/{name}",
                requests=dict(spec.requests),
                scheduler_name=spec.scheduler_name,
                priority_class_name=spec.priority_class,
                # Each pod its own mappings; the last takes those made here.
                labels=labels if i == last else dict(labels),
                annotations=annotations if i == last else dict(annotations),
                node_selector=spec.node_selector,
                tolerations=spec.tolerations,
                pod_affinity=spec.pod_affinity,
                spread_constraints=spec.spread_constraints,
                creation_timestamp=created,
                termination_grace_period_seconds=spec.grace_seconds,
                resource_claims=spec.device_claims,
                max_runtime_seconds=spec.stated_runtime,
            )
            if spec.claim_templates:
                self._create_claims(spec, pod)
            unit.pods.append(pod.key)
            self._unit_of[pod.key] = unit
            self.state.upsert_pod(pod)
            self._count_pending(unit, 1)

    def _create_claims(self, spec: JobSpec, pod: Pod) -> None:
        """As the ephemeral volume controller: the pod's own claims, owned by it."""
        volumes = []
        for volume, template in spec.claim_templates:
            claim = replace(template, name=f"{pod.name}-{volume}", owner_uids=(pod.uid,))
            self.state.upsert_volume_object(claim)
            volumes.append(PodVolume(volume, claim.name, ephemeral=True))
        pod.volumes = tuple(volumes)

    def _delete_claims(self, pod: Pod) -> None:
        """The pod is gone, its ephemeral claims with it; a PV one was bound to is made
        available again (as a local volume provisioner recycles it)."""
        volumes = self.state.volumes
        for volume in pod.volumes:
            key = f"{pod.namespace}/{volume.claim}"
            claim = volumes.claims.get(key)
            if claim is None:
                continue
            self.state.remove_volume_object("PersistentVolumeClaim", key)
            pv = volumes.volumes.get(claim.volume_name) if claim.volume_name else None
            if pv is not None and pv.claim_ref == key:
                self.state.upsert_volume_object(replace(pv, claim_ref="", phase="Available"))

    def _count_pending(self, unit: Unit, change: int, started: bool = False) -> None:
        """`started`: the pod left pending bound (what it asks is allocated now)."""
        self._pending_by_class[self._class_col[unit.job.record.group]] += change
        if self._meter is None:
            return
        if started:
            self._meter.started(unit.job.queue_path, unit.job.queue_amount)
        else:
            self._meter.waiting(unit.job.queue_path, change, unit.job.queue_amount)

    def _finish(self, unit: Unit) -> None:
        job = unit.job
        unit.finished = True
        unit.done = job.spec.work
        unit.running_since = None
        for key in unit.pods:
            self._remove(key)
        job.unfinished -= 1
        if job.unfinished == 0:
            job.record.end = self.now
            if job.spec.gang:
                self.state.remove_pod_group(f"{job.spec.namespace}/{job.spec.name}")

    def _gone(self, key: str) -> None:
        unit = self._unit_of.get(key)
        self._remove(key)
        if unit is None:
            return
        unit.terminating.discard(key)
        if unit.restarting and not unit.terminating:
            self._push(self.now + unit.job.spec.restart_delay, Kind.RECREATE, unit)

    def _remove(self, key: str) -> None:
        pod = self.state.pods.by_key.get(key)
        if pod is None:
            return
        unit = self._unit_of.get(key)
        if unit is not None and not pod.node_name:
            self._count_pending(unit, -1)
        if key in self.state.pods.bound:
            self._account(self._usage_of(pod, unit), -1)
            if unit is not None and self._meter is not None:
                self._meter.bound(unit.job.queue_path, -unit.job.queue_amount)
        pod_gone(self.state, key)
        self._delete_claims(pod)
        self._unit_of.pop(key, None)
        self._failed_at.pop(key, None)

    # ---- decisions ---------------------------------------------------------------------

    def apply(self, decisions: list[Decision]) -> None:
        """Carry out decisions as a cluster would (the passes' own, or injected by a test)."""
        counts = self.decisions
        for decision in decisions:
            kind = type(decision).__name__
            counts[kind] = counts.get(kind, 0) + 1
        self.controllers.dispatcher.dispatch(decisions)

    def _evicted(self, decision: Evict) -> None:
        preemptor = self._unit_of.get(decision.preemptor)
        victim = self._unit_of.get(decision.pod)
        # Taken for another queue's pod: a reclaim (with queues on, priority preemption
        # stays within a queue).
        reclaim = (
            preemptor is not None
            and victim is not None
            and bool(victim.job.spec.queue)
            and bool(preemptor.job.spec.queue)
            and victim.job.spec.queue != preemptor.job.spec.queue
        )
        self._evict(decision.pod, reclaim, decision.broken_promise is not None)
        if preemptor is not None:
            preemptor.job.record.evictions_caused += 1

    def _unschedulable(self, decision: Unschedulable) -> None:
        unit = self._unit_of.get(decision.pod)
        if unit is not None and HELD_BY_TOLERATION in decision.message:
            unit.job.record.held_by_toleration = True
        if not self._clock_rules:
            return
        self._failed_at[decision.pod] = self.now
        stale = self.now + self.scheduler.queue.max_unschedulable_seconds
        due = math.ceil(stale * 1e6) / 1e6  # the clock's resolution is a microsecond
        heapq.heappush(self._stale, (due, self.now, decision.pod, 0))

    def _reserve(self, decision: Reserve) -> None:
        self.reservations[decision.node] = decision
        self._read_clock(True)

    def _warn(self, decision: Warn | InternalError) -> None:
        if isinstance(decision, InternalError):
            decision = Warn(f"Pod {decision.pod}", f"internal error: {decision.error}")
        self._warnings.append(decision)  # checked against the final state in `warnings`

    def _bind(self, decision: Bind) -> None:
        pod = self.state.pods.by_key[decision.pod]
        bound_at = self._clock(self.now)
        pod.node_name = decision.node
        pod.phase = "Running"
        pod.start_time = bound_at
        pod.conditions = (PodCondition("PodScheduled", "True", bound_at),)
        self.state.confirm_bound(pod)
        self._failed_at.pop(decision.pod, None)
        unit = self._unit_of.get(decision.pod)
        self._account(self._usage_of(pod, unit), 1)
        if unit is None:
            return
        self._count_pending(unit, -1, started=True)
        unit.bound.add(decision.pod)
        record = unit.job.record
        for step in decision.pre_bind:
            if isinstance(step, BindVolumes):
                record.volume_bindings.update((b.claim, b.volume) for b in step.bindings)
            elif isinstance(step, ReserveClaims):
                record.device_allocations.update(allocated_devices(step))
        if record.first_bind is None:
            record.first_bind = self.now
        if unit.running_since is None and not unit.restarting and len(unit.bound) >= unit.needed:
            self._run(unit)

    def _run(self, unit: Unit) -> None:
        job = unit.job
        unit.running_since = self.now
        if job.record.start is None:
            job.record.start = self.now
            if job.spec.gang and job.record.first_bind is not None:
                job.record.gang_start_delay = self.now - job.record.first_bind
        unit.token += 1
        topology = job.spec.topology
        if topology.key:
            nodes = self.state.nodes
            spanned = domains_spanned(
                (
                    nodes.by_row[nodes.row_of[self.state.pods.by_key[k].node_name]]
                    for k in unit.bound
                ),
                topology.key,
            )
            job.record.domains.append(spanned)
            unit.pace = topology.slowdown ** (spanned - 1)
        self._push(
            self.now + (job.spec.work - unit.done) * unit.pace, Kind.FINISH, (unit, unit.token)
        )

    def _evict(self, key: str, reclaim: bool = False, broken_promise: bool = False) -> None:
        unit = self._unit_of.get(key)
        if unit is None:
            pod = self.state.pods.by_key.get(key)
            if pod is not None:
                self.state.mark_terminating(key, self._clock(self.now))
                self._push(self.now + pod.termination_grace_period_seconds, Kind.GONE, key)
            return
        if unit.restarting or unit.finished:
            return  # already going (e.g. another member of a gang that restarts whole)
        record = unit.job.record
        record.preemptions += 1
        record.broken_promises += broken_promise
        lost_before = record.lost_gpu_seconds
        self._interrupt(unit)
        if reclaim:
            record.reclaims += 1
            record.reclaim_lost_gpu_seconds += record.lost_gpu_seconds - lost_before
        unit.restarting = True
        when = self._clock(self.now)
        for pod_key in unit.pods:
            pod = self.state.pods.by_key.get(pod_key)
            if pod is None:
                continue
            if pod.node_name:
                # The victim's controller deletes the rest of a gang too; all get their grace.
                self.state.mark_terminating(pod_key, when)
                unit.terminating.add(pod_key)
                self._push(self.now + pod.termination_grace_period_seconds, Kind.GONE, pod_key)
            else:
                self._remove(pod_key)

    def _interrupt(self, unit: Unit) -> None:
        """Stop the unit's work; keep what the last checkpoint saved, count the rest as lost."""
        unit.token += 1
        if unit.running_since is None:
            return
        spec = unit.job.spec
        total = unit.done + (self.now - unit.running_since) / unit.pace
        interval = spec.checkpoint_interval
        kept = math.floor(total / interval) * interval if interval else 0.0
        kept = min(max(kept, unit.done), spec.work)
        record = unit.job.record
        record.lost_gpu_seconds += (total - kept) * unit.pace * spec.gpus_per_pod * len(unit.bound)
        if kept == unit.done:
            record.no_progress_preemptions += 1
        unit.done = kept
        unit.running_since = None

    def _read_clock(self, rules: bool) -> None:
        """Whether some rule reads the clock: only then is a waiting pod retried when stale."""
        self._clock_rules = rules
        self.scheduler.queue.max_unschedulable_seconds = self._stale_after if rules else math.inf

    # ---- measurement -------------------------------------------------------------------

    def _clock(self, t: float) -> datetime:
        # Asked for the same instant by every pod bound or created in it: made once.
        if t != self._stamp[0]:
            self._stamp = (t, self.start + timedelta(seconds=t))
        return self._stamp[1]

    def _virtual(self, stamp: float) -> float:
        return stamp - self.start.timestamp()

    def _capacity(self) -> dict[str, float]:
        rows = self.state.nodes.rows
        alloc = self.state.nodes.allocatable[:rows][self.state.nodes.valid[:rows]]
        return {
            r: float(alloc[:, c].sum())
            for r, c in zip(self._resources, self._resource_cols, strict=True)
        }

    def _usage(self, requests: dict[str, int]) -> list[tuple[int, int]]:
        """(tracked resource's position, amount) for each tracked resource requested: what a
        pod adds to the cluster's allocated totals (made once per job, not per pod and
        event)."""
        return [(i, requests[r]) for i, r in enumerate(self._resources) if requests.get(r)]

    def _usage_of(self, pod: Pod, unit: Unit | None) -> list[tuple[int, int]]:
        """`_usage` of a pod: its job's, made at submission, for a job's pod."""
        return unit.job.usage if unit is not None else self._usage(pod.requests)

    def _account(self, usage: list[tuple[int, int]], sign: int) -> None:
        """Keep the cluster's allocated totals as pods bind and leave (cheaper than summing
        the node arrays at every instant)."""
        used = self._used
        for i, amount in usage:
            used[i] += sign * amount

    def _sample(self) -> None:
        self.timeline.record(self.now, self._used, self._pending_by_class, self._fragmentation())
        if self._meter is not None:
            self._meter.sample(self.now)

    def _queue_meter(self, queues: list[Queue], gpu: str | None) -> QueueMeter | None:
        """Per-queue measurement, of the GPUs (else the CPU) of the cluster."""
        if not queues:
            return None
        resource = gpu or CPU
        rows = self.state.nodes.rows
        col = self.state.nodes.resources.intern(resource)
        alloc = self.state.nodes.allocatable[:rows, col][self.state.nodes.valid[:rows]]
        scheduler = None
        if self._queues_on:
            scheduler = self._scheduler_fair_shares
            self.state.queues.measured = frozenset({resource})  # named by no queue, maybe
        return QueueMeter(queues, resource, int(alloc.sum()), scheduler)

    def _scheduler_fair_shares(self) -> list[int]:
        """The scheduler's fair shares of the measured queues' share resource."""
        assert self._meter is not None
        shares = self.state.queue_fair_shares()
        resource = self._meter.timeline.resource
        return [shares.get(name, {}).get(resource, 0) for name in self._meter.timeline.queues]

    def _fragmentation(self) -> float:
        """GPUs free on nodes that are partly used: room no whole-node job can take.

        Kept per node and updated for the rows that changed since the last sample (most
        instants change one or two nodes), as an exact integer sum.
        """
        col = self._gpu_col
        if col is None:
            return 0.0
        nodes = self.state.nodes
        seen, fragmented = self._fragmented
        logged = nodes.rows_changed_since(seen)
        if logged is not None and not logged:
            return fragmented
        partly, total = self._partly_free, self._partly_total
        changed: Iterable[int] | None = logged
        if changed is None or len(partly) != nodes.rows:
            partly = self._partly_free = [0] * nodes.rows
            total = 0
            changed = range(nodes.rows)
        alloc, free, valid = nodes.allocatable, nodes.free_cells(), nodes.valid
        for row in changed:  # (a row logged twice: the second time changes nothing)
            room = free[row, col]
            now = room if 0 < room < alloc.item(row, col) and valid.item(row) else 0
            total += now - partly[row]
            partly[row] = now
        self._partly_total = total
        mark = nodes.change_mark() if logged is None else seen + len(logged)
        self._fragmented = (mark, total / self._gpu_scale)
        return self._fragmented[1]

    def _node_gpus(self) -> float:
        col = self._gpu_col
        if col is None:
            return 0.0
        rows = self.state.nodes.rows
        alloc = self.state.nodes.allocatable[:rows, col][self.state.nodes.valid[:rows]]
        return float(alloc.max(initial=0)) / self._gpu_scale


def _record(spec: JobSpec) -> JobRecord:
    return JobRecord(
        name=f"{spec.namespace}/{spec.name}",
        priority_class=spec.priority_class or "(none)",
        group=spec.workload_class or spec.priority_class or "(none)",
        pods=spec.pods,
        gpus=spec.gpus_per_pod * spec.pods,
        gang=spec.gang,
        submit=spec.submit,
        queue=spec.queue,
    )
