"""SchedulingWithResourceClaimTemplate, as in scheduler_perf: 500 nodes with a ResourceSlice of
10 devices each, a DeviceClass selecting the driver in CEL, 2,500 pods placed first (not
measured), then 2,500 measured pods; every pod has a claim from a template asking for one
device. Through the core with allocations held in memory, as `batchsched schedule` does."""

from __future__ import annotations

from datetime import UTC, datetime

from batchsched.config import default_config
from batchsched.decisions import Bind
from batchsched.objects.dra import read_resource_claim_template, read_resource_slice
from batchsched.objects.records import DeviceClass, Node, Pod, PodClaim
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.harness import Metrics, one_pass, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
DRIVER = "test-driver.cdi.k8s.io"


def _pods(state: ClusterState, first: int, count: int) -> None:
    for i in range(first, first + count):
        state.upsert_pod(
            Pod(
                namespace="default",
                name=f"pod-{i:05d}",
                scheduler_name="batchsched",
                requests={"cpu": 100, "pods": 1},
                resource_claims=(PodClaim("resource", template_name="test-claim-template"),),
            )
        )


def run(nodes: int, init: int, measured: int) -> Metrics:
    state = ClusterState()
    state.upsert_device_class(
        DeviceClass("test-class", selectors=(f"device.driver == '{DRIVER}'",))
    )
    state.devices.upsert_template(
        read_resource_claim_template(
            {
                "metadata": {"name": "test-claim-template", "namespace": "default"},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {"name": "req-0", "exactly": {"deviceClassName": "test-class"}}
                            ]
                        }
                    }
                },
            }
        )
    )
    for n in range(nodes):
        name = f"node-{n:04d}"
        state.upsert_node(Node(name=name, allocatable={"cpu": 32000, "pods": 110}))
        state.devices.upsert_slice(
            read_resource_slice(
                {
                    "metadata": {"name": f"{name}-slice"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": name,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"instance-{d}"} for d in range(10)],
                    },
                }
            )
        )
    scheduler = Scheduler(state, default_config())
    _pods(state, 0, init)
    placed = sum(isinstance(d, Bind) for d in scheduler.schedule_pass(NOW))
    if placed != init:
        raise RuntimeError(f"expected {init} initial bindings, got {placed}")
    _pods(state, init, measured)
    return one_pass(scheduler, NOW, measured)


@workload("SchedulingWithResourceClaimTemplate/5000pods_500nodes")
def scheduling_with_claim_template() -> Metrics:
    return run(500, 2500, 2500)
