"""What a cluster has besides the control plane, for end-to-end tests: a fake kubelet for every
node, objects made the way users make them, and the scheduler under test run with the
ServiceAccount from deploy/."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
import urllib3
import yaml

from batchsched.config import SchedulerConfig, parse_config
from batchsched.live.client import (
    MERGE_PATCH,
    STRATEGIC_PATCH,
    ApiError,
    KubeClient,
)
from batchsched.live.credentials import load_credentials
from batchsched.live.runner import LiveOptions, LiveScheduler
from testsupport.controlplane import REPO, ControlPlane, MissingAssets, free_port

NOT_READY = "node.kubernetes.io/not-ready"
# Short, so failover tests are quick; wide enough for a loaded 2-core machine.
LEASE = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"}

T = TypeVar("T")


def require(find: Callable[[], T]) -> T:
    """What `find` finds of the control plane's binaries, or skip the test saying what is
    missing (CI has none of them)."""
    try:
        return find()
    except MissingAssets as err:
        pytest.skip(str(err))


def wait(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {what or predicate}")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeKubelet:
    """Every node's kubelet, over the API: a new node is reported Ready and its not-ready taint
    lifted (the node lifecycle controller's part); a pod bound to a node is reported Running
    with PodScheduled=True; a terminating pod is removed once its grace period is (at once)
    over, as the kubelet does after stopping its containers."""

    def __init__(self, client: KubeClient, period: float = 0.2) -> None:
        self.client = client
        self.period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-kubelet", daemon=True)

    def start(self) -> FakeKubelet:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self._nodes()
                self._pods()
            except ApiError:
                pass  # the API server is restarting: try again next round

    def _nodes(self) -> None:
        for node in self.client.json("GET", "/api/v1/nodes")["items"]:
            name = node["metadata"]["name"]
            conditions = (node.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                ready = {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": _now(),
                    "lastTransitionTime": _now(),
                }
                self.client.request(
                    "PATCH",
                    f"/api/v1/nodes/{name}/status",
                    body={"status": {"conditions": [ready]}},
                    content_type=STRATEGIC_PATCH,
                )
            taints = (node.get("spec") or {}).get("taints") or []
            if any(t["key"] == NOT_READY for t in taints):
                kept = [t for t in taints if t["key"] != NOT_READY]
                self.client.request(
                    "PATCH",
                    f"/api/v1/nodes/{name}",
                    body={"spec": {"taints": kept or None}},
                    content_type=MERGE_PATCH,
                )

    def _pods(self) -> None:
        query = {"fieldSelector": "spec.nodeName!="}
        for pod in self.client.json("GET", "/api/v1/pods", query=query)["items"]:
            meta = pod["metadata"]
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            try:
                if meta.get("deletionTimestamp"):
                    self.client.request("DELETE", path, body={"gracePeriodSeconds": 0})
                elif (pod.get("status") or {}).get("phase") == "Pending":
                    conditions = [
                        {"type": t, "status": "True", "lastTransitionTime": _now()}
                        for t in ("Initialized", "ContainersReady", "Ready")
                    ]
                    self.client.request(
                        "PATCH",
                        f"{path}/status",
                        body={
                            "status": {
                                "phase": "Running",
                                "startTime": _now(),
                                "conditions": conditions,
                            }
                        },
                        content_type=STRATEGIC_PATCH,
                    )
            except ApiError as err:
                if err.status not in (404, 409):
                    raise


def shipped_raw_config(
    *plugin_config: dict[str, Any], lease: dict[str, str] | None = None
) -> dict[str, Any]:
    """deploy/config.yaml's configuration with a quicker lease for tests (or `lease`), and
    more plugin arguments if given."""
    docs = yaml.safe_load((REPO / "deploy" / "config.yaml").read_text())
    raw: dict[str, Any] = yaml.safe_load(docs["data"]["config.yaml"])
    raw["leaderElection"] = {**raw["leaderElection"], **(lease or LEASE)}
    raw["profiles"][0]["pluginConfig"].extend(plugin_config)
    return raw


def shipped_config(
    *plugin_config: dict[str, Any], lease: dict[str, str] | None = None
) -> SchedulerConfig:
    return parse_config(shipped_raw_config(*plugin_config, lease=lease))


class Cluster:
    """One test's corner of the shared control plane: its namespace, its nodes (deleted after)
    and the schedulers it runs (stopped after, each checked for 403s)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.admin = plane.admin()
        self.namespace = f"e2e-{uuid.uuid4().hex[:6]}"
        self.admin.request(
            "POST", "/api/v1/namespaces", body={"metadata": {"name": self.namespace}}
        )
        self.nodes: list[str] = []
        self.schedulers: list[tuple[LiveScheduler, threading.Event, threading.Thread]] = []

    # ---- objects ---------------------------------------------------------------------

    def node(
        self, name: str, cpu: str = "2", memory: str = "8Gi", labels: dict[str, str] | None = None
    ) -> None:
        # Registered as a kubelet registers its node, with its hostname label.
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
        self.admin.request(
            "POST", "/api/v1/nodes", body={"metadata": {"name": name, "labels": labels}}
        )
        self.nodes.append(name)
        allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
        self.admin.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            body={"status": {"allocatable": allocatable, "capacity": allocatable}},
            content_type=STRATEGIC_PATCH,
        )

    def pod_body(
        self,
        name: str,
        cpu: str = "1",
        priority_class: str = "",
        labels: dict[str, str] | None = None,
        scheduler: str = "batchsched",
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
            ],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        return {
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels or {}},
            "spec": spec,
        }

    def pod(self, name: str, cpu: str = "1", **kwargs: Any) -> None:
        self.create(f"/api/v1/namespaces/{self.namespace}/pods", self.pod_body(name, cpu, **kwargs))

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.admin.json("POST", path, body=body))

    def get_pod(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.admin.json("GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}"))
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def node_of(self, name: str) -> str:
        pod = self.get_pod(name)
        return "" if pod is None else str(pod["spec"].get("nodeName") or "")

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        pod = self.get_pod(name) or {}
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond["type"] == type_:
                return dict(cond)
        return None

    def events(self, reason: str) -> list[dict[str, Any]]:
        path = f"/apis/events.k8s.io/v1/namespaces/{self.namespace}/events"
        return [e for e in self.admin.json("GET", path)["items"] if e.get("reason") == reason]

    def pods(self) -> list[dict[str, Any]]:
        return list(self.admin.json("GET", f"/api/v1/namespaces/{self.namespace}/pods")["items"])

    # ---- the scheduler under test ----------------------------------------------------

    def run_scheduler(
        self,
        config: SchedulerConfig | None = None,
        identity: str = "e2e",
        kubeconfig: Path | None = None,
        **options: Any,
    ) -> LiveScheduler:
        """The scheduler in this process, as deploy/'s ServiceAccount (or `kubeconfig`)."""
        client = KubeClient(load_credentials(kubeconfig or self.plane.deploy()))
        scheduler = LiveScheduler(
            client,
            config or shipped_config(),
            LiveOptions(
                identity=identity, watch_timeout=options.pop("watch_timeout", 10), **options
            ),
        )
        stop = threading.Event()
        thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
        thread.start()
        self.schedulers.append((scheduler, stop, thread))
        return scheduler

    def stop_schedulers(self) -> None:
        for _, stop, _ in self.schedulers:
            stop.set()
        for scheduler, _, thread in self.schedulers:
            thread.join(30)
            assert not thread.is_alive(), "the scheduler did not stop"
            forbidden = forbidden_requests(scheduler)
            assert forbidden == 0, f"{forbidden} requests refused with 403 (RBAC in deploy/)"
        self.schedulers.clear()

    def close(self) -> None:
        self.stop_schedulers()
        for pod in self.pods():
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                self.admin.request(
                    "DELETE",
                    f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                    body={"gracePeriodSeconds": 0},
                )
        for name in self.nodes:
            with contextlib.suppress(ApiError):
                self.admin.request("DELETE", f"/api/v1/nodes/{name}")


class Process:
    """`batchsched run` as the Deployment runs it, logging to a file; its endpoints on a free
    port, plain HTTP (`--listen`) unless `https`."""

    def __init__(
        self, work: Path, kubeconfig: Path, config: Path, identity: str, https: bool = False
    ) -> None:
        self.identity = identity
        self.port = free_port()
        self.log_path = work / f"{identity}.log"
        endpoints = [f"--listen=127.0.0.1:{self.port}"]
        if https:
            endpoints = ["--bind-address=127.0.0.1", f"--secure-port={self.port}"]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "batchsched",
                    "run",
                    f"--kubeconfig={kubeconfig}",
                    f"--config={config}",
                    f"--identity={identity}",
                    *endpoints,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a metric's samples with these labels (NaN while not serving yet)."""
        try:
            response = urllib3.request(
                "GET", f"http://127.0.0.1:{self.port}/metrics", retries=False
            )
        except urllib3.exceptions.HTTPError:
            return math.nan
        body = response.data.decode()
        total = 0.0
        for line in body.splitlines():
            if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(30)


def forbidden_requests(scheduler: LiveScheduler) -> int:
    total = 0.0
    for metric in scheduler.metrics.api_errors.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels.get("code") == "403":
                total += sample.value
    return int(total)
