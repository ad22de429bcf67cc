"""Inter-pod workloads after scheduler_perf's: pod anti-affinity, pod affinity, topology
spreading (required and preferred).

5000 nodes (4 CPU, 32Gi, 110 pods) labelled with their hostname and one of three zones (one
zone for the affinity workload); init pods (100m, 500Mi, no constraints, namespace sched-0)
are scheduled first, unmeasured; then the measured pods, built like upstream's templates
(`pod-with-pod-anti-affinity.yaml`, `pod-with-pod-affinity.yaml`,
`pod-with-topology-spreading.yaml`, `pod-with-preferred-topology-spreading.yaml`), are
scheduled in one timed pass with decisions applied in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from batchsched.config import default_config
from batchsched.objects.records import (
    AffinityTerm,
    Node,
    Pod,
    PodAffinity,
    Selector,
    SpreadConstraint,
)
from batchsched.plugins.podtopologyspread.domains import HOSTNAME, ZONE
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, one_pass, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
MI = 2**20
REQUESTS = {"cpu": 100, "memory": 500 * MI, "pods": 1}


def _cluster(nodes: int, zones: int) -> ClusterState:
    state = ClusterState()
    for i in range(nodes):
        name = f"node-{i:05d}"
        labels = {HOSTNAME: name, ZONE: f"moon-{i % zones + 1}"}
        state.upsert_node(Node(name, {"cpu": 4000, "memory": 32 * GI, "pods": 110}, labels=labels))
    return state


def measure(
    nodes: int, zones: int, init: int, pods: int, template: Callable[[int], Pod]
) -> Metrics:
    state = _cluster(nodes, zones)
    scheduler = Scheduler(state, default_config())
    for i in range(init):
        state.upsert_pod(Pod("sched-0", f"init-{i:05d}", requests=dict(REQUESTS)))
    scheduler.schedule_pass(NOW)
    for i in range(pods):
        state.upsert_pod(template(i))
    return one_pass(scheduler, NOW, pods)


def _spreading(hard: bool) -> Callable[[int], Pod]:
    blue = Selector((("color", "blue"),))
    constraints = tuple(
        SpreadConstraint(max_skew=skew, topology_key=key, hard=hard, selector=blue)
        for key, skew in ((HOSTNAME, 5), (ZONE, 5))
    )

    def template(i: int) -> Pod:
        return Pod(
            "sched-1",
            f"spreading-pod-{i:05d}",
            requests=dict(REQUESTS),
            labels={"color": "blue"},
            spread_constraints=constraints,
        )

    return template


@workload("TopologySpreading/5000Nodes_5000Pods")
def topology_spreading() -> Metrics:
    return measure(5000, 3, 1000, 5000, _spreading(hard=True))


@workload("PreferredTopologySpreading/5000Nodes_5000Pods")
def preferred_topology_spreading() -> Metrics:
    return measure(5000, 3, 1000, 5000, _spreading(hard=False))


def _with_affinity(
    name: str, labels: dict[str, str], affinity: PodAffinity
) -> Callable[[int], Pod]:
    def template(i: int) -> Pod:
        return Pod(
            "sched-1",
            f"{name}-{i:05d}",
            requests=dict(REQUESTS),
            labels=dict(labels),
            pod_affinity=affinity,
        )

    return template


NAMESPACES = ("sched-1", "sched-0")


@workload("SchedulingPodAntiAffinity/5000Nodes_2000Pods")
def pod_anti_affinity() -> Metrics:
    term = AffinityTerm(Selector((("color", "green"),)), HOSTNAME, NAMESPACES)
    template = _with_affinity(
        "anti-affinity-pod",
        {"color": "green", "name": "test"},
        PodAffinity(required_anti=(term,)),
    )
    return measure(5000, 3, 1000, 2000, template)


@workload("SchedulingPodAffinity/5000Nodes_5000Pods")
def pod_affinity() -> Metrics:
    term = AffinityTerm(Selector((("foo", ""),)), ZONE, NAMESPACES)
    template = _with_affinity("affinity-pod", {"foo": ""}, PodAffinity(required=(term,)))
    return measure(5000, 1, 5000, 5000, template)
