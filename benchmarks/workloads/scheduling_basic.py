"""SchedulingBasic, as in scheduler_perf: 5000 nodes (4 CPU, 32Gi, 110 pods), 10,000 pods
(100m CPU, 500Mi), through the core with decisions applied in memory."""

from __future__ import annotations

from datetime import UTC, datetime

from batchsched.config import default_config
from batchsched.objects.records import Node, Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, one_pass, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
MI = 2**20


def build(nodes: int, pods: int) -> Scheduler:
    state = ClusterState()
    for i in range(nodes):
        state.upsert_node(
            Node(name=f"node-{i:05d}", allocatable={"cpu": 4000, "memory": 32 * GI, "pods": 110})
        )
    for i in range(pods):
        state.upsert_pod(
            Pod(
                namespace="default",
                name=f"pod-{i:05d}",
                scheduler_name="batchsched",
                requests={"cpu": 100, "memory": 500 * MI, "pods": 1},
            )
        )
    return Scheduler(state, default_config())


def run(nodes: int, pods: int) -> Metrics:
    return one_pass(build(nodes, pods), NOW, pods)


@workload("SchedulingBasic/5000Nodes_10000Pods")
def scheduling_basic() -> Metrics:
    return run(5000, 10_000)
