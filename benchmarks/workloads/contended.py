"""Contended: `batchsched schedule` on a mixed, nearly full cluster (issue 18's workload).

Nodes of 32 CPU / 128Gi, every other one with 8 GPUs, each nearly full with three running pods
of the classes low, mid and `tolerant` (tolerates preemption by pods below `high` for 10
minutes after it started); a running 2-pod gang on every tenth pair of nodes; a PDB over the
mid pods of every 100 nodes. Twice as many pending pods as nodes, of priorities low, mid and
high in a few shapes, 10% of them in 4-member PodGroups. Generated from a seed.

ContendedPDB (issue 32): the same cluster with running gangs of 4 (on every fifth group of 20
nodes' first four), the low and mid pods of every 100 nodes labelled as one shard of one
`app: trainer` and covered by that shard's PDB, selected as most are written
(`matchLabels: {app: trainer}` plus `shard In [...]`, so the pair the selector names is shared
by every PDB of the namespace), and the pending pods labelled as trainer pods of random shards:
finding a pod's PDBs must not cost per PDB of its namespace.

Reported: wall and CPU time, pods/s (pending pods decided per second), bindings, evictions,
passes, `attempts_per_binding` (scheduling attempts, failed ones included, per pod bound) and
`decision_hash`, a digest of the bindings, evictions and unschedulable messages in order.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from batchsched.commands.schedule import run
from batchsched.config import default_config
from batchsched.objects.load import Objects
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.records import (
    LabelSelector,
    Node,
    Pod,
    PodCondition,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Requirement,
)
from benchmarks.harness import Metrics, decision_hash, timed, workload

NOW = datetime(2026, 11, 22, 12, tzinfo=UTC)
GPU = "nvidia.com/gpu"
GI = 2**30
TOLERANT = {
    "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "1000",
    "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "600",
}
CLASSES = [
    PriorityClass("low", 10),
    PriorityClass("tolerant", 50, annotations=TOLERANT),
    PriorityClass("mid", 100),
    PriorityClass("high", 1000),
]
PRIORITY = {pc.name: pc.value for pc in CLASSES}
# Running pods per node (CPU millicores, GiB, GPUs on a GPU node): 30 of 32 CPU, 120 of
# 128Gi and 7 of 8 GPUs taken.
RUNNING = [("low", 10_000, 40, 2), ("mid", 10_000, 40, 3), ("tolerant", 10_000, 40, 2)]
# Pending shapes (CPU millicores, GiB, GPUs).
SHAPES = [(2_000, 8, 0), (4_000, 16, 0), (8_000, 32, 0), (4_000, 16, 1), (8_000, 32, 2)]


@dataclass(frozen=True, slots=True)
class Shape:
    """What sets one variant apart: running gang size, and the PDBs' shards."""

    gang_size: int = 2  # running low pods per gang, one per node on consecutive nodes
    shards: bool = False  # PDBs over `app: trainer` shards (ContendedPDB) instead of `app: svc-N`
    pdb_nodes: int = 100  # nodes per PDB (and per shard)


CONTENDED = Shape()
CONTENDED_PDB = Shape(gang_size=4, shards=True)


