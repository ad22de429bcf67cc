"""Carry a scheduling pass's decisions out against the API server.

`apply` runs on the loop thread: it reads what each write needs from ClusterState and hands
the writes to worker threads (rate limited by the client's token bucket, retried by the client
on 429/5xx). Workers never touch ClusterState: a failed bind comes back to the loop as a
`BindFailed` fact, so the room assumed for the pod is given back and the pod requeued.
Every write is guarded: right before it is sent (after any wait for the rate limit or a
retry) the client asks whether this replica still leads; a replica that lost its lease writes
nothing more.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from batchsched.controllers import Dispatcher
from batchsched.decisions import (
    Bind,
    BindVolumes,
    Decision,
    Evict,
    GroupPlaced,
    InternalError,
    Nominate,
    PodGroupUpdate,
    PreBind,
    Reserve,
    ReserveClaims,
    Unschedulable,
    Warn,
)
from batchsched.live.claims import Consumer
from batchsched.live.client import (
    MERGE_PATCH,
    STRATEGIC_PATCH,
    ApiError,
    GuardRefused,
    KubeClient,
)
from batchsched.live.events import EventRecorder, ObjectRef, ref_from_label
from batchsched.live.facts import BindFailed, Fact
from batchsched.live.malformed import MALFORMED_REASON, Malformed
from batchsched.live.metrics import Metrics
from batchsched.live.prebind import PreBinder, PreBindError
from batchsched.live.workers import Workers
from batchsched.objects.parse import format_time, pod_group_status_json
from batchsched.objects.records import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER, Pod
from batchsched.state.cluster import ClusterState

log = logging.getLogger(__name__)

PODS = "/api/v1/namespaces/{ns}/pods/{name}"
PODGROUP_STATUS = "/apis/{api}/namespaces/{ns}/podgroups/{name}/status"
_MEMORY = 50_000  # pods whose last written condition is remembered
# Binds waiting on a PreBind (the PV controller) at once; more wait for a thread.
PRE_BIND_WORKERS = 64


@dataclass(frozen=True, slots=True)
class _PodRef:
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return PODS.format(ns=self.namespace, name=self.name)

    def object_ref(self) -> ObjectRef:
        return ObjectRef("Pod", self.namespace, self.name, self.uid)

    def consumer(self) -> Consumer:
        return Consumer(self.namespace, self.name, self.uid)


@dataclass(slots=True)
class _Pass:
    """What the handlers of one `apply` share: the state, when each pod was first seen
    pending, and the status patches gathered per pod (written once each, at the end)."""

    state: ClusterState
    pending_since: dict[str, float]
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)


def _ref(pod: Pod) -> _PodRef:
    return _PodRef(pod.namespace, pod.name, pod.uid)


def _now() -> str:
    return format_time(datetime.now(UTC))


class Actuator:
    def __init__(
        self,
        client: KubeClient,
        events: EventRecorder,
        feedback: queue.Queue[Fact],
        metrics: Metrics,
        is_leading: Callable[[], bool],
        scheduler_name: str = "batchsched",
        dry_run: bool = False,
        workers: int = 16,
        pre_bind_poll: float | None = None,
        dispatcher: Dispatcher | None = None,
    ) -> None:
        """`dispatcher`: the world's, which this registers its writes with (one of its own
        if not given)."""
        self.client = client
        self.events = events
        self.feedback = feedback
        self.metrics = metrics
        self.is_leading = is_leading
        self.scheduler_name = scheduler_name
        self.dry_run = dry_run
        self._workers = Workers(workers, "actuator")
        # Binds with a PreBind wait (up to bindTimeoutSeconds) on threads of their own, so
        # that they never hold up the other writes.
        self._pre_bind_workers = Workers(PRE_BIND_WORKERS, "prebind")
        self.pre_binder = PreBinder(client, is_leading, pre_bind_poll)
        # What was last written, so unchanged conditions and statuses are not written again.
        # Workers forget an entry when its write failed, hence the lock.
        self._lock = threading.Lock()
        self._conditions: OrderedDict[str, str] = OrderedDict()  # pod -> message
        self._group_status: dict[str, dict[str, Any]] = {}  # PodGroup key -> status
        self._passing: _Pass | None = None  # the pass `apply` is carrying out
        self._dispatcher = dispatcher if dispatcher is not None else Dispatcher()
        on = self._dispatcher.on
        on(Bind, self._on_bind)
        on(Unschedulable, self._unschedulable)
        on(Nominate, self._on_nominate)
        on(Evict, self._on_evict)
        on(PodGroupUpdate, self._on_group)
        on(Warn, self._on_warn)
        on(GroupPlaced, self._on_placed)
        on(Reserve, self._on_reserve)

    # ---- on the loop thread ----------------------------------------------------------

    def apply(
        self,
        decisions: list[Decision],
        state: ClusterState,
        pending_since: dict[str, float],
    ) -> None:
        """Start the writes for one pass. `pending_since`: monotonic time each pod was first
        seen pending (for the end-to-end latency metric)."""
        for decision in decisions:
            if isinstance(decision, InternalError):
                log.error("internal error while scheduling %s: %s", decision.pod, decision.detail)
        if self.dry_run:
            self._log_dry_run(decisions)
            return
        self._passing = _Pass(state, pending_since)
        self._dispatcher.dispatch(decisions)
        for key, status in self._passing.statuses.items():
            pod = state.pods.by_key.get(key)
            if pod is not None:
                self._start(self._patch_status, _ref(pod), status)

    @property
    def _pass(self) -> _Pass:
        assert self._passing is not None, "a decision handler runs only inside apply"
        return self._passing

    def _on_bind(self, decision: Bind) -> None:
        pod = self._pass.state.pods.by_key.get(decision.pod)
        if pod is None:
            return
        with self._lock:
            self._conditions.pop(pod.key, None)
        since = self._pass.pending_since.get(pod.key)
        if decision.pre_bind:
            self._pre_bind_workers.submit(
                self._bind, _ref(pod), decision.node, since, decision.pre_bind
            )
        else:
            self._start(self._bind, _ref(pod), decision.node, since, ())

    def _on_nominate(self, decision: Nominate) -> None:
        self._pass.statuses.setdefault(decision.pod, {})["nominatedNodeName"] = decision.node

    def _on_evict(self, decision: Evict) -> None:
        pods = self._pass.state.pods.by_key
        victim = pods.get(decision.pod)
        if victim is not None:
            preemptor = pods.get(decision.preemptor)
            by = _ref(preemptor) if preemptor is not None else None
            self._start(self._evict, _ref(victim), decision, by)

    def _on_group(self, decision: PodGroupUpdate) -> None:
        group = self._pass.state.groups.by_key.get(decision.group)
        if group is None:
            return
        path = PODGROUP_STATUS.format(api=group.api_version, ns=group.namespace, name=group.name)
        body = pod_group_status_json(group, decision.status)
        with self._lock:
            changed = self._group_status.get(decision.group) != body
            self._group_status[decision.group] = body
        if changed:
            self._start(self._group, path, decision.group, body)

    def _on_warn(self, decision: Warn) -> None:
        log.warning("%s: %s", decision.obj, decision.message)
        ref = _event_ref(decision.obj, self._pass.state)
        self.events.record(ref, "Warning", "SchedulerWarning", "Scheduling", decision.message)

    def _on_placed(self, decision: GroupPlaced) -> None:
        ref = _event_ref(f"PodGroup {decision.group}", self._pass.state)
        self.events.record(ref, "Normal", "Scheduled", "Scheduling", decision.message)

    def _on_reserve(self, decision: Reserve) -> None:
        log.info("reserving node %s for %s", decision.node, decision.pod)

    def _unschedulable(self, decision: Unschedulable) -> None:
        state, statuses = self._pass.state, self._pass.statuses
        pod = state.pods.by_key.get(decision.pod)
        if pod is None:
            return
        if not self.dry_run:
            # Aggregated by the recorder: a pod failing the same way every cycle writes once.
            self.events.record(
                _ref(pod).object_ref(),
                "Warning",
                "FailedScheduling",
                "Scheduling",
                decision.message,
            )
        current = pod.condition("PodScheduled")
        shown = (
            current is not None
            and current.status == "False"
            and current.reason == "Unschedulable"
            and current.message == decision.message
        )
        with self._lock:
            if shown or self._conditions.get(pod.key) == decision.message:
                return
            self._conditions[pod.key] = decision.message
            self._conditions.move_to_end(pod.key)
            while len(self._conditions) > _MEMORY:
                self._conditions.popitem(last=False)
        same_status = current is not None and current.status == "False"
        since = current.last_transition_time if same_status and current is not None else None
        statuses.setdefault(pod.key, {})["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": decision.message,
                "lastTransitionTime": format_time(since) if since is not None else _now(),
            }
        ]

    def report_malformed(self, report: Malformed, scheduler_names: frozenset[str]) -> None:
        """A Warning event on an object the informers could not read; a pod of ours that waits
        also gets PodScheduled=False saying why, as `kubectl describe pod` shows."""
        ref = report.ref  # the informer has logged it already
        if self.dry_run or not ref.name:
            return
        ours = report.waiting_for in scheduler_names
        verdict = "cannot read this pod and does not schedule it" if ours else "ignores it"
        note = f"{self.scheduler_name} {verdict}: {report.message}"
        self.events.record(ref, "Warning", MALFORMED_REASON, "Reading", note)
        current = report.condition or {}
        if not ours or (current.get("status") == "False" and current.get("message") == note):
            return
        since = current.get("lastTransitionTime") if current.get("status") == "False" else None
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": note,
            "lastTransitionTime": since if isinstance(since, str) else _now(),
        }
        pod = _PodRef(ref.namespace, ref.name, ref.uid)
        self._start(self._patch_status, pod, {"conditions": [condition]})

    def forget_pod(self, key: str) -> None:
        """The pod was deleted: its last written condition is no longer remembered."""
        with self._lock:
            self._conditions.pop(key, None)

    def forget_group(self, key: str) -> None:
        """The PodGroup was deleted: its last written status is no longer remembered."""
        with self._lock:
            self._group_status.pop(key, None)

    def _start(self, job: Callable[..., None], *args: Any) -> None:
        self._workers.submit(job, *args)

    def _log_dry_run(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, InternalError):
                continue  # logged by `apply`, with its traceback
            if isinstance(decision, Unschedulable):
                # Logged when the reason changes, not every cycle.
                if self._conditions.get(decision.pod) == decision.message:
                    continue
                self._conditions[decision.pod] = decision.message
                while len(self._conditions) > _MEMORY:
                    self._conditions.popitem(last=False)
            log.info("dry-run: %s", describe(decision))

    def wait(self) -> None:
        """Until the writes started so far are done."""
        self._pre_bind_workers.wait()
        self._workers.wait()
        self.events.flush()

    def stop_waiting(self) -> None:
        """Shutting down: binds waiting on the PV controller give up (undoing nothing; the
        next leader finds the claims bound or not and schedules the pods again)."""
        self.pre_binder.stopping.set()

    def shutdown(self) -> None:
        self._pre_bind_workers.shutdown()
        self._workers.shutdown()

    @property
    def in_flight(self) -> int:
        return self._workers.in_flight + self._pre_bind_workers.in_flight

    # ---- on worker threads -----------------------------------------------------------

    def _bind(
        self,
        pod: _PodRef,
        node: str,
        pending_since: float | None,
        pre_bind: tuple[PreBind, ...],
    ) -> None:
        try:
            undo = self.pre_binder.run(pre_bind, pod.consumer())
        except GuardRefused:
            log.info("not leading: dropping bind of %s", pod.key)
            self.feedback.put(BindFailed(pod.key, "not leading"))
            return
        except PreBindError as err:
            self._pre_bind_failed(pod, node, str(err))
            return
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            self.client.request("POST", f"{pod.path}/binding", body=body, guard=self.is_leading)
        except GuardRefused:
            undo()
            log.info("not leading: dropping bind of %s", pod.key)
            self.feedback.put(BindFailed(pod.key, "not leading"))
            return
        except ApiError as err:
            undo()
            self.metrics.binds.labels(result="failed").inc()
            self.feedback.put(BindFailed(pod.key, str(err)))
            log.info("bind of %s to %s failed: %s", pod.key, node, err)
            if err.status not in (404, 409):
                note = f"Binding rejected: {err.message}"
                self.events.record(pod.object_ref(), "Warning", "FailedScheduling", "Binding", note)
            return
        self.metrics.binds.labels(result="bound").inc()
        if pending_since is not None:
            self.metrics.e2e_latency.observe(time.monotonic() - pending_since)
        note = f"Successfully assigned {pod.key} to {node}"
        self.events.record(pod.object_ref(), "Normal", "Scheduled", "Binding", note, once=True)

    def _pre_bind_failed(self, pod: _PodRef, node: str, message: str) -> None:
        """The pod is tried again (its room and volumes given back) and says why, as
        upstream's scheduler error does."""
        self.metrics.binds.labels(result="failed").inc()
        self.feedback.put(BindFailed(pod.key, message))
        log.info("PreBind of %s on %s failed: %s", pod.key, node, message)
        if self.pre_binder.stopping.is_set():
            return
        self.events.record(pod.object_ref(), "Warning", "FailedScheduling", "Binding", message)
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulerError",
            "message": message,
            "lastTransitionTime": _now(),
        }
        with self._lock:
            self._conditions.pop(pod.key, None)
        self._patch_status(pod, {"conditions": [condition]})

    def _patch_status(self, pod: _PodRef, status: dict[str, Any]) -> None:
        try:
            self.client.request(
                "PATCH",
                f"{pod.path}/status",
                body={"status": status},
                content_type=STRATEGIC_PATCH,
                guard=self.is_leading,
            )
        except (GuardRefused, ApiError) as err:
            with self._lock:
                self._conditions.pop(pod.key, None)  # so the next pass writes it again
            log.info("status of %s not written: %s", pod.key, err)

    def _evict(self, victim: _PodRef, decision: Evict, preemptor: _PodRef | None) -> None:
        why = "preempting to accommodate a higher priority pod"
        if decision.reclaim is not None:
            why = f"reclaiming for queue {decision.reclaim[0]} from queue {decision.reclaim[1]}"
        elif decision.broken_promise is not None:
            why = f"past its stated runtime on a node reserved for {decision.broken_promise}"
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{self.scheduler_name}: {why}",
            "lastTransitionTime": _now(),
        }
        try:
            self.client.request(
                "PATCH",
                f"{victim.path}/status",
                body={"status": {"conditions": [condition]}},
                content_type=STRATEGIC_PATCH,
                guard=self.is_leading,
            )
            # The UID precondition: never delete a new pod that took the victim's name.
            options = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": victim.uid},
            }
            self.client.request("DELETE", victim.path, body=options, guard=self.is_leading)
        except GuardRefused:
            log.info("not leading: dropping eviction of %s", victim.key)
            return
        except ApiError as err:
            if err.status == 404:
                return  # already gone: the room is freed all the same
            log.warning("preemption of %s for %s failed: %s", victim.key, decision.preemptor, err)
            return
        self.metrics.victims.inc()
        ref = victim.object_ref()
        if decision.broken_promise is not None:
            # docs/backfill.md#broken-promises: the victim is told the holder and its overrun
            # (the eviction's reason says both), the holder's pod what went for it.
            note = decision.reason.removeprefix("Backfill: ")
            self.events.record(ref, "Normal", "BrokenPromise", "Preempting", note, once=True)
            if preemptor is not None:
                note = f"Evicted {victim.key} on node {decision.node}, past its stated runtime"
                self.events.record(
                    preemptor.object_ref(), "Normal", "Reserving", "Preempting", note
                )
            return
        if decision.reclaim is None:
            note = f"Preempted by {decision.preemptor} on node {decision.node}"
            self.events.record(ref, "Normal", "Preempted", "Preempting", note, once=True)
            return
        # A reclaim (docs/queues.md#reclaim): both sides are told, naming both queues.
        mine, theirs = decision.reclaim
        note = (
            f"Reclaimed by {decision.preemptor} of queue {mine} from queue {theirs} on node "
            f"{decision.node}"
        )
        self.events.record(ref, "Normal", "Reclaimed", "Preempting", note, once=True)
        if preemptor is not None:
            note = (
                f"Reclaimed {victim.key} of queue {theirs} for queue {mine} on node {decision.node}"
            )
            self.events.record(preemptor.object_ref(), "Normal", "Reclaiming", "Preempting", note)

    def _group(self, path: str, group: str, status: dict[str, Any]) -> None:
        try:
            self.client.request(
                "PATCH",
                path,
                body={"status": status},
                content_type=MERGE_PATCH,
                guard=self.is_leading,
            )
        except (GuardRefused, ApiError) as err:
            with self._lock:
                self._group_status.pop(group, None)
            log.warning("status of PodGroup %s not written: %s", group, err)


