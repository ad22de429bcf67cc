"""Topology-aware gangs (docs/topology.md): 5000 GPU nodes (8 GPUs each) in 100 racks of 50
nodes (`example.com/rack`), 10 racks to a block (`example.com/block`); 200 gangs of 8 to 32
pods of 8 GPUs (one node each), the even ones with `batchsched.io/topology-required:
example.com/rack`, the odd ones preferring `example.com/rack,example.com/block`. Sizes cycle
through 8..32 (8 + 7g mod 25), 4000 nodes asked of 5000: some required gangs find no rack
left with room and wait (that search is part of the work measured).

`ms_per_gang` is the mean wall time per gang scheduling attempt (one pass attempts every gang
once); `gangs_bound` and `domains_spanned` (racks per bound gang, summed) show the outcome.
"""

from __future__ import annotations

from batchsched.config import default_config
from batchsched.decisions import Bind
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.records import Node, Pod, PodGroup, TopologyRequest
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, decision_hash, timed, workload
from benchmarks.workloads.gang import NOW, with_controllers

GPU = "nvidia.com/gpu"
RACK, BLOCK = "example.com/rack", "example.com/block"
GI = 2**30


def build(racks: int, per_rack: int, gangs: int) -> Scheduler:
    state = ClusterState()
    for r in range(racks):
        labels = {RACK: f"rack-{r:03d}", BLOCK: f"block-{r // 10:02d}"}
        for n in range(per_rack):
            state.upsert_node(
                Node(
                    name=f"r{r:03d}-n{n:02d}",
                    labels=dict(labels),
                    allocatable={"cpu": 64000, "memory": 512 * GI, "pods": 110, GPU: 8},
                )
            )
    request = {"cpu": 8000, "memory": 64 * GI, "pods": 1, GPU: 8}
    for g in range(gangs):
        name, size = f"gang-{g:04d}", 8 + (7 * g) % 25
        if g % 2 == 0:
            topology = TopologyRequest(required=RACK)
        else:
            topology = TopologyRequest(preferred=(RACK, BLOCK))
        state.upsert_pod_group(
            PodGroup(namespace="default", name=name, min_member=size, topology=topology)
        )
        for m in range(size):
            state.upsert_pod(
                Pod(
                    namespace="default",
                    name=f"{name}-{m:02d}",
                    scheduler_name="batchsched",
                    requests=request,
                    labels={GROUP_LABEL: name},
                )
            )
    return with_controllers(Scheduler(state, default_config()))


@workload("TopologyGang/5000Nodes_100Racks")
def topology_gangs() -> Metrics:
    gangs = 200
    scheduler = build(100, 50, gangs)
    with timed() as watch:
        decisions = scheduler.schedule_pass(NOW)
    binds = [d for d in decisions if isinstance(d, Bind)]
    racks: dict[str, set[str]] = {}
    for bind in binds:
        group = bind.pod.rsplit("-", 1)[0]
        racks.setdefault(group, set()).add(bind.node.split("-")[0])
    return {
        "gangs": gangs,
        "gangs_bound": len(racks),
        "pods": len(binds),
        "domains_spanned": sum(len(found) for found in racks.values()),
        "seconds": round(watch.seconds, 3),
        "ms_per_gang": round(watch.seconds * 1000 / gangs, 3),
        "decision_hash": decision_hash(binds),
    }
