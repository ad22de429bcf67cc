"""The scheduling pass: pop pods in queue order, filter, score, post-filter, decide.

The pass mutates ClusterState only with its own assumptions (a pod assumed on its node, a
nomination, a victim marked terminating) and returns every decision as data for the world to
carry out.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Hashable, Iterator, Sequence
from datetime import datetime
from typing import NamedTuple

from batchsched.config import SchedulerConfig
from batchsched.decisions import (
    Bind,
    Decision,
    Evict,
    InternalError,
    Nominate,
    Reserve,
    Unschedulable,
)
from batchsched.framework.hints import ClusterHints, HintPlans
from batchsched.framework.interface import (
    Cycle,
    Diagnosis,
    GroupAttempt,
    GroupPlugin,
    WaitPlugin,
)
from batchsched.framework.runtime import Framework
from batchsched.framework.signature import HintGroup, Twins
from batchsched.objects.records import Pod
from batchsched.scheduling.admission import Admission, not_ready
from batchsched.state.cluster import ClusterState
from batchsched.state.mark import ClusterMark
from batchsched.state.queue import QueuedPod, SchedulingQueue
from batchsched.state.queue_order import QueueOrder
from batchsched.state.reservations import holder_pods

# What runs at a pass's end, after the group plugins: the worlds' controllers
# (controllers/), told the groups whose members changed and the pass's evictions.
AfterPass = Callable[[set[str], Sequence[Evict], datetime], list[Decision]]


class _Failure(NamedTuple):
    """A pod shape's failed attempt: what it was told, by which plugins, and the times
    between which the answer holds with the cluster unchanged: from the attempt (a clock
    going back may change it too) to `Cycle.holds_until`."""

    message: str
    rejected_by: frozenset[str]
    since: float
    until: float


def _holding(failed: _Failure | None, now: float) -> _Failure | None:
    """The failure if its answer still holds at `now` (the cluster unchanged since)."""
    return failed if failed is not None and failed.since <= now < failed.until else None


class Scheduler:
    def __init__(
        self, state: ClusterState, config: SchedulerConfig, queueing_hints: bool = True
    ) -> None:
        """`queueing_hints=False` retries every waiting pod after every change (for tests
        that check the hints change how fast, never what, and for comparisons)."""
        self.state = state
        self.config = config
        self.frameworks = {p.scheduler_name: Framework(p) for p in config.profiles}
        self.default_framework = self.frameworks[config.profiles[0].scheduler_name]
        self.queue = SchedulingQueue(
            sort_key=self.default_framework.queue_sort.sort_key,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
        )
        self.queue.lanes = QueueOrder(state)  # with Queue objects: docs/queues.md#queue-order
        # What the queue asks about changes (framework/hints.py); the failed twins below
        # are kept for the cluster as of its marks.
        self.hints = ClusterHints(state, self._hint_plans_for, self.failed_as_is)
        if queueing_hints:
            self.queue.hints = self.hints
        self.messages: dict[str, str] = {}  # last unschedulable message per pending pod
        # Pod shapes that found no way, for the cluster as of `_failed_at`. A twin of such a
        # pod would be told the same, so it is told at once, in this pass or a later one,
        # until the cluster moves or the answer's time runs out (a rule reading the clock).
        self._failed_shapes: dict[Hashable, _Failure] = {}
        self._failed_at: Hashable = None
        self._pass_now: datetime | None = None  # the time of the current pass
        # The pod last told a failure or remembered failing, the time of that pass and what
        # its failure is remembered under: asked at once whether it failed as is, the queue
        # is answered without judging its verdicts again (were the cluster to have moved
        # since, the failures remembered would be forgotten).
        self._last_failed: tuple[Pod, datetime, Hashable] | None = None
        # Per queued pod, its shape (framework/signature.py); dropped when it changes. When
        # affinity terms come to read more labels, the failures and groups kept by the old
        # shapes go with them.
        self.twins = Twins(state, self._shapes_dropped)
        self._queues_at: Hashable = None  # `state.queue_labels_at()` as of the last pass
        self.admission = Admission(state, lambda pod: self.framework_for(pod).profile)
        self.group_plugins: list[GroupPlugin] = []
        self.after_pass: list[AfterPass] = []
        for framework in self.frameworks.values():
            for each in framework.plugins.values():
                each.attach(state)
            plugin = framework.group_plugin
            if plugin is not None and plugin not in self.group_plugins:
                self.group_plugins.append(plugin)
        # Per profile, the plugins told of each pod or gang left waiting (Backfill), where
        # they are filters: one enabled as a score alone holds nothing.
        self.wait_plugins: dict[int, list[WaitPlugin]] = {
            id(f): [p for p in f.dynamic_filters if isinstance(p, WaitPlugin)]
            for f in self.frameworks.values()
        }
        # The plugins that rejected the pods of the current attempt (None: unknown, e.g. a
        # refusal at admission), for the wait plugins.
        self._rejected_by: frozenset[str] | None = frozenset()

    def owns(self, pod: Pod) -> bool:
        """Pods of a configured profile; a pod naming no scheduler goes to the first one."""
        return not pod.scheduler_name or pod.scheduler_name in self.frameworks

    def framework_for(self, pod: Pod) -> Framework:
        return self.frameworks.get(pod.scheduler_name, self.default_framework)

    def sync_queue(self, now: datetime) -> None:
        """Bring the queue in line with the pending pods the world has reported."""
        pods = self.state.pods
        departed = pods.drain_departed()
        if departed:
            for framework in self.frameworks.values():
                framework.forget_pods(departed)
            # A remembered failure may name a pod that left (whose reservation kept the pod
            # off a node, docs/backfill.md): nothing kept names a departed pod.
            self._failed_shapes.clear()
        changed = pods.drain_pending_changes()
        if not changed:
            return  # (asked at each instant of a replay: most change no pending pod)
        stamp = now.timestamp()
        pending, queue, messages = pods.pending, self.queue, self.messages
        forget = self.twins.forget
        for key in changed:
            pod = pending.get(key)
            forget(key)
            if pod is None or not self.owns(pod):
                queue.remove(key)
                messages.pop(key, None)
            elif (waiting := not_ready(pod)) is not None:
                # Not attempted until it changes (its gates removed): upstream's PreEnqueue.
                queue.remove(key)
                messages[key] = waiting
            else:
                queue.add(pod, stamp)
                # A new version of another shape no longer shares its group's hints.
                group = entry.group if (entry := queue.entry(key)) is not None else None
                if (
                    isinstance(group, tuple)
                    and self._group_of(self.framework_for(pod), pod, group[1]) != group
                ):
                    self.queue.ungroup(key)

    def bind_failed(self, key: str, now: datetime) -> None:
        """The world could not carry out the pod's binding (its PreBind or Binding failed and
        `state.forget` made it pending again): it waits out a backoff before its next try, as
        upstream requeues a pod whose binding cycle failed, rather than being retried at once
        against an API server that just refused it."""
        self.sync_queue(now)
        if key in self.queue:
            # As of a generation before the failure: retried after the backoff, not left
            # waiting for the cluster to change.
            self.queue.mark_unschedulable(key, now.timestamp(), self.state.generation - 1)

    def schedule_pass(self, now: datetime) -> list[Decision]:
        """Try every pod that is ready now, once, in queue order."""
        return [decision for step in self.pass_steps(now) for decision in step]

    def pass_steps(self, now: datetime) -> Iterator[list[Decision]]:
        """A scheduling pass, yielding each pod's (or group's) decisions as soon as they are
        made, so a live caller can write a binding before the rest of the pass is decided.
        The state already reflects a step's decisions when it is yielded."""
        self.sync_queue(now)
        stamp = now.timestamp()
        state = self.state
        state.advance_queue_usage(stamp)
        for plugins in self.wait_plugins.values():
            for waiter in plugins:
                waiter.before_pass(state, now)
        self._follow_reservations()
        queues_at = state.queue_labels_at()
        if queues_at != self._queues_at:
            # Pods may be in other queues, or in error, now: the waiting ones are grouped
            # anew and retried after this change, not after their wait runs out, so a pod
            # whose queue went is told so (docs/queues.md#which-queue-a-pod-is-in).
            self._queues_at = queues_at
            self.twins.follow()
        self.queue.refresh(stamp, state.generation)
        self._pass_now = now
        evicted: list[Evict] = []  # the group plugins are told the pass's evictions
        while (entry := self.queue.pop()) is not None:
            try:
                step = self._attempt(entry, now)
            except Exception as err:  # one pod's bug must not stop the others
                step = self._internal_error(entry.pod, err, now)
            if state.moved_holders:
                self._follow_reservations()
            for decision in step:
                if isinstance(decision, Evict):
                    evicted.append(decision)
            yield step
        changed = state.groups.drain_changes()
        for plugin in self.group_plugins:
            yield plugin.after_pass(changed, evicted, now)
        for controller in self.after_pass:
            yield controller(changed, evicted, now)
        self._last_failed = None  # asked only within the pass; nothing keeps a gone pod
        self._forget_logged_pods()

    def _follow_reservations(self) -> None:
        """The pods of a holder whose start reservation was made or given back read the
        cluster otherwise now (Backfill lets a holder's pods pass its nodes,
        docs/backfill.md): their shapes are made again, and each leaves the hint group it
        was filed under, whose other members would not pass there; it is retried after the
        next change and filed again under its own shape."""
        moved = self.state.moved_holders
        if not moved:
            return
        members = self.state.groups.members
        keys: list[str] = []
        for holder in sorted(moved):
            keys.extend(holder_pods(holder, members))
        moved.clear()
        for framework in self.frameworks.values():
            framework.shapes.forget(keys)
        for key in keys:
            self.twins.forget(key)
            self.queue.ungroup(key)

    def _forget_logged_pods(self) -> None:
        """The state's log of the pods behind row changes is read only by queueing hints,
        for the changes since a waiting group's marks: older entries are let go, so the pods
        that left long ago are not kept alive by it (docs/live.md, memory)."""
        oldest = None  # asked each pass: most often no group waits
        if self.queue.has_groups():
            for mark in self.queue.group_marks():
                if isinstance(mark, ClusterMark) and (oldest is None or mark.rows < oldest):
                    oldest = mark.rows
        self.state.nodes.forget_pods_before(oldest)

    def _attempt(self, entry: QueuedPod, now: datetime) -> list[Decision]:
        refused = self.admission.refusal(entry.pod)
        if refused is not None:
            decisions = self.admission.withdraw(entry.pod)
            return decisions + self._unschedulable(entry.pod, refused, now, None)
        framework = self.framework_for(entry.pod)
        plugin = framework.group_plugin
        group = plugin.group_of(entry.pod) if plugin is not None else None
        waiters = self.wait_plugins[id(framework)]
        holder = f"Pod {entry.pod.key}" if group is None else f"PodGroup {group}"
        self._rejected_by = frozenset()
        if plugin is None or group is None:
            step = self.schedule_one(entry, now)
        else:
            step = self.schedule_group(framework, plugin, group, now)
        if waiters:
            step = self._told_waiting(framework, waiters, holder, step, now)
        return step

    def _told_waiting(
        self,
        framework: Framework,
        waiters: list[WaitPlugin],
        holder: str,
        step: list[Decision],
        now: datetime,
    ) -> list[Decision]:
        """The wait plugins are told how the attempt ended: the pods left pending with no
        way found (no victims, no nomination), if any; then, for such pods, what they are
        owed (Backfill: evictions of pods past their stated runtime, docs/backfill.md) is
        carried out. What they add goes into the pods' messages."""
        pending = self.state.pods.pending
        pods: list[Pod] = []
        for decision in step:  # one walk: most steps are a single Bind
            if isinstance(decision, Unschedulable):
                if decision.pod in pending:
                    pods.append(pending[decision.pod])
            elif isinstance(decision, Evict) or (isinstance(decision, Nominate) and decision.node):
                pods = []  # a way was found
                break
        state = self.state
        rejected_by = self._rejected_by
        parts = [w.after_attempt(framework, state, holder, pods, rejected_by, now) for w in waiters]
        if pods:
            for waiter in waiters:
                owed = waiter.overdue(state, holder, pods, now)
                step = step + self._carry_out(owed.decisions, now)
                parts.append(owed.message)
                if owed.retry_at is not None:
                    for pod in pods:
                        self.queue.wake_at(pod.key, owed.retry_at)
        if not any(parts):
            return step  # (most attempts: nothing said)
        said = " ".join(part for part in parts if part)
        told = []
        for decision in step:
            if isinstance(decision, Unschedulable) and decision.pod in self.messages:
                message = f"{decision.message} {said}"
                self.messages[decision.pod] = message
                decision = Unschedulable(decision.pod, message)
            told.append(decision)
        return told

    def _internal_error(self, pod: Pod, err: Exception, now: datetime) -> list[Decision]:
        """The attempt raised: the pod waits out a backoff, as after a failed attempt, and
        is retried then whether or not the cluster changed (the fault may be transient)."""
        error = f"{type(err).__name__}: {err}"
        detail = "".join(traceback.format_exception(err))
        decisions = self._unschedulable(pod, f"internal error: {error}", now, None)
        entry = self.queue.entry(pod.key)
        if entry is not None:
            self.queue.wake_at(
                pod.key, now.timestamp() + self.queue.backoff_seconds(entry.attempts)
            )
        return [InternalError(pod.key, error, detail), *decisions]

    def schedule_group(
        self, framework: Framework, plugin: GroupPlugin, group: str, now: datetime
    ) -> list[Decision]:
        """Schedule a group's pending members as one unit, as the group plugin decides."""
        attempt = GroupAttempt(group, framework, self.state, now, self._attemptable)
        outcome = plugin.schedule_group(attempt)
        decisions = self._carry_out(outcome.decisions, now)
        done: list[Pod] = []
        try:
            for key, node in outcome.binds:
                # Reserved again as tentatively placed, in the same order (the placement
                # undid its reservations): the same volumes are chosen.
                pod = self.state.pods.by_key[key]
                free = self.state.free_for(pod)
                cycle = Cycle(self.state, pod, now, self.state.pods.demand(pod), free)
                pre_bind = framework.reserve(cycle, self.state.nodes.row_of[node])
                done.append(pod)
                self.state.assume(key, node)
                self.queue.remove(key)
                self.messages.pop(key, None)
                decisions.append(Bind(key, node, pre_bind))
        except BaseException:
            # All members or none: those reserved or assumed already are given back.
            for pod in reversed(done):
                framework.unreserve(self.state, pod)
                self.state.forget(pod.key)
            raise
        for key, message in outcome.unschedulable.items():
            pod = self.state.pods.by_key[key]
            decisions.extend(self._unschedulable(pod, message, now, outcome.rejected_by))
            if outcome.retry_at is not None:
                self.queue.wake_at(key, outcome.retry_at.timestamp())
        return decisions

    def _attemptable(self, key: str) -> bool:
        """Queued and not refused: a refused member never binds with its group."""
        pod = self.state.pods.by_key.get(key)
        return key in self.queue and pod is not None and self.admission.refusal(pod) is None

    def schedule_one(self, entry: QueuedPod, now: datetime) -> list[Decision]:
        pod = entry.pod
        key = pod.key
        state = self.state
        framework = self.framework_for(pod)
        self.twins.follow()
        # The twin key is made only when a failure is remembered, or to remember one: a pod
        # that binds (most do) needs none.
        if self._failed_shapes and (remembered := self._failed_in_this_state()):
            twin = self._twin_key(framework, pod, now)
            failed = _holding(remembered.get(twin), now.timestamp())
            if failed is not None:
                self._last_failed = (pod, now, twin)
                return self._unschedulable(pod, failed.message, now, failed.rejected_by)
        # A nominated pod has no twin (`Twins.twin`), as it was when the attempt began.
        twin_free = key not in state.nominations
        cycle = Cycle(state, pod, now, state.pods.demand(pod), state.free_for(pod), own_room=True)
        pre = framework.pre_filter(cycle)
        if pre.reject is not None:
            return self._unschedulable(pod, pre.reject, now, pre.by)
        placed = framework.place(cycle, pre.allowed_nodes)
        if not isinstance(placed, Diagnosis):
            node = state.nodes.name(placed)
            nominated = state.nominations.get(key)
            pre_bind = framework.reserve(cycle, placed)  # gives back what it held if it raises
            try:
                state.assume(key, node)
                self.queue.remove(key)
                self.messages.pop(key, None)
            except BaseException:
                # As upstream after a failure past Reserve: Unreserve, then forget the pod.
                framework.unreserve(state, pod)
                state.forget(key)
                if nominated is not None and key not in state.nominations:
                    state.nominate(key, state.nodes.name(nominated))
                raise
            return [Bind(key, node, pre_bind)]
        diagnosis = placed
        result = framework.post_filter(cycle, diagnosis)
        decisions = self._carry_out(result.decisions, now)
        if result.nominated_node is not None:
            state.nominate(key, result.nominated_node)
            decisions.append(Nominate(key, result.nominated_node))
        message = diagnosis.message()
        if result.message:
            message = f"{message} {result.message}"
        rejected_by = pre.by | diagnosis.rejected_by | result.by
        decisions.extend(self._unschedulable(pod, message, now, rejected_by))
        if result.retry_at is not None:
            self.queue.wake_at(key, result.retry_at.timestamp())
        elif (
            twin_free
            and pre.allowed_nodes is None  # restricted to some nodes: its answer is its own
            and len(decisions) == 1  # only the Unschedulable itself
            and cycle.holds_until > now.timestamp()
            and (twin := self._twin_key(framework, pod, now)) is not None
        ):
            failure = _Failure(message, rejected_by, now.timestamp(), cycle.holds_until)
            self._failed_in_this_state()[twin] = failure
            self._last_failed = (pod, now, twin)
        return decisions

    def _failed_in_this_state(self) -> dict[Hashable, _Failure]:
        """The failed shapes remembered for the cluster as it is now: forgotten when it
        moves (rows, generation, any object the hints follow, or the nominations)."""
        at = (self.hints.marks(), self.state.nominations.version)
        if at != self._failed_at:
            self._failed_shapes.clear()
            self._failed_at = at
        return self._failed_shapes

    def _failed_twin(self, twin: Hashable | None, now: float) -> _Failure | None:
        """The failure of a twin whose answer still holds now, if any."""
        if twin is None or not self._failed_shapes:
            return None
        return _holding(self._failed_in_this_state().get(twin), now)

    def _twin_key(self, framework: Framework, pod: Pod, now: datetime) -> Hashable | None:
        """What a failure is remembered under: the pod's twin key and what the filters that
        judge by verdicts say of it now (pods whose stated runtimes differ share a failure
        while Backfill lets them onto the same reserved nodes, docs/backfill.md#cost)."""
        twin = self.twins.twin(framework.profile.scheduler_name, framework.shapes, pod)
        return None if twin is None else (twin, framework.verdicts(self.state, pod, now))

    def _group_of(self, framework: Framework, pod: Pod, rejected_by: frozenset[str]) -> HintGroup:
        return self.twins.group(
            framework.profile.scheduler_name, framework.shapes, pod, rejected_by
        )

    def _shapes_dropped(self) -> None:
        self._failed_shapes.clear()
        self.queue.ungroup_all()

    def _hint_plans_for(self, pod: Pod) -> HintPlans:
        return self.framework_for(pod).hints

    def failed_as_is(self, pod_key: str) -> bool:
        """Whether the pod just failed in the state as it still is, changing nothing (the
        queue's `Hints.failed_as_is`): a twin would be told the same."""
        entry = self.queue.entry(pod_key)
        if entry is None or entry.where != "unschedulable" or self.messages.get(pod_key) is None:
            return False
        now = self._pass_now
        if now is None:
            return False
        twin = self._remembered_twin(entry.pod, now)
        if twin is None:
            twin = self._twin_key(self.framework_for(entry.pod), entry.pod, now)
        return self._failed_twin(twin, now.timestamp()) is not None

    def _remembered_twin(self, pod: Pod, now: datetime) -> Hashable | None:
        """What the pod's failure was told or remembered under in its attempt at `now`, if
        it was the last pod to fail so: its verdicts then are its verdicts now unless the
        cluster moved, and then what was remembered is forgotten anyway."""
        last = self._last_failed
        return last[2] if last is not None and last[0] is pod and last[1] == now else None

    def _carry_out(self, decisions: list[Decision], now: datetime) -> list[Decision]:
        """Record a plugin's evictions, nominations and reservations in the state."""
        for decision in decisions:
            if isinstance(decision, Evict):
                self.state.mark_terminating(decision.pod, now)
            elif isinstance(decision, Nominate):
                self.state.nominate(decision.pod, decision.node)
            elif isinstance(decision, Reserve):
                self.state.reserve(decision.node, decision.pod, decision.since)
        return list(decisions)

    def _unschedulable(
        self, pod: Pod, message: str, now: datetime, rejected_by: frozenset[str] | None
    ) -> list[Decision]:
        """Record a failed attempt; `rejected_by` names the plugins whose hints may wake the
        pod (None: retry it after any change)."""
        self.messages[pod.key] = message
        self._rejected_by = (
            None
            if rejected_by is None or self._rejected_by is None
            else (self._rejected_by | rejected_by)
        )
        group = None
        if rejected_by is not None:
            group = self._group_of(self.framework_for(pod), pod, rejected_by)
        self.queue.mark_unschedulable(pod.key, now.timestamp(), self.state.generation, group)
        return [Unschedulable(pod.key, message)]
