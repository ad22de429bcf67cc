"""The live loop against a real control plane, run with deploy/'s ServiceAccount (every test
checks that no request was refused with 403), beside a fake kubelet: binding and
unschedulable reasons, preemption with toleration, gangs, DaemonSet pods made by the real
DaemonSet controller, and a PriorityClass tolerating preemption for 10,000 years."""

from __future__ import annotations

import time

import orjson
import pytest

from tests.e2e.cluster import Cluster, require, shipped_config, wait
from testsupport.controlplane import REPO, ControlPlane, controller_manager

pytestmark = pytest.mark.e2e

TOLERATION = "preemption-toleration.scheduling.x-k8s.io/"


def _priority_class(
    cluster: Cluster, name: str, value: int, minimum: int | None = None, seconds: int | None = None
) -> None:
    annotations = {}
    if minimum is not None:
        annotations[f"{TOLERATION}minimum-preemptable-priority"] = str(minimum)
    if seconds is not None:
        annotations[f"{TOLERATION}toleration-seconds"] = str(seconds)
    body = {"metadata": {"name": name, "annotations": annotations}, "value": value}
    cluster.create("/apis/scheduling.k8s.io/v1/priorityclasses", body)


def test_pods_are_bound_and_the_unschedulable_one_is_told_why(cluster: Cluster) -> None:
    suffix = cluster.namespace[-6:]
    cluster.node(f"n1-{suffix}", cpu="2")
    scheduler = cluster.run_scheduler()
    for i in range(2):
        cluster.pod(f"p{i}", cpu="1")
    cluster.pod("too-big", cpu="8")
    wait(lambda: all(cluster.node_of(f"p{i}") for i in (0, 1)), what="p0, p1 bound")
    wait(lambda: cluster.condition("too-big", "PodScheduled") is not None, what="told why")
    assert scheduler.ready()
    cluster.stop_schedulers()
    told = cluster.condition("too-big", "PodScheduled")
    assert told is not None and told["status"] == "False" and told["reason"] == "Unschedulable"
    assert "Insufficient cpu" in told["message"]
    wait(lambda: (cluster.get_pod("p0") or {})["status"]["phase"] == "Running", what="running")
    assert len(cluster.events("Scheduled")) == 2
    assert cluster.events("FailedScheduling")
    lease = cluster.admin.json(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/batchsched-system/leases/batchsched"
    )
    assert lease["spec"]["holderIdentity"] == ""  # released on stop


def test_a_new_node_is_used_once_its_kubelet_reports_it_ready(cluster: Cluster) -> None:
    cluster.run_scheduler()
    cluster.pod("waiting", cpu="1")
    wait(lambda: cluster.condition("waiting", "PodScheduled") is not None, what="told why")
    cluster.node(f"late-{cluster.namespace[-6:]}", cpu="2")
    wait(lambda: cluster.node_of("waiting") != "", what="bound to the new node")


def test_preemption_spares_the_tolerated_pod_and_evicts_the_expired_one(cluster: Cluster) -> None:
    suffix = cluster.namespace[-6:]
    guarded, brief, high = f"guarded-{suffix}", f"brief-{suffix}", f"high-{suffix}"
    _priority_class(cluster, guarded, 8000, minimum=10000, seconds=-1)
    _priority_class(cluster, brief, 8000, minimum=10000, seconds=1)
    _priority_class(cluster, high, 9000)
    node = f"n-{suffix}"
    cluster.node(node, cpu="2")
    cluster.run_scheduler()
    cluster.pod("protected", cpu="1", priority_class=guarded)
    cluster.pod("expiring", cpu="1", priority_class=brief)
    wait(lambda: cluster.node_of("protected") and cluster.node_of("expiring"), what="lows bound")
    wait(lambda: cluster.get_pod("expiring")["status"]["phase"] == "Running")  # type: ignore[index]
    time.sleep(2)  # past `expiring`'s 1 s of toleration
    cluster.pod("preemptor", cpu="1", priority_class=high)
    wait(lambda: cluster.node_of("preemptor") == node, what="preemptor bound", timeout=60)
    assert cluster.get_pod("protected") is not None
    assert cluster.get_pod("expiring") is None
    [preempted] = cluster.events("Preempted")
    assert preempted["regarding"]["name"] == "expiring"
    assert f"{cluster.namespace}/preemptor" in preempted["note"]
    # The preemptor was told where it would go while the victim terminated.
    nominations = [
        e for e in cluster.events("FailedScheduling") if e["regarding"]["name"] == "preemptor"
    ]
    assert nominations, "the preemptor was not told why it waited"


