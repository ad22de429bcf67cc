"""LiveReal: `batchsched run` against a real etcd + kube-apiserver, beside kube-scheduler.

Needs the e2e tests' binaries (KUBEBUILDER_ASSETS, see docs/live.md) and prints a `skipped` line
without it. The nodes (4 CPU, 32Gi, 110 pods, reported Ready and untainted as a kubelet would)
and the pending pods (100m, 500Mi) are created before the scheduler starts; the clock runs from
starting the scheduler's process to the last Binding seen on a watch of the pods, so it
includes start-up, the informers' lists and every write. Both schedulers get
`clientConnection` qps 5000 (burst 5000) and leader election off. With KUBE_SCHEDULER_BIN set,
kube-scheduler schedules the same pods (created afresh, its scheduler name) in the same run,
and `ratio` is batchsched's pods/s over kube-scheduler's.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import yaml

from batchsched.live.client import STRATEGIC_PATCH, ApiError, KubeClient, WatchStream
from batchsched.live.credentials import load_credentials
from benchmarks.harness import Metrics, workload
from testsupport.controlplane import ControlPlane, MissingAssets, assets, terminate

NAMESPACE = "bench"
QPS = 5000
TIMEOUT = 900.0


def _skip() -> Metrics | None:
    try:
        assets()
    except MissingAssets as err:
        return {"skipped": f"{err}"}
    return None


def _parallel(jobs: list[Callable[[], Any]]) -> None:
    with ThreadPoolExecutor(16) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


def _add_node(client: KubeClient, i: int) -> None:
    name = f"node-{i:05d}"
    client.request("POST", "/api/v1/nodes", body={"metadata": {"name": name}})
    allocatable = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    status = {"allocatable": allocatable, "capacity": allocatable, "conditions": [ready]}
    client.request(
        "PATCH",
        f"/api/v1/nodes/{name}/status",
        body={"status": status},
        content_type=STRATEGIC_PATCH,
    )
    # What the node lifecycle controller does once the node is Ready.
    client.request(
        "PATCH",
        f"/api/v1/nodes/{name}",
        body={"spec": {"taints": None}},
        content_type="application/merge-patch+json",
    )


def _add_pod(client: KubeClient, i: int, scheduler: str) -> None:
    body = {
        "metadata": {"name": f"pod-{i:05d}", "namespace": NAMESPACE},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "c",
                    "image": "pause",
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                }
            ],
        },
    }
    client.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body=body)


class BindWatch:
    """Watches the namespace's pods and notes when each is first seen bound."""

    def __init__(self, client: KubeClient, expected: int) -> None:
        self.client = client
        self.expected = expected
        self.times: dict[str, float] = {}
        self.done = threading.Event()
        self._closed = threading.Event()
        self._stream = self._open()
        threading.Thread(target=self._run, daemon=True).start()

    def _open(self) -> WatchStream:
        return self.client.watch(
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            {"fieldSelector": "spec.nodeName!=", "timeoutSeconds": str(int(TIMEOUT))},
            read_timeout=TIMEOUT,
        )

    def _run(self) -> None:
        # A watch the API server ends or drops (a loaded server's watch cache falls behind)
        # is opened again: it starts with every pod bound so far, whose first times are kept.
        while not self._closed.is_set():
            try:
                for line in self._stream:
                    event = orjson.loads(line)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        name = event["object"]["metadata"]["name"]
                        self.times.setdefault(name, time.monotonic())
                        if len(self.times) >= self.expected:
                            self.done.set()
                            return
                if not self._closed.is_set():
                    self._stream = self._open()
            except ApiError:
                if not self._closed.is_set():
                    time.sleep(0.5)
                    with contextlib.suppress(ApiError):
                        self._stream = self._open()

    def close(self) -> None:
        self._closed.set()
        self._stream.close()


