"""Queues: 5000 nodes (32 CPU, 128Gi, 110 pods) shared by 1000 queues in three levels (10
organisations, 5 departments each, 19 teams each: 950 leaves), 200 of the leaves with 100
pending pods each (1 CPU, 2Gi): 20,000 pods, through the core with decisions applied in
memory. Every queue names cpu; the quotas bind: each department with work may use 800 CPUs
of the 2,000 its teams ask, and every other team 70 of its 100, so 4,000 pods stay pending
with a message naming the level that holds them back.

`pods_per_second` counts every pod the pass decided (bound or held back) per second of wall
time, `pods_per_cpu_second` per second of the process's CPU time; `bound` how many it bound.
The decisions depend on the fair shares and the queue order (docs/queues.md).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from batchsched.config import default_config
from batchsched.decisions import Bind, Unschedulable
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Node, Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, decision_hash, timed, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
CPU = "cpu"


def _queue(name: str, parent: str, nominal: int, limit: int | None, weight: float) -> Queue:
    quota = QueueQuota(guaranteed=nominal // 2, nominal=nominal, limit=limit)
    return Queue(name, QUEUE_API, parent, {CPU: quota}, weight=weight)


def build(nodes: int, orgs: int, departments: int, teams: int, busy: int, pods: int) -> Scheduler:
    state = ClusterState()
    for i in range(nodes):
        allocatable = {CPU: 32_000, "memory": 128 * GI, "pods": 110}
        state.upsert_node(Node(name=f"node-{i:05d}", allocatable=allocatable))
    for o in range(orgs):
        org = f"org-{o}"
        state.upsert_queue(_queue(org, "", 8_000_000, None, 1 + o % 3))
        for d in range(departments):
            department = f"{org}-dept-{d}"
            # Departments with work (the first two of each org) may use 800 CPUs.
            limit = 800_000 if d < 2 else None
            state.upsert_queue(_queue(department, org, 1_000_000, limit, 1 + d % 2))
            for t in range(teams):
                team = f"{department}-team-{t:02d}"
                state.upsert_queue(_queue(team, department, 40_000, 70_000 if t % 2 else None, 1))
    # The leaves with work: the first 10 teams of the first 2 departments of each org.
    with_work = [
        f"org-{o}-dept-{d}-team-{t:02d}" for o in range(orgs) for d in range(2) for t in range(10)
    ][:busy]
    per_leaf = pods // len(with_work)
    for i in range(per_leaf):
        for leaf in with_work:
            state.upsert_pod(
                Pod(
                    namespace="default",
                    name=f"{leaf}-{i:03d}",
                    scheduler_name="batchsched",
                    labels={QUEUE_LABEL: leaf},
                    requests={CPU: 1000, "memory": 2 * GI, "pods": 1},
                )
            )
    return Scheduler(state, default_config())


@workload("Queues/5000Nodes_1000Queues_20000Pods")
def queues() -> Metrics:
    scheduler = build(5000, orgs=10, departments=5, teams=19, busy=200, pods=20_000)
    cpu = time.process_time()
    with timed() as watch:
        decisions = scheduler.schedule_pass(NOW)
    cpu = time.process_time() - cpu
    decided = [d for d in decisions if isinstance(d, Bind | Unschedulable)]
    return {
        "queues": len(scheduler.state.queues),
        "pods": len(decided),
        "bound": sum(isinstance(d, Bind) for d in decisions),
        "seconds": round(watch.seconds, 3),
        "pods_per_second": round(len(decided) / watch.seconds),
        # On a loaded machine the wall time says little: the CPU time of the pass too.
        "cpu_seconds": round(cpu, 3),
        "pods_per_cpu_second": round(len(decided) / cpu),
        "decision_hash": decision_hash(decisions),
    }
