"""Gang scheduling: 5000 nodes (4 CPU, 32Gi, 110 pods) and gangs of 3 pods (100m CPU, 500Mi),
one PodGroup (minMember 3) each, through the core with decisions applied in memory; the
`_WorkloadAPI` variant declares them as upstream's PodGroups (gang.minCount 3).

`ms_per_gang` is the mean wall time per gang scheduling attempt (one pass attempts every gang
once, and every gang fits).
"""

from __future__ import annotations

from datetime import UTC, datetime

from batchsched.config import default_config
from batchsched.controllers import Controllers
from batchsched.decisions import Bind, Evict
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.records import CRD_API_VERSION, Node, Pod, PodGroup, PriorityClass
from batchsched.objects.workload_api import V1BETA1
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, decision_hash, timed, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
MI = 2**20


def add_nodes(state: ClusterState, count: int) -> None:
    for i in range(count):
        state.upsert_node(
            Node(name=f"node-{i:05d}", allocatable={"cpu": 4000, "memory": 32 * GI, "pods": 110})
        )


def add_gang(
    state: ClusterState,
    name: str,
    size: int,
    requests: dict[str, int],
    priority_class: str = "",
    nodes: list[str] | None = None,
    upstream: bool = False,
) -> None:
    """A PodGroup of minMember `size` and its members, running on `nodes` if given; with
    `upstream`, a scheduling.k8s.io/v1beta1 PodGroup (gang.minCount `size`) that members name
    through spec.schedulingGroup, else the CRD and its label."""
    api_version = V1BETA1 if upstream else CRD_API_VERSION
    state.upsert_pod_group(
        PodGroup(namespace="default", name=name, min_member=size, api_version=api_version)
    )
    for m in range(size):
        state.upsert_pod(
            Pod(
                namespace="default",
                name=f"{name}-{m}",
                scheduler_name="batchsched",
                requests=requests,
                priority_class_name=priority_class,
                labels={} if upstream else {GROUP_LABEL: name},
                scheduling_group=name if upstream else "",
                node_name=nodes[m] if nodes else "",
                phase="Running" if nodes else "Pending",
            )
        )


def with_controllers(scheduler: Scheduler) -> Scheduler:
    """The scheduler with the controllers every world runs (the PodGroup status after each
    pass is part of the work measured)."""
    Controllers(scheduler)
    return scheduler


def build(nodes: int, gangs: int, size: int, upstream: bool = False) -> Scheduler:
    state = ClusterState()
    add_nodes(state, nodes)
    request = {"cpu": 100, "memory": 500 * MI, "pods": 1}
    for g in range(gangs):
        add_gang(state, f"gang-{g:05d}", size, request, upstream=upstream)
    return with_controllers(Scheduler(state, default_config()))


def timed_pass(
    scheduler: Scheduler, kind: type[Bind | Evict], count: int
) -> tuple[list[Bind | Evict], float]:
    """One timed scheduling pass, which must decide `count` decisions of `kind`: those."""
    with timed() as watch:
        decisions = scheduler.schedule_pass(NOW)
    found = [d for d in decisions if isinstance(d, kind)]
    if len(found) != count:
        raise RuntimeError(f"expected {count} {kind.__name__} decisions, got {len(found)}")
    return found, watch.seconds


def run(nodes: int, gangs: int, size: int = 3, upstream: bool = False) -> Metrics:
    scheduler = build(nodes, gangs, size, upstream)
    bound, seconds = timed_pass(scheduler, Bind, gangs * size)
    return {
        "gangs": gangs,
        "pods": len(bound),
        "seconds": round(seconds, 3),
        "ms_per_gang": round(seconds * 1000 / gangs, 3),
        "decision_hash": decision_hash(bound),
    }


@workload("Gang/5000Nodes_1000Gangs")
def gang_1000() -> Metrics:
    return run(5000, 1000)


@workload("Gang/5000Nodes_3000Gangs")
def gang_3000() -> Metrics:
    return run(5000, 3000)


@workload("Gang/5000Nodes_3000Gangs_WorkloadAPI")
def gang_3000_upstream() -> Metrics:
    """The same gangs as upstream's Workload API PodGroups (scheduling.k8s.io/v1beta1)."""
    return run(5000, 3000, upstream=True)


def build_preemption(nodes: int, low_gangs: int, high_gangs: int, size: int) -> Scheduler:
    """Low-priority gangs already running, each member on a different node; the high-priority
    gangs pending, each needing one low gang's room."""
    state = ClusterState()
    state.upsert_priority_class(PriorityClass(name="low", value=10))
    state.upsert_priority_class(PriorityClass(name="high", value=1000))
    add_nodes(state, nodes)
    request = {"cpu": 4000 * nodes // (low_gangs * size), "memory": 500 * MI, "pods": 1}
    for g in range(low_gangs):
        where = [f"node-{(g * size + m) % nodes:05d}" for m in range(size)]
        add_gang(state, f"low-{g:05d}", size, request, "low", where)
    for g in range(high_gangs):
        add_gang(state, f"high-{g:05d}", size, request, "high")
    return with_controllers(Scheduler(state, default_config()))


@workload("GangPreemption/1000Nodes")
def gang_preemption() -> Metrics:
    """1000 gangs of 10 low-priority pods fill 1000 nodes; 100 high-priority gangs of 10
    preempt (one pass: victims chosen, members nominated), then bind (a second pass, after
    the victims are gone). `ms_per_gang` is the mean over both attempts of every gang."""
    gangs, size = 100, 10
    scheduler = build_preemption(1000, 1000, gangs, size)
    victims, preempting = timed_pass(scheduler, Evict, gangs * size)
    for victim in victims:
        scheduler.state.remove_pod(victim.pod)
    scheduler.queue.settle()
    bindings, binding = timed_pass(scheduler, Bind, gangs * size)
    return {
        "gangs": gangs,
        "victims": len(victims),
        "preemption_ms_per_gang": round(preempting * 1000 / gangs, 3),
        "bind_ms_per_gang": round(binding * 1000 / gangs, 3),
        "ms_per_gang": round((preempting + binding) * 1000 / (2 * gangs), 3),
        "decision_hash": decision_hash([*victims, *bindings]),
    }
