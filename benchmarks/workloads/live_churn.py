"""LiveChurn: `batchsched run`'s memory over a long churn of pods, time compressed.

A steady population of pods comes and goes while the live loop schedules them: the fake API
server runs in a child process with a driver thread that keeps `POPULATION` pods of this
scheduler in the cluster, deleting each when its (short) job ends, and deleting pods that wait
too long, as users and controllers do. The pods are of every kind the loop keeps something
for: plain pods, gang members with their PodGroup (created and deleted with them), pods with a
ResourceClaim of their own (created and deleted with them), high-priority pods that preempt,
and pods that never fit (unschedulable until they are deleted). Jobs last seconds, not
minutes, so `CHURNED` pods (the issue's 20 minutes at 4 pods/s, and more) pass in a minute or
two.

The scheduler's resident set size is sampled against the number of pods that have come and
gone; after `WARM_UP` pods (caches, pools and the collector settle) a least-squares line gives
`mb_per_1000_pods` and `relative_growth` (the line's rise over the measured pods divided by
its value where measuring starts). Target: flat within 10%. See docs/benchmarks.md.
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from benchmarks.harness import Metrics, workload
from benchmarks.workloads.live import TIMEOUT, _start_synced

NODES = 50
DRA_NODES = 10  # nodes with a ResourceSlice of DRA devices as well
POPULATION = 300
CHURNED = 6000  # pods that come and go in the run
WARM_UP = 1500
SEED = 7
TICK = 0.02
PENDING_PATIENCE = 6.0  # seconds a pod may wait before its user gives up and deletes it
GPU = "nvidia.com/gpu"


def _node(i: int) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}
    return {"metadata": {"name": f"node-{i:03d}"}, "status": {"allocatable": allocatable}}


def _slice(i: int) -> dict[str, Any]:
    node = f"node-{i:03d}"
    return {
        "metadata": {"name": f"{node}-devices"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"dev-{d}"} for d in range(4)],
        },
    }


def _classes() -> list[tuple[str, dict[str, Any]]]:
    device_class = {
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
    }
    out: list[tuple[str, dict[str, Any]]] = [("deviceclasses", device_class)]
    for name, value in (("low", 100), ("high", 1000)):
        out.append(("priorityclasses", {"metadata": {"name": name}, "value": value}))
    return out


def _pod(name: str, gpus: int, priority: str = "low", **meta: Any) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}
    return {
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {
            "schedulerName": "batchsched",
            "priorityClassName": priority,
            "containers": [{"name": "c", "resources": {"requests": requests}}],
        },
    }


@dataclass
class Job:
    """Objects created together and deleted together: one pod, or a gang and its PodGroup,
    or a pod and its claim."""

    pods: list[str]
    lifetime: float  # seconds it runs once all its pods are bound
    extra: list[tuple[str, str]] = field(default_factory=list)  # (plural, name)
    created: float = 0.0
    started: float | None = None


class Churn:
    """Keeps `population` pods in the fake API server, job after job, until `total` pods have
    been created; deletes a job's objects when it ends or has waited too long."""

    def __init__(self, api: Any, population: int, total: int, seed: int) -> None:
        self.api = api
        self.population = population
        self.total = total
        self.random = random.Random(seed)
        self.jobs: list[Job] = []
        self.created = 0  # pods
        self.deleted = 0  # pods gone: deleted here, or preempted by the scheduler
        self.counter = 0
        self.stop = threading.Event()

    def _new_job(self) -> Job:
        self.counter += 1
        n = self.counter
        kind = self.random.random()
        lifetime = self.random.uniform(1.0, 4.0)
        if kind < 0.15:  # a gang of 4 and its PodGroup
            group = f"gang-{n:06d}"
            meta = {"labels": {"scheduling.x-k8s.io/pod-group": group}}
            self.api.create(
                "podgroups",
                {"metadata": {"name": group, "namespace": "default"}, "spec": {"minMember": 4}},
            )
            names = [f"{group}-{m}" for m in range(4)]
            for name in names:
                self.api.create("pods", _pod(name, 2, **meta))
            return Job(names, lifetime, [("podgroups", group)])
        if kind < 0.25:  # a pod with a claim of its own
            name, claim = f"claimed-{n:06d}", f"claim-{n:06d}"
            request = {"name": "dev", "exactly": {"deviceClassName": "gpu", "count": 1}}
            self.api.create(
                "resourceclaims",
                {
                    "metadata": {"name": claim, "namespace": "default"},
                    "spec": {"devices": {"requests": [request]}},
                },
            )
            manifest = _pod(name, 0)
            manifest["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": claim}]
            manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "dev"}]
            self.api.create("pods", manifest)
            return Job([name], lifetime, [("resourceclaims", claim)])
        if kind < 0.35:  # a high-priority pod that preempts when the cluster is full
            name = f"urgent-{n:06d}"
            self.api.create("pods", _pod(name, 4, priority="high"))
            return Job([name], lifetime)
        if kind < 0.40:  # a pod that never fits
            name = f"huge-{n:06d}"
            self.api.create("pods", _pod(name, 16))
            return Job([name], lifetime)
        name = f"plain-{n:06d}"
        self.api.create("pods", _pod(name, self.random.choice((1, 1, 2))))
        return Job([name], lifetime)

    def _bound(self) -> dict[str, bool]:
        with self.api.lock:
            return {
                key.partition("/")[2]: bool(obj.get("spec", {}).get("nodeName"))
                for key, obj in self.api.store["pods"].items()
            }

    def _end(self, job: Job, present: dict[str, bool]) -> None:
        for name in job.pods:
            if name in present:
                self.api.delete("pods", name, "default")
            self.deleted += 1
        for plural, name in job.extra:
            self.api.delete(plural, name, "default")

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            present = self._bound()
            live: list[Job] = []
            for job in self.jobs:
                there = [name in present for name in job.pods]
                if job.started is None and all(present.get(name) for name in job.pods):
                    job.started = now
                done = job.started is not None and now - job.started > job.lifetime
                waited = job.started is None and now - job.created > PENDING_PATIENCE
                if done or waited or not all(there):  # a preempted member ends its job
                    self._end(job, present)
                else:
                    live.append(job)
            self.jobs = live
            while self.created < self.total and sum(len(j.pods) for j in live) < self.population:
                job = self._new_job()
                job.created = now
                self.created += len(job.pods)
                live.append(job)
            if self.created >= self.total and not live:
                return
            self.stop.wait(TICK)


