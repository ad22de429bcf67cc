"""Prometheus metrics of a running scheduler, on a registry of its own (one per scheduler)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from batchsched.controllers.queues import QueueStatus
from batchsched.decisions import Bind, Decision, InternalError, Unschedulable
from batchsched.objects.quantity import CPU
from batchsched.objects.queues import Queue
from batchsched.state.cluster import ClusterState
from batchsched.state.queue import SchedulingQueue

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.attempts = Counter(
            "batchsched_schedule_attempts",
            "Scheduling attempts by result (scheduled: a bind decided; unschedulable)",
            ["result"],
            registry=r,
        )
        self.e2e_latency = Histogram(
            "batchsched_e2e_scheduling_duration_seconds",
            "From a pod first seen pending to its Binding accepted by the API server",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.pending = Gauge(
            "batchsched_pending_pods",
            "Pending pods of this scheduler by queue (active, backoff, unschedulable)",
            ["queue"],
            registry=r,
        )
        self.victims = Counter(
            "batchsched_preemption_victims", "Pods deleted to make room for others", registry=r
        )
        self.gang_attempts = Counter(
            "batchsched_gang_attempts",
            "Scheduling attempts of pods that belong to a PodGroup, by result",
            ["result"],
            registry=r,
        )
        self.api_errors = Counter(
            "batchsched_api_errors",
            "Failed API requests by verb and HTTP status (0: no answer)",
            ["verb", "code"],
            registry=r,
        )
        self.binds = Counter(
            "batchsched_binds", "Binding requests by result (bound, failed)", ["result"], registry=r
        )
        self.incoming = Counter(
            "batchsched_queue_incoming_pods",
            "Pods entering the active or backoff queue, or leaving it as unschedulable, by "
            "event (PodAdd, ScheduleAttemptFailure, a cluster event a queueing hint accepted: "
            "Node, NodeRoom, Policy, PodGroup, Any; UnschedulableTimeout, RetryTime)",
            ["event"],
            registry=r,
        )
        self._incoming_seen: dict[str, int] = {}
        self.internal_errors = Counter(
            "batchsched_internal_errors",
            "Scheduling attempts that raised (a bug): the pod backs off, the loop goes on",
            registry=r,
        )
        self.reservations = Gauge(
            "batchsched_reservations",
            "Pods and gangs holding nodes for their expected start (Backfill, docs/backfill.md)",
            registry=r,
        )
        self.leader = Gauge(
            "batchsched_leader", "1 while this replica holds the leader lease", registry=r
        )
        self.queue_amounts = {
            what: Gauge(
                f"batchsched_queue_{what}",
                f"{doc} (docs/queues.md; CPU in cores, memory in bytes)",
                ["queue", "resource"],
                registry=r,
            )
            for what, doc in _QUEUE_AMOUNTS.items()
        }
        self.queue_pending = Gauge(
            "batchsched_queue_pending_pods",
            "Pending pods of each Queue's subtree",
            ["queue"],
            registry=r,
        )
        self._queue_labels: set[tuple[str, str, str]] = set()  # (gauge, queue, resource)

    def api_error(self, verb: str, code: int) -> None:
        self.api_errors.labels(verb=verb, code=str(code)).inc()

    def observe_pass(self, decisions: list[Decision], state: ClusterState) -> None:
        for decision in decisions:
            if isinstance(decision, InternalError):
                self.internal_errors.inc()
                continue
            if isinstance(decision, Bind):
                result = "scheduled"
            elif isinstance(decision, Unschedulable):
                result = "unschedulable"
            else:
                continue
            self.attempts.labels(result=result).inc()
            pod = state.pods.by_key.get(decision.pod)
            if pod is not None and (
                GROUP_ANNOTATION in pod.annotations or GROUP_LABEL in pod.labels
            ):
                self.gang_attempts.labels(result=result).inc()

    def observe_queue(self, queue: SchedulingQueue) -> None:
        for where, count in queue.pending_counts().items():
            self.pending.labels(queue=where).set(count)
        for event, total in queue.incoming.items():
            seen = self._incoming_seen.get(event, 0)
            if total > seen:
                self.incoming.labels(event=event).inc(total - seen)
                self._incoming_seen[event] = total

    def observe_queues(
        self, queues: Mapping[str, Queue], statuses: Mapping[str, QueueStatus]
    ) -> None:
        """Each queue's quotas, allocation and pending pods; a queue or resource that went
        away leaves the gauges."""
        labels: set[tuple[str, str, str]] = set()
        for name, status in statuses.items():
            self.queue_pending.labels(queue=name).set(status.pending_pods)
            labels.add(("pending_pods", name, ""))
            for resource, quota in queues[name].resources.items():
                values = {
                    "guaranteed": quota.guaranteed,
                    "nominal": quota.nominal,
                    "limit": quota.limit,
                    "allocated": status.allocated.get(resource, 0),
                    "fair_share": status.fair_share.get(resource, 0),
                }
                for what, amount in values.items():
                    if amount is not None:
                        gauge = self.queue_amounts[what].labels(queue=name, resource=resource)
                        gauge.set(amount / 1000 if resource == CPU else amount)
                        labels.add((what, name, resource))
        for what, name, resource in self._queue_labels - labels:
            if what == "pending_pods":
                self.queue_pending.remove(name)
            else:
                self.queue_amounts[what].remove(name, resource)
        self._queue_labels = labels

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


_QUEUE_AMOUNTS = {
    "guaranteed": "Each Queue's guaranteed amount of a resource",
    "nominal": "Each Queue's nominal amount (its entitlement) of a resource",
    "limit": "Each Queue's limit of a resource (absent: none)",
    "allocated": "Requests of the bound pods of each Queue's subtree",
    "fair_share": "What each Queue is entitled to now (water-filled down the tree)",
}