def _event_ref(label: str, state: ClusterState) -> ObjectRef:
    """The object an event is about; a PodGroup's API is the one its record came from."""
    ref = ref_from_label(label)
    group = (
        state.groups.by_key.get(f"{ref.namespace}/{ref.name}") if ref.kind == "PodGroup" else None
    )
    return ref if group is None else replace(ref, api_version=group.api_version)


def describe(decision: Decision) -> str:
    """What a decision would do, in words (for dry-run logs)."""
    if isinstance(decision, Bind):
        volumes = sum(len(s.bindings) for s in decision.pre_bind if isinstance(s, BindVolumes))
        devices = sum(
            len(s.claims) + (s.extended is not None)
            for s in decision.pre_bind
            if isinstance(s, ReserveClaims)
        )
        done = [
            f"binding {volumes} volume claim(s)" if volumes else "",
            f"writing {devices} resource claim(s)" if devices else "",
        ]
        after = " and ".join(d for d in done if d)
        return f"would bind {decision.pod} to {decision.node}{f' after {after}' if after else ''}"
    if isinstance(decision, Unschedulable):
        return f"{decision.pod} is unschedulable: {decision.message}"
    if isinstance(decision, Nominate):
        if decision.node is None:
            return f"would clear the nominated node of {decision.pod}"
        return f"would nominate node {decision.node} for {decision.pod}"
    if isinstance(decision, Evict):
        return (
            f"would preempt {decision.pod} on {decision.node} for {decision.preemptor}"
            f" ({decision.reason})"
        )
    if isinstance(decision, PodGroupUpdate):
        status = decision.status
        if status.conditions:  # an upstream group: its status is its conditions
            told = ", ".join(f"{c.type}={c.status} ({c.reason})" for c in status.conditions)
            return f"would set PodGroup {decision.group} conditions: {told}"
        return (
            f"would set PodGroup {decision.group} status: phase {status.phase}, "
            f"admitted {status.admitted}, running {status.running}"
        )
    if isinstance(decision, Reserve):
        return f"would reserve node {decision.node} for {decision.pod}"
    if isinstance(decision, InternalError):
        return f"internal error while scheduling {decision.pod}: {decision.error}"
    if isinstance(decision, GroupPlaced):
        return f"would tell PodGroup {decision.group}: {decision.message}"
    return f"warning: {decision.obj}: {decision.message}"
