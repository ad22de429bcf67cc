"""PreemptionBasic and PreemptionToleration, as in scheduler_perf's PreemptionBasic.

Nodes of 4 CPU / 32Gi / 110 pods, each filled by 4 low-priority pods (900m, 500Mi); then one
high-priority pod (3000m, 500Mi) per node, each of which must preempt 3 low pods. Decisions
are applied as the one-shot world applies them: victims leave at once and the preemptors bind
in the next pass. `pods_per_second` counts preemptors bound per second of scheduling passes.
In the toleration variant 30% of the low pods belong to a class that tolerates `high` for 10
minutes, and half of those were scheduled less than 10 minutes ago.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from batchsched.config import default_config
from batchsched.decisions import Bind, Evict
from batchsched.objects.records import Node, Pod, PodCondition, PriorityClass
from batchsched.preemption.toleration_policy import PREFIXES
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, decision_hash, settle, timed, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
MI = 2**20
LOW_PER_NODE = 4


def _classes(state: ClusterState) -> None:
    state.upsert_priority_class(PriorityClass("high", 9000))
    state.upsert_priority_class(PriorityClass("low", 8000))
    prefix = PREFIXES[0]
    state.upsert_priority_class(
        PriorityClass(
            "low-10min",
            8000,
            annotations={
                prefix + "minimum-preemptable-priority": "10000",
                prefix + "toleration-seconds": "600",
            },
        )
    )


def build(nodes: int, tolerating_share: float) -> Scheduler:
    rng = random.Random(42)
    state = ClusterState()
    _classes(state)
    for i in range(nodes):
        name = f"node-{i:05d}"
        state.upsert_node(
            Node(name=name, allocatable={"cpu": 4000, "memory": 32 * GI, "pods": 110})
        )
        for j in range(LOW_PER_NODE):
            tolerating = rng.random() < tolerating_share
            age = timedelta(minutes=rng.choice((5, 30)) if tolerating else 30)
            state.upsert_pod(
                Pod(
                    namespace="default",
                    name=f"low-{i:05d}-{j}",
                    scheduler_name="batchsched",
                    node_name=name,
                    phase="Running",
                    priority_class_name="low-10min" if tolerating else "low",
                    requests={"cpu": 900, "memory": 500 * MI, "pods": 1},
                    conditions=(PodCondition("PodScheduled", "True", NOW - age),),
                    start_time=NOW - age,
                )
            )
    for i in range(nodes):
        state.upsert_pod(
            Pod(
                namespace="default",
                name=f"high-{i:05d}",
                scheduler_name="batchsched",
                priority_class_name="high",
                requests={"cpu": 3000, "memory": 500 * MI, "pods": 1},
            )
        )
    return Scheduler(state, default_config())


def run(nodes: int, tolerating_share: float = 0.0) -> Metrics:
    scheduler = build(nodes, tolerating_share)
    with timed() as watch:
        passes = settle(scheduler, NOW)
    decisions = [d for one_pass in passes for d in one_pass]
    victims = sum(isinstance(d, Evict) for d in decisions)
    bound = sum(isinstance(d, Bind) for d in decisions)
    preemptions = sum(len({d.preemptor for d in p if isinstance(d, Evict)}) for p in passes)
    if bound < preemptions:
        raise RuntimeError(f"{preemptions} preemptions but only {bound} bindings")
    return {
        "preemptors": nodes,
        "preemptions": preemptions,
        "victims": victims,
        "bound": bound,
        "passes": len(passes),
        "seconds": round(watch.seconds, 3),
        "pods_per_second": round(bound / watch.seconds),
        "decision_hash": decision_hash(decisions),
    }


@workload("PreemptionBasic/1000Nodes")
def preemption_basic_1000() -> Metrics:
    return run(1000)


@workload("PreemptionBasic/5000Nodes")
def preemption_basic_5000() -> Metrics:
    return run(5000)


@workload("PreemptionToleration/5000Nodes")
def preemption_toleration_5000() -> Metrics:
    return run(5000, tolerating_share=0.3)
