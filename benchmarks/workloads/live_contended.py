"""LiveContended: issue 18's contended cluster through `batchsched run`'s loop (item 4).

The objects of `Contended/<n>Nodes` (same generator and seed) are served by the fake API server
in a child process, pending pods included, and the live loop (leader election off, client QPS
unlimited) starts against it. Times count from the moment its caches are synced:

- `first_pass_seconds`: the first scheduling pass, which tries every pending pod once (the
  pass `Contended/<n>Nodes` spends most of its time in);
- `first_binding_seconds` and `bindings_in_first_pass`: the loop writes each pod's decisions
  as soon as they are made, so bindings reach the server while the pass still runs;
- `last_binding_seconds`: when the server accepted the last Binding, once bindings and
  evictions (pod DELETEs) have stopped for `QUIET` seconds and a whole pass has run since.

Unlike `batchsched schedule`, the clock runs (start times are shifted to the real clock, so
tolerations run out as in the one-shot case) and victims leave when their DELETE is seen on
the watch, so the bindings and evictions are close to, not equal to, the one-shot counts.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from typing import Any

from batchsched.objects.load import Objects
from batchsched.objects.records import Pod
from benchmarks.harness import Metrics, workload
from benchmarks.workloads import contended
from benchmarks.workloads.live import TIMEOUT, _start_synced

QUIET = 5.0  # seconds without a binding or an eviction that end the run
POLL = 0.02


def _quantities(requests: dict[str, int]) -> dict[str, str]:
    out = {name: str(amount) for name, amount in requests.items()}
    out["cpu"] = f"{requests['cpu']}m"
    out.pop("pods", None)
    return out


def _pod(pod: Pod, shift: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": pod.scheduler_name,
        "priorityClassName": pod.priority_class_name,
        "priority": pod.priority,
        "containers": [{"name": "c", "resources": {"requests": _quantities(pod.requests)}}],
    }
    status: dict[str, Any] = {"phase": pod.phase}
    if pod.node_name:
        spec["nodeName"] = pod.node_name
    if pod.start_time is not None:
        started = (pod.start_time + shift).strftime("%Y-%m-%dT%H:%M:%SZ")
        status["startTime"] = started
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": started}
        ]
    meta = {"name": pod.name, "namespace": pod.namespace, "labels": dict(pod.labels)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def manifests(objects: Objects, now: datetime) -> list[tuple[str, dict[str, Any]]]:
    """The API objects (resource plural, object) of `contended.generate`'s output, with start
    times moved from `contended.NOW` to `now`; classes, nodes and groups before pods."""
    shift = now - contended.NOW
    out: list[tuple[str, dict[str, Any]]] = []
    for pc in objects.priority_classes:
        meta = {"name": pc.name, "annotations": dict(pc.annotations)}
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": meta}
        out.append(("priorityclasses", {**body, "value": pc.value}))
    for node in objects.nodes:
        allocatable = _quantities(node.allocatable)
        allocatable["pods"] = str(node.allocatable["pods"])
        meta = {"name": node.name, "labels": dict(node.labels)}
        body = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
        out.append(("nodes", {**body, "status": {"allocatable": allocatable}}))
    for group in objects.pod_groups:
        meta = {"name": group.name, "namespace": group.namespace}
        body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta}
        out.append(("podgroups", {**body, "spec": {"minMember": group.min_member}}))
    for pdb in objects.pdbs:
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": pdb.name, "namespace": pdb.namespace},
            "spec": {"selector": {"matchLabels": dict(pdb.selector.match_labels)}},
            "status": {"disruptionsAllowed": pdb.disruptions_allowed},
        }
        out.append(("poddisruptionbudgets", body))
    out.extend(("pods", _pod(pod, shift)) for pod in objects.pods)
    return out


def _serve(conn: Connection, nodes: int) -> None:
    """The child process: a fake API server holding the contended cluster, reporting the
    bindings and pod deletions it has accepted."""
    from tests.live.fake_apiserver import FakeApiServer

    api = FakeApiServer().start()
    objects = contended.generate(nodes, seed=nodes)
    for plural, obj in manifests(objects, datetime.now(UTC)):
        api.create(plural, obj)
    conn.send(api.url)
    first_binding = 0.0
    while True:
        command = conn.recv()
        if command == "progress":
            with api.lock:
                if api.bindings and not first_binding:
                    first_binding = api.last_binding
                deletes = sum(1 for m, p in api.requests if m == "DELETE" and "/pods/" in p)
                conn.send((api.bindings, deletes, first_binding, api.last_binding))
        else:
            api.stop()
            conn.send(None)
            return


def run(nodes: int) -> Metrics:
    # Thousands of pods stay unschedulable in a nearly full cluster: their log lines would
    # bury the result.
    logging.getLogger("batchsched").setLevel(logging.ERROR)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=_serve, args=(child, nodes))
    server.start()
    try:
        scheduler, stop, thread, sync_seconds = _start_synced(parent.recv(), qps=-1)
        synced = time.time()
        pending = len(scheduler.state.pods.pending)
        first_pass = 0.0
        in_first_pass = 0
        last = (0, 0)
        quiet_since, passes_since = time.monotonic(), 0
        deadline = time.monotonic() + TIMEOUT
        while True:
            time.sleep(POLL)
            parent.send("progress")
            bound, deleted, first_binding, last_binding = parent.recv()
            if not first_pass and scheduler.passes:
                first_pass, in_first_pass = time.time() - synced, bound
            if (bound, deleted) != last:
                last = (bound, deleted)
                quiet_since, passes_since = time.monotonic(), scheduler.passes
            elif (
                scheduler.passes >= passes_since + 2  # a whole pass ran after the last write
                and time.monotonic() - quiet_since > QUIET
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"still binding after {TIMEOUT} s ({bound} bound)")
        stop.set()
        thread.join(120)
        return {
            "nodes": nodes,
            "pending_pods": pending,
            "sync_seconds": round(sync_seconds, 2),
            "first_pass_seconds": round(first_pass, 2),
            "first_binding_seconds": round(first_binding - synced, 2),
            "bindings_in_first_pass": in_first_pass,
            "last_binding_seconds": round(last_binding - synced, 2),
            "bindings": bound,
            "evictions": deleted,
            "scheduling_passes": scheduler.passes,
        }
    finally:
        parent.send("stop")
        parent.recv()
        server.join(10)


@workload("LiveContended/1000Nodes")
def live_contended_1000() -> Metrics:
    return run(1000)


@workload("LiveContended/5000Nodes")
def live_contended_5000() -> Metrics:
    return run(5000)