def test_a_gang_binds_whole_or_not_at_all(cluster: Cluster) -> None:
    suffix = cluster.namespace[-6:]
    groups = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{cluster.namespace}/podgroups"
    cluster.node(f"g1-{suffix}", cpu="2")
    cluster.run_scheduler()
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "job"},
        "spec": {"minMember": 3},
    }
    cluster.create(groups, group)
    label = {"scheduling.x-k8s.io/pod-group": "job"}
    for i in range(3):
        cluster.pod(f"job-{i}", cpu="1", labels=label)
    wait(
        lambda: all(cluster.condition(f"job-{i}", "PodScheduled") for i in range(3)),
        what="members told why",
    )
    assert [cluster.node_of(f"job-{i}") for i in range(3)] == ["", "", ""]
    cluster.node(f"g2-{suffix}", cpu="2")
    wait(lambda: all(cluster.node_of(f"job-{i}") for i in range(3)), what="gang bound")
    wait(
        lambda: (
            (cluster.admin.json("GET", f"{groups}/job").get("status") or {}).get("admitted") == 3
        ),
        what="PodGroup status admitted 3",
    )


def test_a_required_topology_gang_lands_within_one_rack_label(cluster: Cluster) -> None:
    # Two racks of two 2-CPU nodes; a pod bound by name takes 1 CPU of rack-a's first node,
    # so rack-a holds one 2-CPU member only: the gang of two takes rack-b whole, and its
    # PodGroup gets a Normal event naming the rack.
    suffix = cluster.namespace[-6:]
    rack = "example.com/rack"
    for name, value in (("ta1", "a"), ("ta2", "a"), ("tb1", "b"), ("tb2", "b")):
        cluster.node(f"{name}-{suffix}", cpu="2", labels={rack: f"rack-{value}-{suffix}"})
    filler = cluster.pod_body("filler", cpu="1")
    filler["spec"]["nodeName"] = f"ta1-{suffix}"
    cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", filler)
    groups = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{cluster.namespace}/podgroups"
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "ring", "annotations": {"batchsched.io/topology-required": rack}},
        "spec": {"minMember": 2},
    }
    cluster.create(groups, group)
    for i in range(2):
        cluster.pod(f"ring-{i}", cpu="2", labels={"scheduling.x-k8s.io/pod-group": "ring"})
    cluster.run_scheduler()
    wait(lambda: all(cluster.node_of(f"ring-{i}") for i in range(2)), what="gang bound")
    assert sorted(cluster.node_of(f"ring-{i}") for i in range(2)) == [
        f"tb1-{suffix}",
        f"tb2-{suffix}",
    ]
    wait(
        lambda: any(
            e.get("regarding", {}).get("kind") == "PodGroup" for e in cluster.events("Scheduled")
        ),
        what="the group's Scheduled event",
    )
    [told] = [e for e in cluster.events("Scheduled") if e["regarding"]["kind"] == "PodGroup"]
    assert told["type"] == "Normal"
    assert told["note"] == f"placed 2 member(s) in {rack} rack-b-{suffix}"
    cluster.stop_schedulers()


def test_a_priority_class_tolerating_for_ten_thousand_years_does_not_stop_scheduling(
    cluster: Cluster,
) -> None:
    suffix = cluster.namespace[-6:]
    forever = f"eon-{suffix}"
    _priority_class(cluster, forever, 1000, minimum=100000, seconds=10_000 * 365 * 86400)
    cluster.node(f"e-{suffix}", cpu="2")
    scheduler = cluster.run_scheduler()
    cluster.pod("ancient", cpu="1", priority_class=forever)
    cluster.pod("plain", cpu="1")
    wait(lambda: cluster.node_of("ancient") != "" and cluster.node_of("plain") != "", what="bound")
    assert scheduler.healthy()


