"""What a real cluster does to a scheduler: its leader killed (two `batchsched run` processes
with leader election), kube-apiserver restarted mid-run, and a watch outliving etcd's history
(compaction while the scheduler was cut off). Each run as deploy/'s ServiceAccount."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from batchsched.live.client import ApiError
from batchsched.objects.quantity import resource_amount
from tests.e2e.cluster import (
    LEASE,
    Cluster,
    Process,
    forbidden_requests,
    shipped_config,
    shipped_raw_config,
    wait,
)
from tests.e2e.proxy import Partition
from testsupport.controlplane import (
    ControlPlane,
    PlaneFactory,
    write_kubeconfig,
)

pytestmark = pytest.mark.e2e

LEASES = "/apis/coordination.k8s.io/v1/namespaces/batchsched-system/leases/batchsched"
# Long enough to ride out an API server restart or a partition on a loaded machine.
PATIENT_LEASE = {"leaseDuration": "60s", "renewDeadline": "45s", "retryPeriod": "1s"}


def _seconds(duration: str) -> float:
    return float(duration[:-2]) / 1000 if duration.endswith("ms") else float(duration[:-1])


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        if process.proc.poll() is None:
            process.stop(signal.SIGKILL)


def _holder(cluster: Cluster) -> str:
    try:
        lease = cluster.admin.json("GET", LEASES)
    except ApiError as err:
        if err.status == 404:
            return ""  # no scheduler has run yet
        raise
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _requests_by_node(cluster: Cluster) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in cluster.pods():
        node = pod["spec"].get("nodeName")
        if node:
            cpu = pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
            used[node] = used.get(node, 0) + resource_amount("cpu", cpu)
    return used


def test_the_standby_takes_over_when_the_leader_is_killed(
    cluster: Cluster, processes: list[Process], tmp_path: Path
) -> None:
    suffix = cluster.namespace[-6:]
    nodes = [f"f{i}-{suffix}" for i in range(3)]
    for name in nodes:
        cluster.node(name, cpu="4")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(shipped_raw_config()))
    kubeconfig = cluster.plane.deploy()
    wait(lambda: _holder(cluster) == "", timeout=20, what="lease free")
    leader = Process(tmp_path, kubeconfig, config, f"a-{suffix}")
    processes.append(leader)
    wait(lambda: _holder(cluster) == leader.identity, timeout=60, what="a leads")
    standby = Process(tmp_path, kubeconfig, config, f"b-{suffix}")
    processes.append(standby)
    for i in range(6):
        cluster.pod(f"before-{i}", cpu="1")
    wait(lambda: all(cluster.node_of(f"before-{i}") for i in range(6)), what="bound by a")
    wait(lambda: standby.metric("batchsched_leader") == 0 and "caches synced" in standby.log())

    killed_at = time.monotonic()
    leader.stop(signal.SIGKILL)
    for i in range(6):
        cluster.pod(f"after-{i}", cpu="1")
    wait(lambda: _holder(cluster) == standby.identity, timeout=60, what="b takes the lease")
    took = time.monotonic() - killed_at
    # A standby notices an expired lease within leaseDuration of its last renewal, trying
    # every retryPeriod (+20% jitter); its view of that renewal may be one retry late.
    limit = _seconds(LEASE["leaseDuration"]) + 2 * 1.2 * _seconds(LEASE["retryPeriod"]) + 0.5
    assert took <= limit, f"took over after {took:.1f}s (limit {limit:.1f}s)"
    wait(lambda: all(cluster.node_of(f"after-{i}") for i in range(6)), what="bound by b")

    # Nothing lost, nothing bound twice (b never tried a pod a had bound), no node overfull.
    assert all(cluster.node_of(f"before-{i}") for i in range(6))
    assert standby.metric("batchsched_binds_total", result="failed") == 0
    assert standby.metric("batchsched_binds_total", result="bound") == 6
    assert max(_requests_by_node(cluster).values()) <= 4000
    assert standby.metric("batchsched_api_errors_total", code="403") == 0
    assert standby.stop() == 0  # SIGTERM: releases the lease
    assert _holder(cluster) == ""
    for process in (leader, standby):
        log = process.log()
        assert " 403 " not in log, log[-2000:]
        # The insecure kubeconfig is said once, not per request.
        assert log.count("TLS certificate verification is off") == 1
        assert "InsecureRequestWarning" not in log
    print(f"failover: standby took the lease {took:.2f}s after SIGKILL")


def _own_cluster(plane: ControlPlane) -> Cluster:
    plane.deploy()
    return Cluster(plane)


def test_the_loop_reconnects_after_kube_apiserver_restarts(own_plane: PlaneFactory) -> None:
    plane = own_plane()
    cluster = _own_cluster(plane)
    try:
        suffix = cluster.namespace[-6:]
        cluster.node(f"r-{suffix}", cpu="8")
        scheduler = cluster.run_scheduler(shipped_config(lease=PATIENT_LEASE))
        for i in range(3):
            cluster.pod(f"before-{i}", cpu="1")
        wait(lambda: all(cluster.node_of(f"before-{i}") for i in range(3)), what="bound")
        plane.stop_apiserver()
        time.sleep(2)
        plane.start_apiserver()
        for i in range(3):
            cluster.pod(f"after-{i}", cpu="1")
        wait(
            lambda: all(cluster.node_of(f"after-{i}") for i in range(3)),
            timeout=90,
            what="after restart",
        )
        assert scheduler.healthy() and scheduler.is_leading()
        assert max(_requests_by_node(cluster).values()) <= 8000
    finally:
        cluster.close()


def test_a_watch_expired_by_etcd_compaction_relists_and_misses_nothing(
    own_plane: PlaneFactory,
) -> None:
    # Without the watch cache, a watch resumed below etcd's compacted revision gets 410.
    plane = own_plane(("--watch-cache=false",))
    cluster = _own_cluster(plane)
    partition = Partition(plane.api_port)
    try:
        suffix = cluster.namespace[-6:]
        kubeconfig = write_kubeconfig(
            plane.work / "partitioned.kubeconfig", partition.url, plane.service_account_token
        )
        cluster.node(f"c1-{suffix}", cpu="2")
        scheduler = cluster.run_scheduler(
            shipped_config(lease=PATIENT_LEASE), kubeconfig=kubeconfig
        )
        cluster.pod("doomed", cpu="8")
        cluster.pod("early", cpu="1")
        wait(lambda: cluster.condition("doomed", "PodScheduled") is not None, what="doomed told")
        wait(lambda: cluster.node_of("early") != "", what="early bound")
        pods = next(i for i in scheduler.informers if i.kind.name == "Pod")
        lists_before = pods.lists

        partition.cut()
        # While it cannot see: one pod goes, one comes, a node comes; then history is compacted.
        cluster.admin.request(
            "DELETE",
            f"/api/v1/namespaces/{cluster.namespace}/pods/doomed",
            body={"gracePeriodSeconds": 0},
        )
        cluster.node(f"c2-{suffix}", cpu="4")
        cluster.pod("newcomer", cpu="3")
        plane.compact_etcd()
        partition.restore()

        wait(
            lambda: cluster.node_of("newcomer") == f"c2-{suffix}", timeout=90, what="newcomer bound"
        )
        assert pods.lists > lists_before  # the 410 made it list again
        wait(
            lambda: f"{cluster.namespace}/doomed" not in scheduler.state.pods.by_key,
            what="doomed forgotten",
        )
        assert forbidden_requests(scheduler) == 0
    finally:
        cluster.close()
        partition.close()
