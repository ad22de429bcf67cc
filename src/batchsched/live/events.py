"""Events (events.k8s.io/v1) with aggregation.

The first occurrence of an event (same object, type, reason and note) is created at once;
repeats only raise a counter, and the event's `series` is patched with the count at most once
per `series_interval`. A pod that stays pending for hours with the same reason therefore
writes one event plus one update per interval, not one per scheduling cycle.

Series are kept per object, for the `capacity` objects last reported (client-go's event
correlator keeps 4096), a few per object, and an object's go when it is deleted (`forget`):
what is remembered follows the live objects, not every object ever seen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from batchsched.live.client import MERGE_PATCH, ApiError, GuardRefused, KubeClient
from batchsched.live.workers import Workers

log = logging.getLogger(__name__)

PATH = "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
_SERIES_PER_OBJECT = 16  # distinct (type, reason, note) kept per object, least recent go


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    namespace: str  # "" for cluster-scoped objects
    name: str
    uid: str = ""
    api_version: str = "v1"

    def to_json(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.uid:
            ref["uid"] = self.uid
        return ref


_API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "PodGroup": "scheduling.x-k8s.io/v1alpha1",
    "PodDisruptionBudget": "policy/v1",
}


def ref_from_label(label: str) -> ObjectRef:
    """`Pod ns/name` or `PriorityClass name` (the core's way of naming objects)."""
    kind, _, rest = label.partition(" ")
    namespace, _, name = rest.rpartition("/")
    return ObjectRef(kind, namespace, name or kind, api_version=_API_VERSIONS.get(kind, "v1"))


def micro_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(slots=True)
class _Series:
    name: str
    namespace: str
    count: int
    written: float  # monotonic time of the last write


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        controller: str,
        instance: str,
        series_interval: float = 1800.0,
        workers: int = 2,
        capacity: int = 4096,
        clock: Callable[[], float] = time.monotonic,
        guard: Callable[[], bool] | None = None,
    ) -> None:
        self.client = client
        self.controller = controller
        self.instance = instance
        self.series_interval = series_interval
        self.capacity = capacity
        self._clock = clock
        self._guard = guard  # asked before each write (only a leader writes events)
        self._lock = threading.Lock()
        # (kind, namespace, name) -> (ref, type, reason, note) -> series, least recent first.
        self._series: OrderedDict[
            tuple[str, str, str], OrderedDict[tuple[ObjectRef, str, str, str], _Series]
        ] = OrderedDict()
        self._workers = Workers(workers, "events")
        self._sequence = 0

    def record(
        self, ref: ObjectRef, type_: str, reason: str, action: str, note: str, once: bool = False
    ) -> None:
        """Report an event; writes happen in the background and never block the caller.
        `once`: the event cannot happen again to this object (a pod is bound once, preempted
        once), so no series is kept for it."""
        key = (ref, type_, reason, note)
        owner = (ref.kind, ref.namespace, ref.name)
        now = self._clock()
        with self._lock:
            kept = self._series.get(owner)
            if kept is None and not once:
                kept = self._series[owner] = OrderedDict()
            if kept is not None:
                self._series.move_to_end(owner)
            series = kept.get(key) if kept is not None else None
            if kept is not None and series is not None:
                kept.move_to_end(key)
                series.count += 1
                if now - series.written < self.series_interval:
                    return
                series.written = now
                self._workers.submit(self._update, series.namespace, series.name, series.count)
                return
            self._sequence += 1
            namespace = ref.namespace or "default"
            name = f"{ref.name}.{time.time_ns():x}{self._sequence:x}"
            if kept is not None:
                kept[key] = _Series(name, namespace, 1, now)
                if len(kept) > _SERIES_PER_OBJECT:
                    kept.popitem(last=False)
                while len(self._series) > self.capacity:
                    self._series.popitem(last=False)
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(datetime.now(UTC)),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "regarding": ref.to_json(),
            "note": note[:1024],
            "type": type_,
        }
        self._workers.submit(self._create, namespace, body)

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """The object was deleted: its series go (a new object of that name starts anew)."""
        with self._lock:
            self._series.pop((kind, namespace, name), None)

    def _create(self, namespace: str, body: dict[str, object]) -> None:
        try:
            self.client.request(
                "POST", PATH.format(namespace=namespace), body=body, guard=self._guard
            )
        except GuardRefused:
            pass
        except ApiError as err:
            log.warning("could not write event %s: %s", body["reason"], err)

    def _update(self, namespace: str, name: str, count: int) -> None:
        patch = {"series": {"count": count, "lastObservedTime": micro_time(datetime.now(UTC))}}
        try:
            self.client.request(
                "PATCH",
                f"{PATH.format(namespace=namespace)}/{name}",
                body=patch,
                content_type=MERGE_PATCH,
                guard=self._guard,
            )
        except GuardRefused:
            pass
        except ApiError as err:
            log.warning("could not update event %s: %s", name, err)

    def flush(self) -> None:
        """Wait for the writes submitted so far."""
        self._workers.wait()

    def close(self) -> None:
        self._workers.shutdown()
