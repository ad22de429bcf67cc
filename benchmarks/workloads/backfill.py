"""Backfill: 5000 GPU nodes (8 GPUs, 64 CPU, 512Gi, 110 pods), each half taken by a running
4-GPU pod with a mixed stated runtime (30 min to 4 h, or none), started in the last 25 min.
Four gangs of four whole-node members (created an hour ago) fit nowhere now and reserve the
nodes where they start earliest; 10,000 one-GPU pods with mixed runtimes (seeded) then fill
the cluster, those ending too late kept off the reserved nodes (docs/backfill.md). One pass,
decisions applied in memory; `pods_per_second` counts the 10,000 bindings over the pass,
whose time includes planning the four reservations."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

from batchsched.config import default_config
from batchsched.decisions import Bind
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.records import Node, Pod, PodGroup
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, decision_hash, timed, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
GPU = "nvidia.com/gpu"
RUNTIMES = (1800, 3600, 7200, 14400, None)


def build(nodes: int, pods: int, gangs: int, seed: int = 1) -> Scheduler:
    rng = random.Random(seed)
    state = ClusterState()
    hour_ago = NOW - timedelta(hours=1)
    for i in range(nodes):
        name = f"gpu-{i:05d}"
        state.upsert_node(
            Node(name=name, allocatable={"cpu": 64000, "memory": 512 * GI, "pods": 110, GPU: 8})
        )
        state.upsert_pod(
            Pod(
                namespace="default",
                name=f"run-{i:05d}",
                scheduler_name="batchsched",
                requests={"cpu": 8000, "memory": 64 * GI, "pods": 1, GPU: 4},
                node_name=name,
                phase="Running",
                start_time=NOW - timedelta(seconds=rng.randrange(1500)),
                max_runtime_seconds=rng.choice(RUNTIMES),
            )
        )
    for g in range(gangs):
        group = f"train-{g}"
        state.upsert_pod_group(
            PodGroup(namespace="default", name=group, min_member=4, creation_timestamp=hour_ago)
        )
        for m in range(4):
            state.upsert_pod(
                Pod(
                    namespace="default",
                    name=f"{group}-{m}",
                    scheduler_name="batchsched",
                    requests={"cpu": 32000, "memory": 256 * GI, "pods": 1, GPU: 8},
                    labels={GROUP_LABEL: group},
                    creation_timestamp=hour_ago,
                    max_runtime_seconds=14400,
                )
            )
    for p in range(pods):
        state.upsert_pod(
            Pod(
                namespace="default",
                name=f"job-{p:05d}",
                scheduler_name="batchsched",
                requests={"cpu": 1000, "memory": 8 * GI, "pods": 1, GPU: 1},
                creation_timestamp=NOW - timedelta(seconds=60),
                max_runtime_seconds=rng.choice(RUNTIMES),
            )
        )
    return Scheduler(state, default_config())


@workload("Backfill/5000Nodes_10000Pods")
def backfill() -> Metrics:
    scheduler = build(5000, 10_000, 4)
    cpu = time.process_time()
    with timed() as watch:
        decisions = scheduler.schedule_pass(NOW)
    cpu = time.process_time() - cpu
    bound = sum(isinstance(d, Bind) for d in decisions)
    if bound != 10_000:
        raise RuntimeError(f"expected 10000 bindings, got {bound}")
    reserved = scheduler.state.start_reservations.by_holder
    if len(reserved) != 4:
        raise RuntimeError(f"expected 4 reservations, got {len(reserved)}")
    return {
        "pods": bound,
        "reservations": len(reserved),
        "seconds": round(watch.seconds, 3),
        "pods_per_second": round(bound / watch.seconds),
        "cpu_seconds": round(cpu, 3),
        "pods_per_cpu_second": round(bound / cpu),
        "decision_hash": decision_hash(decisions),
    }
