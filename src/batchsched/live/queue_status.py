"""Queue status, events and metrics in live mode (docs/queues.md#live-mode).

Once a second at most, on the loop thread, the Queue status controller's view of every queue
is taken (controllers/queues.py): the metrics follow it on every replica; the leader writes
what changed to each batchsched.io Queue's status subresource (a merge patch, on worker
threads, so scheduling never waits for it) and reports a queue that breaks the tree's rules
with a Warning event. Volcano's and KAI's Queues keep their own status: they get the event
only.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from batchsched.controllers.queues import (
    INVALID_REASON,
    VALID,
    VALID_REASON,
    QueueStatus,
    queue_statuses,
    restore_usage,
)
from batchsched.live.client import MERGE_PATCH, ApiError, GuardRefused, KubeClient
from batchsched.live.events import EventRecorder, ObjectRef, micro_time
from batchsched.live.metrics import Metrics
from batchsched.live.workers import Workers
from batchsched.objects.parse import format_time
from batchsched.objects.quantity import format_amount
from batchsched.objects.queues import QUEUE_API, USAGE_TIME, Queue, usage_unit
from batchsched.state.cluster import ClusterState

log = logging.getLogger(__name__)

QUEUE_STATUS = f"/apis/{QUEUE_API}/queues/{{name}}/status"
INTERVAL = 1.0  # seconds between two looks at the queues (and so between two writes of one)
USAGE_INTERVAL = 10.0  # seconds between two writes of a queue's decayed usage
USAGE_REASON = "InvalidStatusUsage"  # the Warning event on a status.usage that cannot be read
# The status fields this writer owns: one it no longer reports is removed (null in the patch).
_OWNED = (
    "allocated",
    "borrowed",
    "fairShare",
    "pendingPods",
    "conditions",
    "usage",
    "effectiveWeight",
)


class QueueStatusWriter:
    def __init__(
        self,
        client: KubeClient,
        events: EventRecorder,
        metrics: Metrics,
        is_leading: Callable[[], bool],
        clock: Callable[[], float],
        dry_run: bool = False,
        interval: float = INTERVAL,
    ) -> None:
        self.client = client
        self.events = events
        self.metrics = metrics
        self.is_leading = is_leading
        self.dry_run = dry_run
        self.interval = interval
        self._clock = clock
        self._last: float | None = None
        self._leading = False  # whether it led at the last look
        self._workers = Workers(2, "queue-status")
        # Per queue: the status last sent (forgotten when a write fails, so it is sent
        # again; workers forget, hence the lock) and the rule it was last reported breaking.
        self._lock = threading.Lock()
        self._written: dict[str, dict[str, Any]] = {}
        self._reported: dict[str, str] = {}
        self._usage_written: dict[str, float] = {}  # queue -> clock() of its last usage write

    def tick(self, state: ClusterState) -> None:
        """On the loop thread, after a pass (or a standby's wait)."""
        now = self._clock()
        leading = self.is_leading()
        # A replica that has just taken the lead looks at once.
        fresh = leading != self._leading
        if self._last is not None and now - self._last < self.interval and not fresh:
            return
        self._last, self._leading = now, leading
        tree = state.queues
        statuses = queue_statuses(state)
        self.metrics.observe_queues(tree.queues, statuses)
        for gone in set(self._reported) - set(tree.queues):
            self.forget(gone)
        if not leading:
            return
        wall = format_time(datetime.now(UTC))
        decayed = tree.decayed
        usage_at = None if decayed is None or decayed.at is None else decayed.at
        for name, status in statuses.items():
            queue = tree.queues[name]
            self._report(queue, status)
            if queue.api_version != QUEUE_API or self.dry_run:
                continue
            usage_due = usage_at is not None and (
                now - self._usage_written.get(name, -math.inf) >= USAGE_INTERVAL
            )
            with self._lock:
                before: Mapping[str, Any] = self._written.get(name, queue.status)
                body = status_json(status, before, wall, usage_at if usage_due else None)
                patch = merge_patch(before, body)
                if patch:
                    self._written[name] = body
            if "usage" in patch:
                self._usage_written[name] = now
            if patch:
                self._workers.submit(self._write, name, patch)

    def _report(self, queue: Queue, status: QueueStatus) -> None:
        """A Warning event on the queue whose own fields break the rules, once per fault."""
        problem = status.problem if status.own_problem else ""
        if self._reported.get(queue.name, "") == problem:
            return
        self._reported[queue.name] = problem
        if not problem:
            return
        log.warning("%s (its subtree's pods wait until it is fixed)", problem)
        if self.dry_run:
            return
        ref = ObjectRef("Queue", "", queue.name, queue.uid, api_version=queue.api_version)
        note = f"{problem}; the pods of its subtree wait until it is fixed"
        self.events.record(ref, "Warning", INVALID_REASON, "Admitting", note)

    def restore_usage(self, state: ClusterState, now: float) -> None:
        """On taking the lead (at start or from another replica): each batchsched Queue's
        decayed usage read back from its status (docs/queues.md#fairness-over-time), so a
        restart or failover shifts no share. What cannot be read is ignored with a Warning
        event on the queue: its usage starts from 0."""
        for name, err in restore_usage(state, now).items():
            log.warning("%s; ignored: its decayed usage starts from 0", err)
            if not self.dry_run:
                queue = state.queues.queues[name]
                ref = ObjectRef("Queue", "", name, queue.uid, api_version=QUEUE_API)
                note = f"{err}; ignored: its decayed usage starts from 0"
                self.events.record(ref, "Warning", USAGE_REASON, "Reading", note)

    def forget(self, name: str) -> None:
        """The Queue was deleted: what was written and reported about it goes with it."""
        with self._lock:
            self._written.pop(name, None)
        self._reported.pop(name, None)
        self._usage_written.pop(name, None)
        self.events.forget("Queue", "", name)

    def wait(self) -> None:
        self._workers.wait()

    def shutdown(self) -> None:
        self._workers.shutdown()

    def _write(self, name: str, patch: dict[str, Any]) -> None:
        try:
            self.client.request(
                "PATCH",
                QUEUE_STATUS.format(name=name),
                body={"status": patch},
                content_type=MERGE_PATCH,
                guard=self.is_leading,
            )
        except (GuardRefused, ApiError) as err:
            with self._lock:
                self._written.pop(name, None)  # the next look sends it again
            if not (isinstance(err, ApiError) and err.status == 404):
                log.warning("status of Queue %s not written: %s", name, err)


def status_json(
    status: QueueStatus, before: Mapping[str, Any], now: str, usage_at: float | None = None
) -> dict[str, Any]:
    """The status fields this writer owns; the condition keeps its transition time from
    `before` (the status as last written) when its truth is unchanged. Decayed usage and
    effective weights are new only when `usage_at` (the time they are as of) is given; else
    they stay as `before` has them."""
    valid = not status.problem
    condition = {
        "type": VALID,
        "status": "True" if valid else "False",
        "reason": VALID_REASON if valid else INVALID_REASON,
        "message": "" if valid else status.problem,
        "lastTransitionTime": now,
    }
    conditions = before.get("conditions")
    others: list[Any] = []
    for old in conditions if isinstance(conditions, list) else []:
        if not isinstance(old, Mapping) or old.get("type") != VALID:
            others.append(old)
        elif old.get("status") == condition["status"] and isinstance(
            old.get("lastTransitionTime"), str
        ):
            condition["lastTransitionTime"] = old["lastTransitionTime"]
    body = {
        "allocated": _amounts(status.allocated),
        "borrowed": _amounts(status.borrowed),
        "fairShare": _amounts(status.fair_share),
        "pendingPods": status.pending_pods,
        "conditions": [*others, condition],
    }
    for key in ("usage", "effectiveWeight"):
        if key in before:
            body[key] = before[key]
    if usage_at is not None and status.decayed_usage is not None:
        usage = {r: f"{v / usage_unit(r):.3f}" for r, v in status.decayed_usage.items()}
        body["usage"] = {**usage, USAGE_TIME: micro_time(datetime.fromtimestamp(usage_at, UTC))}
        body["effectiveWeight"] = {
            r: f"{w:.4g}" for r, w in (status.effective_weight or {}).items()
        }
    return body


def _amounts(amounts: Mapping[str, int]) -> dict[str, str]:
    return {resource: format_amount(resource, amount) for resource, amount in amounts.items()}


def merge_patch(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns the owned fields of `before` into `after`:
    changed fields, and null for what `after` no longer has."""
    patch: dict[str, Any] = {}
    for key in _OWNED:
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            patch[key] = {k: v for k, v in new.items() if old.get(k) != v} | {
                k: None for k in old if k not in new
            }
        else:
            patch[key] = new
    return patch