def _measure(
    client: KubeClient, pods: int, scheduler: str, command: list[str], work: Path
) -> Metrics:
    _parallel([partial(_add_pod, client, i, scheduler) for i in range(pods)])
    watch = BindWatch(client, pods)
    log = (work / f"{scheduler}.log").open("wb")
    load = os.getloadavg()[0]  # other jobs on the machine: the wall times swing with it
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    first_cpu: float | None = None
    try:
        while not watch.done.wait(0.01):
            if first_cpu is None and watch.times:
                first_cpu = _cpu_seconds(proc.pid)
            if time.monotonic() - started > TIMEOUT:
                raise RuntimeError(f"{scheduler}: only {len(watch.times)} of {pods} pods bound")
        cpu = _cpu_seconds(proc.pid)
    finally:
        terminate(proc, 30)
        log.close()
        watch.close()
    first = min(watch.times.values()) - started
    seconds = max(watch.times.values()) - started
    # The next run starts from an empty namespace (no kubelet: delete without grace).
    client.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", body={"gracePeriodSeconds": 0})
    metrics: Metrics = {
        "seconds": round(seconds, 2),
        "first_bind_seconds": round(first, 2),
        "pods_per_second": round(pods / seconds),
        "load_average": round(load, 1),
    }
    if cpu is not None and first_cpu is not None:
        # The scheduler's own CPU (user + system): on a loaded machine a steadier measure
        # than the wall clock, and on 2 cores what it leaves to the API server.
        metrics["first_bind_cpu_seconds"] = round(first_cpu, 2)
        metrics["cpu_ms_per_pod"] = round(1000 * cpu / pods, 2)
    return metrics


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a running process (Linux /proc), None where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(nodes: int, pods: int) -> Metrics:
    skipped = _skip()
    if skipped is not None:
        return skipped

    with tempfile.TemporaryDirectory(prefix="livereal-") as tmp:
        work = Path(tmp)
        plane = ControlPlane(work).start()
        try:
            client = KubeClient(load_credentials(plane.admin_kubeconfig))
            client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
            _parallel([partial(_add_node, client, i) for i in range(nodes)])
            connection = {"qps": QPS, "burst": QPS}
            ours = work / "batchsched.yaml"
            ours.write_text(
                yaml.safe_dump(
                    {"leaderElection": {"leaderElect": False}, "clientConnection": connection}
                )
            )
            metrics: Metrics = {"nodes": nodes, "pods": pods, "qps": QPS}
            batchsched = [
                sys.executable,
                "-m",
                "batchsched",
                "run",
                f"--kubeconfig={plane.admin_kubeconfig}",
                f"--config={ours}",
                "--listen=127.0.0.1:0",
            ]
            metrics["batchsched"] = _measure(client, pods, "batchsched", batchsched, work)
            kube_scheduler = os.environ.get("KUBE_SCHEDULER_BIN", "")
            if kube_scheduler:
                theirs = work / "kube-scheduler.yaml"
                theirs.write_text(
                    yaml.safe_dump(
                        {
                            "apiVersion": "kubescheduler.config.k8s.io/v1",
                            "kind": "KubeSchedulerConfiguration",
                            "leaderElection": {"leaderElect": False},
                            "clientConnection": {
                                "kubeconfig": str(plane.admin_kubeconfig),
                                **connection,
                            },
                        }
                    )
                )
                command = [kube_scheduler, f"--config={theirs}", "--secure-port=0"]
                upstream = _measure(client, pods, "default-scheduler", command, work)
                metrics["kube_scheduler"] = upstream
                metrics["ratio"] = round(
                    metrics["batchsched"]["pods_per_second"] / upstream["pods_per_second"], 2
                )
            return metrics
        finally:
            plane.stop()


@workload("LiveReal/5000Nodes_10000Pods")
def live_real_5000() -> Metrics:
    return run(5000, 10_000)


@workload("LiveReal/1000Nodes_3000Pods")
def live_real_1000() -> Metrics:
    return run(1000, 3000)
