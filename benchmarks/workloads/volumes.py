"""Pods with bound PersistentVolumeClaims, as scheduler_perf's SchedulingCSIPVs and its
local-PV variant: every pod has its own claim, bound to its own volume."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from batchsched.config import default_config
from batchsched.objects.records import Node, NodeSelectorTerm, Pod, Requirement
from batchsched.objects.volumes import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    PodVolume,
)
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, one_pass, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
MI = 2**20
DRIVER = "ebs.csi.aws.com"
HOSTNAME = "kubernetes.io/hostname"


def build(nodes: int, pods: int, local: bool) -> Scheduler:
    state = ClusterState()
    for i in range(nodes):
        name = f"node-{i:05d}"
        state.upsert_node(
            Node(
                name=name,
                allocatable={"cpu": 4000, "memory": 32 * GI, "pods": 110},
                labels={HOSTNAME: name},
            )
        )
        state.upsert_volume_object(CSINode(name, limits={DRIVER: 39}))
    for i in range(pods):
        volume: dict[str, Any] = {"name": f"pv-{i:05d}"}
        if local:
            host = f"node-{i % nodes:05d}"
            term = NodeSelectorTerm((Requirement(HOSTNAME, "In", (host,)),), ())
            volume["node_affinity"] = (term,)
        else:
            volume.update(csi_driver=DRIVER, csi_handle=f"vol-{i:05d}")
        state.upsert_volume_object(PersistentVolume(**volume))
        state.upsert_volume_object(
            PersistentVolumeClaim(
                "default", f"pvc-{i:05d}", volume_name=f"pv-{i:05d}", bind_completed=True
            )
        )
        state.upsert_pod(
            Pod(
                namespace="default",
                name=f"pod-{i:05d}",
                scheduler_name="batchsched",
                requests={"cpu": 100, "memory": 500 * MI, "pods": 1},
                volumes=(PodVolume("data", f"pvc-{i:05d}", ephemeral=False),),
            )
        )
    return Scheduler(state, default_config())


@workload("SchedulingCSIPVs/5000Nodes_5000Pods")
def csi_pvs() -> Metrics:
    return one_pass(build(5000, 5000, local=False), NOW, 5000)


@workload("SchedulingLocalPVs/5000Nodes_2000Pods")
def local_pvs() -> Metrics:
    return one_pass(build(5000, 2000, local=True), NOW, 2000)