def test_a_daemonset_pod_made_by_the_controller_preempts_on_its_node(cluster: Cluster) -> None:
    require(controller_manager)
    plane = cluster.plane
    suffix = cluster.namespace[-6:]
    low = f"ds-low-{suffix}"
    _priority_class(cluster, low, 100)
    node = f"d-{suffix}"
    cluster.node(node, cpu="2")
    delay = {"name": "DaemonSetPreemption", "args": {"preemptionStartDelaySeconds": 0}}
    cluster.run_scheduler(shipped_config(delay))
    cluster.pod("filler", cpu="2", priority_class=low)
    wait(lambda: cluster.node_of("filler") == node, what="filler bound")
    plane.start_controller_manager("daemonset")  # the real DaemonSet controller
    try:
        daemonset = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": cluster.namespace},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {
                        **cluster.pod_body("x", cpu="1", priority_class="system-node-critical")[
                            "spec"
                        ],
                        "nodeSelector": {"kubernetes.io/hostname": node},
                    },
                },
            },
        }
        cluster.create(f"/apis/apps/v1/namespaces/{cluster.namespace}/daemonsets", daemonset)

        def agent_on_node() -> bool:
            return any(
                p["metadata"]["name"].startswith("agent-") and p["spec"].get("nodeName") == node
                for p in cluster.pods()
            )

        wait(agent_on_node, timeout=90, what="the DaemonSet pod bound on its node")
        assert cluster.get_pod("filler") is None
        [preempted] = cluster.events("Preempted")
        assert preempted["regarding"]["name"] == "filler"
    finally:
        plane.stop_controller_manager()
        for ds in cluster.admin.json(
            "GET", f"/apis/apps/v1/namespaces/{cluster.namespace}/daemonsets"
        )["items"]:
            cluster.admin.request(
                "DELETE",
                f"/apis/apps/v1/namespaces/{cluster.namespace}/daemonsets/{ds['metadata']['name']}",
            )


def test_deploy_applies_with_kubectl_and_the_examples_are_optional(plane: ControlPlane) -> None:
    plane.deploy()  # kubectl apply -k deploy/ (shared by the session)
    out = orjson.loads(
        plane.kubectl(
            "get", "-n", "batchsched-system", "deployment,service,pdb,configmap,sa", "-o", "json"
        )
    )
    kinds = {(i["kind"], i["metadata"]["name"]) for i in out["items"]}
    assert {
        ("Deployment", "batchsched"),
        ("Service", "batchsched-metrics"),
        ("PodDisruptionBudget", "batchsched"),
        ("ConfigMap", "batchsched-config"),
        ("ServiceAccount", "batchsched"),
    } <= kinds
    [deployment] = [i for i in out["items"] if i["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "batchsched:0.1.0"
    # Applying again changes nothing; the optional example classes apply on their own.
    plane.kubectl("apply", "-k", str(REPO / "deploy"))
    plane.kubectl("apply", "-k", str(REPO / "deploy" / "examples" / "priorityclasses"))
    names = plane.kubectl("get", "priorityclasses", "-o", "name").split()
    assert "priorityclass.scheduling.k8s.io/batchsched-low-non-preempted" in names
    # Uninstalling deploy/ deletes batchsched and never the PodGroup CRD (and every PodGroup
    # with it), which came from the optional component: asked of the API server, deleting
    # nothing.
    out = plane.kubectl("delete", "-k", str(REPO / "deploy"), "--dry-run=server", "-o", "name")
    doomed = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert "deployment.apps/batchsched" in doomed
    # batchsched's own Queue CRD is part of deploy/ and goes with it; the PodGroup CRD never.
    assert not [d for d in doomed if d.startswith("customresourcedefinition") and "podgroups" in d]
    assert plane.kubectl("get", "crd", "podgroups.scheduling.x-k8s.io", "-o", "name").strip()
