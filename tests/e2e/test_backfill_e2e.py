"""Reservations and backfill against a real control plane (docs/backfill.md): a waiting gang
reserves two nodes, a short pod backfills, a long one waits, and the gang starts when the
running pods end."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.cluster import Cluster, shipped_config, wait

pytestmark = pytest.mark.e2e

RUNTIME = "batchsched.io/max-runtime"


def _pod(cluster: Cluster, name: str, runtime: str, node: str = "", **kwargs: Any) -> None:
    body = cluster.pod_body(name, cpu=kwargs.pop("cpu", "2"), **kwargs)
    body["metadata"]["annotations"] = {RUNTIME: runtime}
    if node:
        body["spec"]["nodeName"] = node
    cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", body)


def _message(cluster: Cluster, name: str) -> str:
    return str((cluster.condition(name, "PodScheduled") or {}).get("message", ""))


def test_a_gang_reserves_a_short_pod_backfills_a_long_one_waits(cluster: Cluster) -> None:
    suffix = cluster.namespace[-6:]
    nodes = [f"bf1-{suffix}", f"bf2-{suffix}"]
    for node in nodes:
        cluster.node(node, cpu="4")
    for i, node in enumerate(nodes):
        _pod(cluster, f"run-{i}", "1h", node=node)
    wait(
        lambda: all(
            (cluster.get_pod(f"run-{i}") or {}).get("status", {}).get("startTime") for i in range(2)
        ),
        what="running pods started",
    )
    # Reserving at once: the API server stamps creation itself, so a gang cannot have waited
    # the default 10 minutes already.
    config = shipped_config({"name": "Backfill", "args": {"reserveAfterSeconds": 0}})
    scheduler = cluster.run_scheduler(config)
    groups = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{cluster.namespace}/podgroups"
    cluster.create(
        groups,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "big", "annotations": {RUNTIME: "2h"}},
            "spec": {"minMember": 2},
        },
    )
    for i in range(2):
        cluster.pod(f"big-{i}", cpu="4", labels={"scheduling.x-k8s.io/pod-group": "big"})
    reserved = f"reserved {', '.join(sorted(nodes))}; expected start "
    wait(lambda: reserved in _message(cluster, "big-0"), what="the gang told its start")
    _pod(cluster, "short", "10m")
    _pod(cluster, "long", "2h")
    wait(lambda: cluster.node_of("short") in nodes, what="the short pod backfilled")
    wait(
        lambda: "reserved for PodGroup" in _message(cluster, "long"),
        what="the long pod told whose reservation it waits for",
    )
    assert cluster.node_of("long") == ""
    assert cluster.events("Reserved"), "no Reserved event"
    gauge = scheduler.metrics.registry.get_sample_value("batchsched_reservations")
    # The gang, and "long" from the gang's end on (a time-sliced plan: docs/backfill.md).
    assert gauge == 2
    assert "; expected start " in _message(cluster, "long")
    # The running pods (and the backfilled one) end: the gang starts on its reserved nodes.
    for name in ("run-0", "run-1", "short"):
        cluster.admin.request("DELETE", f"/api/v1/namespaces/{cluster.namespace}/pods/{name}")
    wait(
        lambda: sorted(cluster.node_of(f"big-{i}") for i in range(2)) == sorted(nodes),
        what="the gang started on its nodes",
        timeout=60,
    )
    wait(lambda: cluster.events("ReservationStarted"), what="ReservationStarted event")
    assert cluster.node_of("long") == ""  # the gang fills both nodes now


def test_a_pod_past_its_stated_runtime_is_evicted_for_a_reservation(cluster: Cluster) -> None:
    """docs/backfill.md#broken-promises: a pod stating 1 s runs on; a waiting pod reserves
    its node with expected start that end, evicts it (DisruptionTarget, a BrokenPromise event
    naming the holder and the overrun) and starts there."""
    node = f"bp-{cluster.namespace[-6:]}"
    cluster.node(node, cpu="4")
    _pod(cluster, "late", "1s", node=node, cpu="4")
    wait(
        lambda: bool((cluster.get_pod("late") or {}).get("status", {}).get("startTime")),
        what="the late pod started",
    )
    config = shipped_config({"name": "Backfill", "args": {"reserveAfterSeconds": 0}})
    cluster.run_scheduler(config)
    holder = cluster.pod_body("holder", cpu="4")
    holder["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}  # other tests' nodes
    cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", holder)
    wait(lambda: cluster.get_pod("late") is None, what="the late pod evicted", timeout=60)
    [event] = cluster.events("BrokenPromise")
    assert "past its stated runtime 1s; evicted for the reservation of Pod " in event["note"]
    assert "/holder (expected start " in event["note"]
    wait(lambda: cluster.node_of("holder") == node, what="the holder started", timeout=60)


def test_a_bad_stated_runtime_is_told_and_its_running_pod_still_counted(cluster: Cluster) -> None:
    """docs/backfill.md#stated-runtimes: the API server takes any label or annotation value;
    a pending pod stating a bad runtime stays pending with the error as its PodScheduled
    message and FailedScheduling event, and a running one still holds its node's room and
    gets one InvalidStatedRuntime Warning event naming the field."""
    node = f"bad-{cluster.namespace[-6:]}"
    cluster.node(node, cpu="4")
    _pod(cluster, "busy", "soon", node=node, cpu="4")
    wait(
        lambda: bool((cluster.get_pod("busy") or {}).get("status", {}).get("startTime")),
        what="the busy pod started",
    )
    cluster.run_scheduler()
    typo = cluster.pod_body("typo", labels={"kueue.x-k8s.io/max-exec-time-seconds": "abc"})
    cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", typo)
    told = (
        f"Pod {cluster.namespace}/typo: metadata.labels.kueue.x-k8s.io/max-exec-time-seconds: "
        "'abc' is not a whole number of seconds (e.g. 3600)"
    )
    wait(lambda: _message(cluster, "typo") == told, what="the typo told its error")
    assert any(e["note"] == told for e in cluster.events("FailedScheduling"))
    later = cluster.pod_body("later", cpu="1")
    later["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}  # other tests' nodes
    cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", later)
    wait(lambda: "Insufficient cpu" in _message(cluster, "later"), what="later kept off")
    assert cluster.node_of("later") == "" and cluster.node_of("typo") == ""

    def warnings() -> list[dict[str, Any]]:
        found = cluster.events("InvalidStatedRuntime")
        return [e for e in found if e["regarding"]["name"] == "busy"]

    wait(lambda: bool(warnings()), what="the busy pod warned")
    [warned] = warnings()
    assert (warned["type"], warned["regarding"]["kind"]) == ("Warning", "Pod")
    assert warned["note"] == (
        f"metadata.annotations.{RUNTIME}: 'soon' is not a duration: whole numbers with units h, "
        "m or s (e.g. 90m, 2h, 3600s, 1h30m); planned as stating no runtime"
    )
