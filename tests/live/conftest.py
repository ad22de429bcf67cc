"""Fixtures for live-mode tests: a fake API server and schedulers running against it."""

from __future__ import annotations

import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from batchsched.config import SchedulerConfig, parse_config
from batchsched.live.client import KubeClient
from batchsched.live.credentials import Credentials
from batchsched.live.runner import LiveOptions, LiveScheduler
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer

# Quick retries for quick failovers. The lease is timed on the launcher's FakeClock, so a
# leader never misses its renew deadline however slowly a loaded machine runs it, and a
# standby takes a crashed leader's lease only when the test moves the clock.
FAST_LEASE = {
    "leaderElect": True,
    "leaseDuration": "3s",
    "renewDeadline": "2s",
    "retryPeriod": "100ms",
    "resourceNamespace": "kube-system",
}
# For tests that move the shared clock for something else (a status writer's rate) while a
# leader and a standby both run: a jump past the renew deadline would look like a leader
# frozen that long, and a standby may rightly take its lease (the leader then exits 1) if
# the leader's first renewal after the jump comes late, as it may on a loaded machine.
# Handovers in these tests come from a leader releasing its lease.
STEADY_LEASE = {**FAST_LEASE, "leaseDuration": "60s", "renewDeadline": "40s"}


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def pod(
    name: str,
    cpu: str = "1",
    node_name: str = "",
    priority: int | None = None,
    namespace: str = "default",
    scheduler: str = "batchsched",
    **meta: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": name, "namespace": namespace, **meta}, "spec": spec}


def client_for(api: FakeApiServer) -> KubeClient:
    return KubeClient(Credentials(api.url), backoff=0.01, max_backoff=0.05)


def config(**top: Any) -> SchedulerConfig:
    return parse_config({"leaderElection": {"leaderElect": False}, **top})


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer(bookmark_interval=0.2).start()
    yield server
    server.stop()


class FakeClock:
    """Monotonic seconds that pass only when the test says so (the schedulers' lease and
    heartbeat clock): nothing a test checks depends on how long the machine took."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Running:
    scheduler: LiveScheduler
    stop: threading.Event
    thread: threading.Thread
    result: list[int] = field(default_factory=list)

    def halt(self) -> int | None:
        self.stop.set()
        self.thread.join(WAIT_SECONDS)
        assert not self.thread.is_alive(), "scheduler did not stop"
        return self.result[0] if self.result else None


class Launcher:
    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.running: list[Running] = []
        self.clock = FakeClock()  # shared by the replicas a test launches

    def __call__(
        self, cfg: SchedulerConfig | None = None, dry_run: bool = False, identity: str = ""
    ) -> Running:
        options = LiveOptions(
            dry_run=dry_run,
            identity=identity,
            watch_timeout=5.0,
            event_series_interval=3600,
            informer_backoff=0.02,
            pre_bind_poll=0.05,
        )
        scheduler = LiveScheduler(client_for(self.api), cfg or config(), options, self.clock)
        stop = threading.Event()
        run = Running(scheduler, stop, threading.Thread(target=lambda: None))
        run.thread = threading.Thread(
            target=lambda: run.result.append(scheduler.run(stop)), daemon=True
        )
        run.thread.start()
        self.running.append(run)
        return run


@pytest.fixture
def launch(api: FakeApiServer) -> Iterator[Launcher]:
    launcher = Launcher(api)
    yield launcher
    for run in launcher.running:
        run.stop.set()
    for run in launcher.running:
        run.thread.join(WAIT_SECONDS)


def node_of(api: FakeApiServer, name: str, namespace: str = "default") -> str:
    obj = api.get("pods", name, namespace)
    return "" if obj is None else str(obj["spec"].get("nodeName", ""))


def condition(api: FakeApiServer, name: str, type_: str = "PodScheduled") -> dict[str, Any] | None:
    """A pod's condition of that type as the API server has it."""
    obj = api.get("pods", name) or {}
    for cond in obj.get("status", {}).get("conditions", []):
        if cond["type"] == type_:
            return dict(cond)
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, token: str = "", trust: str | None = None) -> tuple[int, bytes]:
    """GET `url`; over HTTPS the server must prove itself with the certificate `trust`
    (checked against 127.0.0.1), or with any certificate when `trust` is None."""
    context = ssl.create_default_context(cadata=trust)
    if trust is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=WAIT_SECONDS, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
