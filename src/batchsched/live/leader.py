"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

A candidate takes the lease when it is free or when its holder has not renewed it for
`lease_duration`, measured on the candidate's own clock from when it last saw the lease change
(so clocks of different machines never get compared). The leader renews every `retry_period`.
It acts only while its last successful renewal is younger than `renew_deadline` and the last
renewal attempt succeeded: a failed attempt pauses its writes at once, and if no renewal
succeeds before the deadline it gives leadership up for good (`lost`). Since
renew_deadline < lease_duration, a standby can only take over after the old leader stopped.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from batchsched.live.client import ApiError, KubeClient
from batchsched.live.events import micro_time
from batchsched.live.settings import LeaderElectionSettings

log = logging.getLogger(__name__)

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        settings: LeaderElectionSettings,
        identity: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.settings = settings
        self.identity = identity
        self._clock = clock
        self.leading = threading.Event()  # acquired (and not yet lost)
        self.lost = threading.Event()  # leadership ended: the process must stop acting
        self._healthy = False
        self._renewed_at = -math.inf
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._collection = LEASES.format(ns=settings.namespace)
        self._path = f"{self._collection}/{settings.name}"

    def is_leading(self) -> bool:
        return (
            self.leading.is_set()
            and not self.lost.is_set()
            and self._healthy
            and self._clock() < self._renewed_at + self.settings.renew_deadline
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop campaigning; a leader releases the lease so a standby takes over at once."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.settings.retry_period + 5)
        if self.leading.is_set() and not self.lost.is_set():
            self._release()
        self.leading.clear()

    def _run(self) -> None:
        period = self.settings.retry_period
        while not self._stop.is_set():
            if self._try():
                log.info("%s: acquired lease %s", self.identity, self._path)
                self.leading.set()
                break
            self._stop.wait(period * (1 + 0.2 * random.random()))
        while not self._stop.wait(period):
            if self._try():
                continue
            if (
                self.lost.is_set()
                or self._clock() >= self._renewed_at + self.settings.renew_deadline
            ):
                log.error("%s: leader election lost (lease %s)", self.identity, self._path)
                self.lost.set()
                self.leading.clear()
                return

    def _spec(self, old: dict[str, Any], now: str) -> dict[str, Any]:
        ours = old.get("holderIdentity") == self.identity
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.settings.lease_duration)),
            "acquireTime": old.get("acquireTime") if ours else now,
            "renewTime": now,
            "leaseTransitions": int(old.get("leaseTransitions") or 0) + (0 if ours else 1),
        }

    def _try(self) -> bool:
        """One attempt to acquire or renew; records the outcome for `is_leading`."""
        started = self._clock()
        ok = self._attempt(started)
        self._healthy = ok
        if ok:
            self._renewed_at = started
        return ok

    def _attempt(self, started: float) -> bool:
        now = micro_time(datetime.now(UTC))
        try:
            lease = self.client.json("GET", self._path)
        except ApiError as err:
            if err.status != 404:
                log.warning("%s: cannot read lease %s: %s", self.identity, self._path, err)
                return False
            return self._create(now)
        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._observed = spec
            self._observed_at = started
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity:
            if self.leading.is_set():
                self.lost.set()  # someone else holds it now: never act again
                return False
            if self._observed_at + self.settings.lease_duration > started:
                return False
        lease["spec"] = self._spec(spec, now)
        try:
            updated = self.client.json("PUT", self._path, body=lease)
        except ApiError as err:
            if err.status != 409:
                log.warning("%s: cannot update lease %s: %s", self.identity, self._path, err)
            return False
        self._observed = updated.get("spec") or {}
        self._observed_at = started
        return True

    def _create(self, now: str) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.settings.name, "namespace": self.settings.namespace},
            "spec": self._spec({}, now),
        }
        try:
            self.client.json("POST", self._collection, body=body)
        except ApiError as err:
            if err.status != 409:
                log.warning("%s: cannot create lease %s: %s", self.identity, self._path, err)
            return False
        return True

    def _release(self) -> None:
        try:
            lease = self.client.json("GET", self._path)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"] = {
                **lease["spec"],
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
            }
            self.client.json("PUT", self._path, body=lease)
            log.info("%s: released lease %s", self.identity, self._path)
        except ApiError as err:
            log.warning("%s: cannot release lease %s: %s", self.identity, self._path, err)
