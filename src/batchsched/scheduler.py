"""The scheduling pass: pop pods in queue order, filter, score, post-filter, decide.

The pass mutates ClusterState only with its own assumptions (a pod assumed on its node, a
nomination, a victim marked terminating) and returns every decision as data for the world to
carry out.
"""

from __future__ import annotations

from datetime import datetime

from batchsched.config import SchedulerConfig
from batchsched.decisions import Bind, Decision, Evict, Nominate, Reserve, Unschedulable
from batchsched.framework import Framework
from batchsched.objects.records import Pod
from batchsched.plugins.base import Cycle, Diagnosis
from batchsched.state.cluster import ClusterState
from batchsched.state.queue import QueuedPod, SchedulingQueue


class Scheduler:
    def __init__(self, state: ClusterState, config: SchedulerConfig) -> None:
        self.state = state
        self.config = config
        self.frameworks = {p.scheduler_name: Framework(p) for p in config.profiles}
        self.default_framework = self.frameworks[config.profiles[0].scheduler_name]
        self.queue = SchedulingQueue(
            sort_key=self.default_framework.queue_sort.sort_key,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
        )
        self.messages: dict[str, str] = {}  # last unschedulable message per pending pod

    def owns(self, pod: Pod) -> bool:
        """Pods of a configured profile; a pod naming no scheduler goes to the first one."""
        return not pod.scheduler_name or pod.scheduler_name in self.frameworks

    def framework_for(self, pod: Pod) -> Framework:
        return self.frameworks.get(pod.scheduler_name, self.default_framework)

    def sync_queue(self, now: datetime) -> None:
        """Bring the queue in line with the pending pods the world has reported."""
        stamp = now.timestamp()
        for key in self.state.drain_pending_changes():
            pod = self.state.pending.get(key)
            if pod is not None and self.owns(pod):
                self.queue.add(pod, stamp)
            else:
                self.queue.remove(key)
                self.messages.pop(key, None)

    def schedule_pass(self, now: datetime) -> list[Decision]:
        """Try every pod that is ready now, once, in queue order."""
        self.sync_queue(now)
        self.queue.refresh(now.timestamp(), self.state.generation)
        decisions: list[Decision] = []
        while (entry := self.queue.pop()) is not None:
            decisions.extend(self.schedule_one(entry, now))
        return decisions

    def schedule_one(self, entry: QueuedPod, now: datetime) -> list[Decision]:
        pod = entry.pod
        state = self.state
        framework = self.framework_for(pod)
        cycle = Cycle(state, pod, now, state.demand(pod), state.free_for(pod))
        pre = framework.pre_filter(cycle)
        if pre.reject is not None:
            return self._unschedulable(pod, pre.reject, now)
        placed = framework.place(cycle, pre.allowed_nodes)
        if not isinstance(placed, Diagnosis):
            node = state.node_name(placed)
            state.assume(pod.key, node)
            self.queue.remove(pod.key)
            self.messages.pop(pod.key, None)
            return [Bind(pod.key, node)]
        diagnosis = placed
        result = framework.post_filter(cycle, diagnosis)
        decisions = list(result.decisions)
        for decision in decisions:
            if isinstance(decision, Evict):
                state.mark_terminating(decision.pod, now)
            elif isinstance(decision, Nominate):
                state.nominate(decision.pod, decision.node)
            elif isinstance(decision, Reserve):
                state.reserve(decision.node, decision.pod, decision.since)
        if result.nominated_node is not None:
            state.nominate(pod.key, result.nominated_node)
            decisions.append(Nominate(pod.key, result.nominated_node))
        message = diagnosis.message()
        if result.message:
            message = f"{message} {result.message}"
        decisions.extend(self._unschedulable(pod, message, now))
        if result.retry_at is not None:
            self.queue.wake_at(pod.key, result.retry_at.timestamp())
        return decisions

    def _unschedulable(self, pod: Pod, message: str, now: datetime) -> list[Decision]:
        self.messages[pod.key] = message
        self.queue.mark_unschedulable(pod.key, now.timestamp(), self.state.generation)
        return [Unschedulable(pod.key, message)]