def generate(nodes: int, seed: int, shape: Shape = CONTENDED) -> Objects:
    """The workload on `nodes` nodes; the same seed gives the same objects."""
    rng = random.Random(seed)
    objects = Objects(priority_classes=list(CLASSES))
    for i in range(nodes):
        gpus = 8 if i % 2 == 0 else 0
        allocatable = {"cpu": 32_000, "memory": 128 * GI, "pods": 110}
        if gpus:
            allocatable[GPU] = gpus
        name = f"node-{i:05d}"
        objects.nodes.append(Node(name, allocatable, labels={"kubernetes.io/hostname": name}))
        for cls, cpu, mem, gpu in RUNNING:
            group = ""
            if cls == "low" and i % 20 < shape.gang_size:  # one member per node of a run
                group = f"running-gang-{i // 20:04d}"
            labels = _running_labels(shape, cls, i)
            if group:
                labels[GROUP_LABEL] = group
            requests = {"cpu": cpu, "memory": mem * GI, "pods": 1}
            if gpus:
                requests[GPU] = gpu
            # Started between 30 minutes and 1 minute ago: some tolerations have run out.
            started = NOW - timedelta(seconds=rng.randrange(60, 1800))
            objects.pods.append(
                _pod(f"run-{i:05d}-{cls}", cls, requests, labels, started, name, started)
            )
        if i % 20 == 0:
            objects.pod_groups.append(
                PodGroup(
                    "default",
                    f"running-gang-{i // 20:04d}",
                    shape.gang_size,
                    creation_timestamp=NOW,
                )
            )
        if i % shape.pdb_nodes == 0:
            objects.pdbs.append(_pdb(shape, i // shape.pdb_nodes))
    pending = 2 * nodes
    grouped = pending // 10 // 4 * 4
    for j in range(pending):
        cls = rng.choice(["low", "mid", "high"])
        cpu, mem, gpu = rng.choice(SHAPES)
        labels = {}
        if shape.shards:
            shards = max(nodes // shape.pdb_nodes, 1)
            labels = {"app": "trainer", "shard": f"{rng.randrange(shards):03d}"}
        if j < grouped:
            group = f"gang-{j // 4:05d}"
            labels[GROUP_LABEL] = group
            if j % 4 == 0:
                objects.pod_groups.append(PodGroup("default", group, 4, creation_timestamp=NOW))
            cls = ["low", "mid", "high"][(j // 4) % 3]
        requests = {"cpu": cpu, "memory": mem * GI, "pods": 1}
        if gpu:
            requests[GPU] = gpu
        created = NOW - timedelta(seconds=rng.randrange(0, 600))
        objects.pods.append(_pod(f"pend-{j:05d}", cls, requests, labels, created))
    return objects


def _running_labels(shape: Shape, cls: str, node: int) -> dict[str, str]:
    if not shape.shards:
        return {"app": f"svc-{node // shape.pdb_nodes:03d}"} if cls == "mid" else {}
    if cls == "tolerant":
        return {}
    return {"app": "trainer", "shard": f"{node // shape.pdb_nodes:03d}"}


def _pdb(shape: Shape, block: int) -> PodDisruptionBudget:
    """The PDB over the pods of the `pdb_nodes` nodes from `block` * `pdb_nodes` on."""
    if not shape.shards:
        selector = LabelSelector({"app": f"svc-{block:03d}"}, ())
        return PodDisruptionBudget("default", f"svc-{block:03d}", selector, 2)
    shard = f"{block:03d}"
    selector = LabelSelector({"app": "trainer"}, (Requirement("shard", "In", (shard,)),))
    return PodDisruptionBudget("default", f"trainer-{shard}", selector, 4)


def _pod(
    name: str,
    cls: str,
    requests: dict[str, int],
    labels: dict[str, str],
    created: datetime,
    node: str = "",
    started: datetime | None = None,
) -> Pod:
    return Pod(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        requests=requests,
        scheduler_name="batchsched",
        node_name=node,
        phase="Running" if node else "Pending",
        priority=PRIORITY[cls],
        priority_class_name=cls,
        labels=labels,
        creation_timestamp=created,
        start_time=started,
        conditions=(PodCondition("PodScheduled", "True", started),) if started else (),
    )


def contended(nodes: int, shape: Shape = CONTENDED) -> Metrics:
    objects = generate(nodes, seed=nodes, shape=shape)
    pending = sum(1 for p in objects.pods if not p.node_name)
    cpu = time.process_time()
    with timed() as watch:
        result = run(objects, default_config(), NOW)
    cpu = time.process_time() - cpu
    return {
        "nodes": nodes,
        "pending_pods": pending,
        "wall_seconds": round(watch.seconds, 2),
        "cpu_seconds": round(cpu, 2),  # the machine is shared: CPU time compares runs better
        "pods_per_second": round(pending / watch.seconds),
        "bindings": len(result.bindings),
        "evictions": len(result.evictions),
        "withdrawn": len(result.withdrawn),  # bound, then preempted in a later pass
        "passes": result.passes,
        "attempts_per_binding": round(result.attempts / max(len(result.bindings), 1), 2),
        "decision_hash": decision_hash(
            [*result.bindings, *result.evictions, *sorted(result.unschedulable.items())]
        ),
    }


@workload("Contended/1000Nodes")
def contended_1000() -> Metrics:
    return contended(1000)


@workload("Contended/2000Nodes")
def contended_2000() -> Metrics:
    return contended(2000)


@workload("Contended/5000Nodes")
def contended_5000() -> Metrics:
    return contended(5000)


@workload("ContendedPDB/1000Nodes")
def contended_pdb_1000() -> Metrics:
    return contended(1000, CONTENDED_PDB)


@workload("ContendedPDB/5000Nodes")
def contended_pdb_5000() -> Metrics:
    return contended(5000, CONTENDED_PDB)
