"""SnapshotRead: a cluster saved with `kubectl get -o yaml` (or `-o json`) read into records.

5,000 nodes and 15,000 pods (three per node, each with the fields kubectl prints: managed
labels, two containers, default tolerations, conditions), written as one `kind: List` file.
The file is written piece by piece so that the peak RSS the runner reports is the reader's.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from batchsched.objects.load import load_files
from benchmarks.harness import Metrics, timed, workload

NODES = 5000
PODS_PER_NODE = 3
STAMP = "2026-11-22T09:00:00Z"


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    gpus = {"nvidia.com/gpu": "8"} if i % 2 else {}
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110", **gpus}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": STAMP,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "gpu-8x" if gpus else "cpu-32",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
            },
        },
        "spec": {"podCIDR": f"10.{i // 250}.{i % 250}.0/24", "providerID": f"fake://{name}"},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": STAMP,
                    "lastTransitionTime": STAMP,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "nodeInfo": {"kubeletVersion": "v1.36.0", "osImage": "Ubuntu 24.04 LTS"},
        },
    }


def _container(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.example.com/ml/{name}:v1.2.3",
        "imagePullPolicy": "IfNotPresent",
        "args": ["--epochs=10", "--batch-size=64"],
        "env": [{"name": "RANK", "value": "0"}, {"name": "WORLD_SIZE", "value": "1"}],
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [{"mountPath": "/data", "name": "data"}],
    }


def _pod(node: int, j: int) -> dict[str, Any]:
    name = f"job-{node:05d}-{j}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"10000000-0000-0000-{j:04d}-{node:012d}",
            "resourceVersion": str(100_000 + node * 3 + j),
            "creationTimestamp": STAMP,
            "labels": {"app": "trainer", "job": name, "team": f"team-{node % 7}"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": name, "controller": True}
            ],
        },
        "spec": {
            "containers": [
                _container("trainer", "8", "30Gi"),
                _container("sidecar", "100m", "128Mi"),
            ],
            "nodeName": f"node-{node:05d}",
            "priorityClassName": ("low", "mid", "high")[j],
            "schedulerName": "batchsched",
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {
                    "effect": "NoExecute",
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "tolerationSeconds": 300,
                },
                {
                    "effect": "NoExecute",
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "tolerationSeconds": 300,
                },
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
        "status": {
            "phase": "Running",
            "startTime": STAMP,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": STAMP},
                {"type": "Ready", "status": "True", "lastTransitionTime": STAMP},
            ],
        },
    }


def _objects() -> Iterator[dict[str, Any]]:
    for i in range(NODES):
        yield _node(i)
    for i in range(NODES):
        for j in range(PODS_PER_NODE):
            yield _pod(i, j)


def write_yaml(path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write("apiVersion: v1\nitems:\n")
        for obj in _objects():
            out.write(yaml.dump([obj], Dumper=yaml.CSafeDumper, default_flow_style=False))
        out.write('kind: List\nmetadata:\n  resourceVersion: ""\n')


def write_json(path: Path) -> None:
    with path.open("wb") as out:
        out.write(b'{"apiVersion": "v1", "kind": "List", "items": [\n')
        for n, obj in enumerate(_objects()):
            out.write((b",\n" if n else b"") + orjson.dumps(obj, option=orjson.OPT_INDENT_2))
        out.write(b"\n]}\n")


def run(suffix: str) -> Metrics:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"cluster.{suffix}"
        (write_yaml if suffix == "yaml" else write_json)(path)
        size = path.stat().st_size
        cpu = time.process_time()
        with timed() as watch:
            objects = load_files([path])
        cpu = time.process_time() - cpu
    if len(objects.nodes) != NODES or len(objects.pods) != NODES * PODS_PER_NODE:
        raise RuntimeError(f"read {len(objects.nodes)} nodes and {len(objects.pods)} pods")
    return {
        "file_mb": round(size / 2**20, 1),
        "objects": len(objects.nodes) + len(objects.pods),
        "seconds": round(watch.seconds, 3),
        "cpu_seconds": round(cpu, 3),  # the machine is shared: CPU time compares runs better
    }


@workload("SnapshotRead/5000Nodes_yaml")
def snapshot_yaml() -> Metrics:
    return run("yaml")


@workload("SnapshotRead/5000Nodes_json")
def snapshot_json() -> Metrics:
    return run("json")