def _serve(conn: Connection, population: int, total: int) -> None:
    """The child process: the fake API server, its cluster and the churn driver, answering
    the parent's commands on `conn`."""
    from tests.live.fake_apiserver import FakeApiServer

    api = FakeApiServer(history=20_000).start()
    for plural, obj in _classes():
        api.create(plural, obj)
    for i in range(NODES):
        api.create("nodes", _node(i))
    for i in range(DRA_NODES):
        api.create("resourceslices", _slice(i))
    churn = Churn(api, population, total, SEED)
    driver = threading.Thread(target=churn.run, daemon=True)
    conn.send(api.url)
    while True:
        command = conn.recv()
        if command == "start":
            driver.start()
            conn.send(None)
        elif command == "progress":
            conn.send((churn.deleted, churn.created, driver.is_alive(), api.bindings))
        else:
            churn.stop.set()
            api.stop()
            conn.send(None)
            return


def rss_mb() -> float:
    """This process's resident set size."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * _PAGE / 2**20


_PAGE = 4096


def slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line through (x, y) points: (slope, intercept)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    rise = sum((x - mean_x) * (y - mean_y) for x, y in points)
    k = rise / spread if spread else 0.0
    return k, mean_y - k * mean_x


def samples(parent: Connection, every: float = 0.5) -> Iterator[tuple[int, int, bool, int]]:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        parent.send("progress")
        yield parent.recv()
        time.sleep(every)
    raise RuntimeError("the churn did not finish in time")


def run(population: int = POPULATION, total: int = CHURNED, warm_up: int = WARM_UP) -> Metrics:
    # Churn makes warnings by the hundred (statuses of groups deleted meanwhile): not news.
    logging.getLogger("batchsched").setLevel(logging.ERROR)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=_serve, args=(child, population, total))
    server.start()
    try:
        scheduler, stop, thread, _ = _start_synced(parent.recv(), qps=-1)
        parent.send("start")
        parent.recv()
        started = time.perf_counter()
        points: list[tuple[float, float]] = []
        start_rss = rss_mb()
        bound = 0
        for gone, _created, running, bound_so_far in samples(parent):
            points.append((gone, rss_mb()))
            bound = bound_so_far
            if not running:
                break
        seconds = time.perf_counter() - started
        stop.set()
        thread.join(120)
        measured = [(x, y) for x, y in points if x >= warm_up]
        k, b = slope(measured)
        first, last = measured[0][0], measured[-1][0]
        at_start = k * first + b
        victims = scheduler.metrics.registry.get_sample_value("batchsched_preemption_victims_total")
        return {
            "nodes": NODES,
            "population": population,
            "pods_churned": int(points[-1][0]),
            "bindings": bound,
            "preemption_victims": int(victims or 0),
            "seconds": round(seconds, 1),
            "rss_mb_at_sync": round(start_rss, 1),
            "rss_mb_after_warm_up": round(at_start, 1),
            "rss_mb_at_end": round(points[-1][1], 1),
            "mb_per_1000_pods": round(k * 1000, 2),
            "relative_growth": round(k * (last - first) / at_start, 3),
        }
    finally:
        parent.send("stop")
        parent.recv()
        server.join(10)


@workload("LiveChurn/50Nodes_300Pods_6000Churned")
def live_churn() -> Metrics:
    return run()
