"""Reclaim/5000Nodes: one queue takes back GPUs another borrowed (docs/queues.md#reclaim).

5000 nodes of 8 GPUs, 64 CPU, 256Gi. Three root queues name `nvidia.com/gpu`: `a` (nominal
8000) has 1000 pending pods of 8 GPUs and nothing running; `b` (nominal 16000,
reclaimMinRuntime 10m) runs one 8-GPU pod on each of nodes 0-3999, borrowing; `c`
(guaranteed and nominal 8000) runs one on each of nodes 4000-4999, all of it guaranteed. A
quarter of b's pods started 5 minutes ago (too young to reclaim), and b's pods have priorities
0-3. Every pod of `a` fits nowhere and reclaims one pod of `b` (c's are guaranteed), then
binds in the next pass. `pods_per_second` counts a's pods bound per second of scheduling
passes, as the preemption workloads do; `preemptors_per_cpu_second` per second of the
process's CPU time in those passes (on a loaded machine the wall time says little).
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

from batchsched.config import default_config
from batchsched.decisions import Bind, Evict
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Node, Pod, PodCondition
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, decision_hash, settle, timed, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
GPU = "nvidia.com/gpu"
PENDING = 1000


def _pod(
    name: str, queue: str, node: str = "", age: timedelta | None = None, priority: int = 0
) -> Pod:
    started = NOW - age if age is not None else None
    return Pod(
        namespace="default",
        name=name,
        scheduler_name="batchsched",
        node_name=node,
        phase="Running" if node else "Pending",
        priority=priority,
        labels={QUEUE_LABEL: queue},
        requests={"cpu": 8000, "memory": 32 * GI, GPU: 8, "pods": 1},
        conditions=(PodCondition("PodScheduled", "True", started),) if started else (),
        start_time=started,
    )


def build(nodes: int) -> Scheduler:
    rng = random.Random(27)
    state = ClusterState()
    queues = (
        Queue("a", QUEUE_API, resources={GPU: QueueQuota(0, 8000)}),
        Queue("b", QUEUE_API, resources={GPU: QueueQuota(0, 16000)}, reclaim_min_runtime=600),
        Queue("c", QUEUE_API, resources={GPU: QueueQuota(8000, 8000)}),
    )
    for queue in queues:
        state.upsert_queue(queue)
    borrowed = nodes * 4 // 5
    for i in range(nodes):
        name = f"node-{i:05d}"
        state.upsert_node(
            Node(name=name, allocatable={"cpu": 64000, "memory": 256 * GI, GPU: 8, "pods": 110})
        )
        if i < borrowed:
            age = timedelta(minutes=5 if rng.random() < 0.25 else rng.choice((30, 60, 120)))
            state.upsert_pod(_pod(f"b-{i:05d}", "b", name, age, rng.randrange(4)))
        else:
            state.upsert_pod(_pod(f"c-{i:05d}", "c", name, timedelta(hours=2)))
    for i in range(PENDING):
        state.upsert_pod(_pod(f"a-{i:05d}", "a"))
    return Scheduler(state, default_config())


def run(nodes: int) -> Metrics:
    scheduler = build(nodes)
    cpu = time.process_time()
    with timed() as watch:
        passes = settle(scheduler, NOW)
    cpu = time.process_time() - cpu
    decisions = [d for one_pass in passes for d in one_pass]
    victims = [d for d in decisions if isinstance(d, Evict)]
    bound = sum(isinstance(d, Bind) for d in decisions)
    if any(d.reclaim != ("a", "b") for d in victims):
        raise RuntimeError("a victim that is not a reclaim of b's pods for a")
    return {
        "preemptors": PENDING,
        "reclaims": len(victims),
        "bound": bound,
        "passes": len(passes),
        "seconds": round(watch.seconds, 3),
        "pods_per_second": round(bound / watch.seconds),
        "cpu_seconds": round(cpu, 3),
        "preemptors_per_cpu_second": round(PENDING / cpu),
        "decision_hash": decision_hash(decisions),
    }


@workload("Reclaim/5000Nodes")
def reclaim_5000() -> Metrics:
    return run(5000)
