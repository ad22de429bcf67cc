"""`batchsched run`: the live scheduling loop.

Informers feed facts into one queue; this loop alone owns ClusterState. It waits for every
informer's first list (seeking the lease meanwhile), then (while it leads, or always with
leader election off) alternates: apply the facts that arrived, run a scheduling pass at the
real clock's `now`, handing each pod's decisions to the actuator as soon as they are made, and
sleep until the next fact or the next backoff expiry.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from batchsched.config import SchedulerConfig
from batchsched.controllers import Controllers
from batchsched.live.actuator import Actuator
from batchsched.live.bad_runtimes import BadRuntimes
from batchsched.live.client import KubeClient
from batchsched.live.events import EventRecorder
from batchsched.live.facts import BindFailed, Fact, Remove, Upsert, Wakeup, apply_fact
from batchsched.live.informer import Informer
from batchsched.live.kinds import KIND_ORDER, KINDS
from batchsched.live.leader import LeaderElector
from batchsched.live.malformed import Malformed
from batchsched.live.metrics import Metrics
from batchsched.live.queue_status import QueueStatusWriter
from batchsched.live.ratelimit import TokenBucket
from batchsched.live.reservations import ReservationEvents
from batchsched.live.settings import LiveSettings
from batchsched.objects.records import Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.ui.feed import Feed
from batchsched.ui.publisher import Publisher

log = logging.getLogger(__name__)

_MAX_SLEEP = 1.0  # unschedulable pods are re-checked for staleness at least this often
_STANDBY_SLEEP = 0.1
_HEALTHY_WITHIN = 60.0  # /healthz fails if the loop has not come round for this long


@dataclass(frozen=True)
class LiveOptions:
    dry_run: bool = False
    identity: str = ""
    watch_timeout: float = 300.0
    informer_backoff: float = 0.8  # first retry delay of a failed list or watch, doubling
    event_series_interval: float = 1800.0
    write_workers: int = 16
    pre_bind_poll: float | None = None  # how often PreBind looks at claims (default 1 s)


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class LiveScheduler:
    def __init__(
        self,
        client: KubeClient,
        config: SchedulerConfig,
        options: LiveOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock` (monotonic seconds) times the lease and the loop's heartbeat: tests move
        it themselves, so neither depends on how fast a loaded machine runs them."""
        options = options or LiveOptions()
        self._clock = clock
        settings = LiveSettings.from_config(config)
        self.options = options
        self.identity = options.identity or default_identity()
        self.metrics = Metrics()
        self.client = client
        client.limiter = TokenBucket(settings.client.qps, settings.client.burst)
        client.error_hook = self.metrics.api_error
        self.facts: queue.Queue[Fact] = queue.Queue()
        self.state = ClusterState()
        # Claims are allocated here and written by the actuator's PreBind (live/claims.py).
        self.state.devices.live = True
        self.scheduler = Scheduler(self.state, config)
        self.controllers = Controllers(self.scheduler)  # PodGroup status after each pass
        self.informers = [
            Informer(
                client,
                kind,
                self.facts,
                watch_timeout=options.watch_timeout,
                initial_backoff=options.informer_backoff,
            )
            for kind in KINDS
        ]
        self.elector: LeaderElector | None = None
        if settings.leader_election.enabled and not options.dry_run:
            # Lease calls get their own unlimited client with few retries: a renewal stuck
            # behind thousands of binds, or retried for longer than the deadline, is lost.
            lease_client = KubeClient(client.credentials, retries=1)
            self.elector = LeaderElector(
                lease_client, settings.leader_election, self.identity, clock=clock
            )
        # Events get a rate limit of their own (kube-scheduler has a separate events client).
        event_client = client.with_limiter(TokenBucket(settings.client.qps, settings.client.burst))
        self.events = EventRecorder(
            event_client,
            controller=config.profiles[0].scheduler_name,
            instance=self.identity,
            series_interval=options.event_series_interval,
            guard=self.is_leading,
        )
        self.actuator = Actuator(
            client,
            self.events,
            self.facts,
            self.metrics,
            self.is_leading,
            scheduler_name=config.profiles[0].scheduler_name,
            dry_run=options.dry_run,
            workers=options.write_workers,
            pre_bind_poll=options.pre_bind_poll,
            dispatcher=self.controllers.dispatcher,
        )
        self.queue_status = QueueStatusWriter(
            client, self.events, self.metrics, self.is_leading, clock, dry_run=options.dry_run
        )
        self.reservations = ReservationEvents(self.events, self.metrics)
        self.scheduler_names = frozenset(p.scheduler_name for p in config.profiles)
        # Malformed objects not reported yet: only a leader writes, so they wait for the lease.
        self._malformed: dict[tuple[str, str], Malformed] = {}
        self.bad_runtimes = BadRuntimes()
        self.synced = threading.Event()
        self.passes = 0
        self._led = False  # whether this replica has led yet
        self._pending_since: dict[str, float] = {}
        self._heartbeat = clock()
        self.ui: Feed | None = None

    def serve_ui(self, publisher: Publisher) -> None:
        """Publish boards of the state for the web UI (docs/ui.md), between passes."""
        self.ui = Feed(self.scheduler, publisher)

    # ---- status for probes -------------------------------------------------------------

    def is_leading(self) -> bool:
        return self.elector is None or self.elector.is_leading()

    def healthy(self) -> bool:
        return self._clock() - self._heartbeat < _HEALTHY_WITHIN

    def ready(self) -> bool:
        """Caches synced, and leading or standing by (not a leader that lost its lease)."""
        return self.synced.is_set() and (self.elector is None or not self.elector.lost.is_set())

    # ---- the loop ----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> int:
        """Schedule until `stop` is set (exit code 0) or leadership is lost (exit code 1)."""
        for informer in self.informers:
            informer.start()

        def wake_on_stop() -> None:
            stop.wait()
            self.facts.put(Wakeup())

        threading.Thread(target=wake_on_stop, daemon=True).start()
        # The lease is sought while the caches fill, so binding starts once both are done.
        if self.elector is not None:
            self.elector.start()
        try:
            if not self._sync(stop):
                return 0
            log.info(
                "caches synced: %d nodes, %d pods (%d pending)",
                self.state.nodes.count,
                len(self.state.pods.by_key),
                len(self.state.pods.pending),
            )
            return self._loop(stop)
        finally:
            self._shutdown()

    def _sync(self, stop: threading.Event) -> bool:
        """Apply the initial lists as they arrive, kind by kind: a kind's objects go into the
        state once every kind before it (KINDS' order) has been listed whole, so pods meet
        their classes, nodes and groups, and the pods of a long list are applied while its
        later pages are still coming. The first pass waits for every list."""
        held: list[Fact] = []
        while True:
            self._heartbeat = self._clock()
            # Flags before facts: a listed kind put all its objects in the queue before its flag.
            listed = 0
            while listed < len(self.informers) and self.informers[listed].synced.is_set():
                listed += 1
            held.extend(self._take(0.0 if listed == len(self.informers) else 1.0))
            held.sort(key=_kind_order)  # stable: each kind's facts stay in arrival order
            ready = len(held)
            while ready and _kind_order(held[ready - 1]) > listed:
                ready -= 1
            self._apply(held[:ready])
            del held[:ready]
            if listed == len(self.informers):
                break
            if stop.is_set():
                return False
        self.synced.set()
        return True

    def _loop(self, stop: threading.Event) -> int:
        while not stop.is_set():
            self._heartbeat = self._clock()
            if self.elector is not None:
                self.metrics.leader.set(1 if self.is_leading() else 0)
                if self.elector.lost.is_set():
                    return 1
            timeout = _STANDBY_SLEEP
            if self.is_leading():
                if not self._led:
                    # Taking the lead: the decayed usage the last leader wrote, before the
                    # first pass (docs/queues.md#fairness-over-time).
                    self.queue_status.restore_usage(self.state, datetime.now(UTC).timestamp())
                    self._led = True
                for report in self._malformed.values():
                    self.actuator.report_malformed(report, self.scheduler_names)
                self._malformed.clear()
                if not self.options.dry_run:
                    self.bad_runtimes.report(self.events)
                now = datetime.now(UTC)
                # Each pod's writes start as soon as it is decided, not after the whole pass.
                for step in self.scheduler.pass_steps(now):
                    # A long pass (thousands of pending pods on a big, full cluster) is the
                    # loop at work: /healthz must not fail while it runs.
                    self._heartbeat = self._clock()
                    if step:
                        self.metrics.observe_pass(step, self.state)
                        if self.ui is not None:
                            self.ui.record(step, now)
                        self.actuator.apply(step, self.state, self._pending_since)
                self.passes += 1
                self.metrics.observe_queue(self.scheduler.queue)
                if not self.options.dry_run:
                    self.reservations.after_pass(self.state)
                timeout = self._sleep_for(now)
            self.queue_status.tick(self.state)
            if self.ui is not None:
                self.ui.publish_if_due(datetime.now(UTC))
            self._apply(self._take(timeout))
        return 0

    def _sleep_for(self, now: datetime) -> float:
        wakeup = self.scheduler.queue.next_wakeup()
        if wakeup is None:
            return _MAX_SLEEP
        return min(max(wakeup - now.timestamp(), 0.0), _MAX_SLEEP)

    def _take(self, timeout: float) -> list[Fact]:
        """The facts that arrived, waiting up to `timeout` for the first one."""
        batch: list[Fact] = []
        try:
            batch.append(
                self.facts.get(timeout=timeout) if timeout > 0 else self.facts.get_nowait()
            )
            while True:
                batch.append(self.facts.get_nowait())
        except queue.Empty:
            pass
        return batch

    def _apply(self, batch: list[Fact]) -> None:
        now = time.monotonic()
        for fact in batch:
            if isinstance(fact, Malformed):
                self._malformed[(fact.kind, fact.key)] = fact
                apply_fact(self.state, fact)
                continue
            if isinstance(fact, Remove):
                self._malformed.pop((fact.kind.name, fact.key), None)
            elif isinstance(fact, Upsert) and self._malformed:
                # A good version came before the lease: nothing left to report. Namespaced
                # records have a `key` (namespace/name), cluster-scoped ones only a name.
                key = str(getattr(fact.record, "key", fact.record.name))
                self._malformed.pop((fact.kind.name, key), None)
            apply_fact(self.state, fact)
            if isinstance(fact, Upsert):
                self.bad_runtimes.seen(fact.record)
            if isinstance(fact, Upsert) and isinstance(fact.record, Pod):
                if fact.record.key in self.state.pods.pending:
                    self._pending_since.setdefault(fact.record.key, now)
                else:
                    self._pending_since.pop(fact.record.key, None)
            elif isinstance(fact, Remove):
                self._forget(fact)
            elif isinstance(fact, BindFailed):
                self.scheduler.bind_failed(fact.pod, datetime.now(UTC))

    def _forget(self, gone: Remove) -> None:
        """What the loop's writers keep about a deleted pod or PodGroup goes with it."""
        kind = gone.kind.manifest_kind or gone.kind.name
        if kind == "Queue":
            self.queue_status.forget(gone.key)
        if kind not in ("Pod", "PodGroup"):
            return
        namespace, _, name = gone.key.partition("/")
        self.events.forget(kind, namespace, name)
        self.bad_runtimes.forget(kind, gone.key)
        if kind == "Pod":
            self._pending_since.pop(gone.key, None)
            self.actuator.forget_pod(gone.key)
        else:
            self.actuator.forget_group(gone.key)

    def _shutdown(self) -> None:
        for informer in self.informers:
            informer.stop()
        self.actuator.stop_waiting()
        self.actuator.wait()
        self.queue_status.wait()
        if self.elector is not None:
            self.elector.stop()
        self.actuator.shutdown()
        self.queue_status.shutdown()
        self.events.close()
        for informer in self.informers:
            informer.join(2.0)


def _kind_order(fact: Fact) -> int:
    return KIND_ORDER[fact.kind.name] if isinstance(fact, Upsert | Remove) else 0
