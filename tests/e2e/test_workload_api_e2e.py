"""Upstream's Workload API against a real kube-apiserver v1.36 (scheduling.k8s.io/v1alpha2,
gates GenericWorkload and GangScheduling), with deploy/'s ServiceAccount and RBAC: a Workload,
its PodGroup and pods naming it through spec.schedulingGroup are placed whole by batchsched,
and the group's PodGroupScheduled condition is written; a gang that cannot fit binds nothing
and is told why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.cluster import Cluster, wait
from testsupport.controlplane import PlaneFactory

pytestmark = pytest.mark.e2e

GATES = (
    "--feature-gates=GenericWorkload=true,GangScheduling=true",
    "--runtime-config=scheduling.k8s.io/v1alpha2=true",
)
API = "/apis/scheduling.k8s.io/v1alpha2"


@pytest.fixture
def gated(control_plane: PlaneFactory) -> Iterator[Cluster]:
    corner = Cluster(control_plane(GATES))
    yield corner
    corner.close()


def _gang(cluster: Cluster, name: str, min_count: int) -> None:
    policy = {"gang": {"minCount": min_count}}
    ns = cluster.namespace
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": policy}]},
    }
    cluster.create(f"{API}/namespaces/{ns}/workloads", workload)
    ref = {"workload": {"workloadName": name, "podGroupTemplateName": "workers"}}
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"podGroupTemplateRef": ref, "schedulingPolicy": policy},
    }
    cluster.create(f"{API}/namespaces/{ns}/podgroups", group)


def _member(cluster: Cluster, name: str, group: str, cpu: str) -> None:
    body = cluster.pod_body(name, cpu)
    body["spec"]["schedulingGroup"] = {"podGroupName": group}
    cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", body)


def _scheduled(cluster: Cluster, group: str) -> dict[str, Any] | None:
    obj = cluster.admin.json("GET", f"{API}/namespaces/{cluster.namespace}/podgroups/{group}")
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c["type"] == "PodGroupScheduled"), None)


def test_a_workload_gang_is_placed_whole_and_its_condition_written(gated: Cluster) -> None:
    suffix = gated.namespace[-6:]
    gated.node(f"w1-{suffix}", cpu="4")
    gated.node(f"w2-{suffix}", cpu="4")
    _gang(gated, "train", 3)
    _gang(gated, "huge", 2)
    for i in range(3):
        _member(gated, f"train-{i}", "train", "2")
    for i in range(2):
        _member(gated, f"huge-{i}", "huge", "5")
    gated.run_scheduler()
    wait(lambda: all(gated.node_of(f"train-{i}") for i in range(3)), what="train bound whole")
    wait(lambda: (_scheduled(gated, "train") or {}).get("status") == "True", what="condition")
    scheduled = _scheduled(gated, "train")
    assert scheduled is not None and scheduled["reason"] == "Scheduled"
    # No node has room for a 5-CPU member of `huge`: none binds, and the group says why.
    wait(lambda: _scheduled(gated, "huge") is not None, what="huge told why")
    refused = _scheduled(gated, "huge")
    assert refused is not None
    assert (refused["status"], refused["reason"]) == ("False", "Unschedulable")
    assert "members can run" in refused["message"]
    assert not gated.node_of("huge-0") and not gated.node_of("huge-1")
    gated.stop_schedulers()  # and checks that deploy/'s RBAC refused nothing (403)
