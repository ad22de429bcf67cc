"""Bad stated runtimes told to their owners in live mode (docs/backfill.md#stated-runtimes).

A running pod or a PodGroup stating a runtime that cannot be read (`batchsched.io/max-runtime:
soon`) is read all the same, and planned as stating none; a pending pod's FailedScheduling
says why it waits, but nothing else would tell them. Each gets one Warning event per value it
states, as `schedule` lists them among its warnings: written by the leader only, a standby
telling what it saw once it takes the lease (as with malformed objects).
"""

from __future__ import annotations

import logging

from batchsched.live.events import EventRecorder, ObjectRef
from batchsched.objects.kinds import Record
from batchsched.objects.records import Pod, PodGroup
from batchsched.objects.runtime_bound import planned_as_none

log = logging.getLogger(__name__)

REASON = "InvalidStatedRuntime"  # the Warning event's reason


class BadRuntimes:
    def __init__(self) -> None:
        # (kind, key) -> the error last told, or to be told (`due`), for each object stating
        # a bad runtime now; an object fixed, finished or gone is forgotten.
        self._told: dict[tuple[str, str], str] = {}
        self._due: dict[tuple[str, str], tuple[ObjectRef, str]] = {}

    def seen(self, record: Record) -> None:
        """A version of an object as the informers read it."""
        if isinstance(record, Pod):
            running = record.node_name and not record.terminated
            ref = ObjectRef("Pod", record.namespace, record.name, record.uid)
            error = record.runtime_error if running else ""
        elif isinstance(record, PodGroup):
            version = record.api_version
            ref = ObjectRef("PodGroup", record.namespace, record.name, api_version=version)
            error = record.runtime_error
        else:
            return
        key = (ref.kind, record.key)
        if not error:
            self.forget(*key)
        elif self._told.get(key) != error:
            log.warning("%s", error)
            self._told[key] = error
            self._due[key] = (ref, error)

    def forget(self, kind: str, key: str) -> None:
        self._told.pop((kind, key), None)
        self._due.pop((kind, key), None)

    def report(self, events: EventRecorder) -> None:
        """Write the events due (the caller leads, and writes)."""
        for ref, error in self._due.values():
            _, note = planned_as_none(error)
            events.record(ref, "Warning", REASON, "Reading", note, once=True)
        self._due.clear()
