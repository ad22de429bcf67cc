"""SchedulingDaemonset, as in scheduler_perf: 15,000 nodes (4 CPU, 32Gi, 110 pods) and 30,000
pods pinned to them as DaemonSet pods are (two DaemonSets, required node affinity on
`metadata.name`), through the core with decisions applied in memory.

The `_10PctFull` variant fills every tenth node with four 1-CPU batch pods first, so each
DaemonSet pod there has to reserve its node and preempt (start delay 0) before it binds."""

from __future__ import annotations

from datetime import UTC, datetime

from batchsched.config import default_config
from batchsched.decisions import Bind, Evict
from batchsched.objects.records import NodeSelectorTerm, OwnerReference, Pod, Requirement
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, decision_hash, settle, timed, workload
from benchmarks.workloads.scheduling_basic import GI, MI, NOW
from benchmarks.workloads.scheduling_basic import build as build_nodes

DAEMONSETS = ("fluentd", "node-exporter")


def daemonset_pod(daemonset: str, node: str, created: datetime) -> Pod:
    return Pod(
        namespace="kube-system",
        name=f"{daemonset}-{node}",
        scheduler_name="batchsched",
        priority=1000,
        requests={"cpu": 100, "memory": 500 * MI, "pods": 1},
        owner_references=(OwnerReference("DaemonSet", daemonset, f"{daemonset}-uid", True),),
        required_terms=(NodeSelectorTerm((), (Requirement("metadata.name", "In", (node,)),)),),
        creation_timestamp=created,
    )


def build(nodes: int, full_every: int) -> Scheduler:
    scheduler = build_nodes(nodes, 0)
    state: ClusterState = scheduler.state
    started = datetime(2026, 11, 21, tzinfo=UTC)
    full = range(0, nodes, full_every) if full_every else range(0)
    for i in full:
        for j in range(4):
            state.upsert_pod(
                Pod(
                    namespace="batch",
                    name=f"job-{i:05d}-{j}",
                    scheduler_name="batchsched",
                    node_name=f"node-{i:05d}",
                    phase="Running",
                    priority=0,
                    requests={"cpu": 1000, "memory": 8 * GI, "pods": 1},
                    start_time=started,
                )
            )
    for daemonset in DAEMONSETS:
        for i in range(nodes):
            state.upsert_pod(daemonset_pod(daemonset, f"node-{i:05d}", NOW))
    config = default_config()
    config.profiles[0].plugin_args["DaemonSetPreemption"] = {"preemptionStartDelaySeconds": 0}
    return Scheduler(state, config)


def run(nodes: int, full_every: int) -> Metrics:
    scheduler = build(nodes, full_every)
    pods = nodes * len(DAEMONSETS)
    with timed() as watch:
        passes = settle(scheduler, NOW)
    decisions = [d for one_pass in passes for d in one_pass]
    bound = sum(isinstance(d, Bind) for d in decisions)
    evicted = sum(isinstance(d, Evict) for d in decisions)
    if bound != pods:
        raise RuntimeError(f"expected {pods} bindings, got {bound}")
    expected_evictions = len(range(0, nodes, full_every)) if full_every else 0
    if evicted != expected_evictions:
        raise RuntimeError(f"expected {expected_evictions} evictions, got {evicted}")
    return {
        "pods": pods,
        "evictions": evicted,
        "passes": len(passes),
        "seconds": round(watch.seconds, 3),
        "pods_per_second": round(bound / watch.seconds),
        "decision_hash": decision_hash(decisions),
    }


@workload("SchedulingDaemonset/15000Nodes")
def scheduling_daemonset() -> Metrics:
    return run(15_000, 0)


@workload("SchedulingDaemonset/15000Nodes_10PctFull")
def scheduling_daemonset_full() -> Metrics:
    return run(15_000, 10)
