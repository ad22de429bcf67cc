"""Queues against a real control plane: the CRD from deploy/ takes the status batchsched
writes (through the status subresource, as deploy/'s ServiceAccount), two queues borrow, a
queue whose parent does not exist is reported on the Queue while the rest is scheduled, and
with a usage half-life the leader killed, the new leader continues from the stored usage."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.live.client import ApiError
from batchsched.objects.queue_membership import QUEUE_LABEL
from tests.e2e.cluster import Cluster, Process, shipped_raw_config, wait
from tests.e2e.test_faults_e2e import _holder

pytestmark = pytest.mark.e2e

QUEUES = "/apis/batchsched.io/v1alpha1/queues"


class Queues:
    """Queues are cluster-scoped: each test names its own and deletes them after."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.suffix = cluster.namespace[-6:]
        self.names: list[str] = []

    def name(self, base: str) -> str:
        return f"{base}-{self.suffix}"

    def create(self, base: str, parent: str = "", **cpu: str) -> str:
        name = self.name(base)
        spec: dict[str, Any] = {"resources": {"cpu": cpu}}
        if parent:
            spec["parent"] = parent
        body = {"apiVersion": "batchsched.io/v1alpha1", "kind": "Queue", "metadata": {"name": name}}
        self.cluster.create(QUEUES, {**body, "spec": spec})
        self.names.append(name)
        return name

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.cluster.admin.json("GET", f"{QUEUES}/{name}").get("status") or {})

    def valid(self, name: str) -> dict[str, Any]:
        found = [c for c in self.status(name).get("conditions") or [] if c["type"] == "Valid"]
        return dict(found[0]) if found else {}

    def delete(self) -> None:
        for name in self.names:
            with contextlib.suppress(ApiError):
                self.cluster.admin.request("DELETE", f"{QUEUES}/{name}")


@pytest.fixture
def queues(cluster: Cluster) -> Iterator[Queues]:
    cluster.plane.deploy()  # the Queue CRD
    made = Queues(cluster)
    yield made
    made.delete()


def test_two_queues_borrow_and_their_status_is_written(cluster: Cluster, queues: Queues) -> None:
    cluster.node(f"q-{queues.suffix}", cpu="6")
    a = queues.create("a", nominal="1", limit="4")
    b = queues.create("b", nominal="1")
    lost = queues.create("lost", parent=queues.name("nowhere"))
    cluster.run_scheduler()
    for i in range(3):
        cluster.pod(f"a-{i}", cpu="1", labels={QUEUE_LABEL: a})
    cluster.pod("b-0", cpu="1", labels={QUEUE_LABEL: b})
    cluster.pod("lost-0", cpu="1", labels={QUEUE_LABEL: lost})
    wait(lambda: all(cluster.node_of(f"a-{i}") for i in range(3)), what="a's pods bound")
    wait(lambda: cluster.node_of("b-0") != "", what="b's pod bound")
    wait(lambda: queues.status(a).get("allocated") == {"cpu": "3"}, what="a's status")
    assert queues.status(a)["borrowed"] == {"cpu": "2"}
    assert queues.valid(a)["status"] == "True"
    wait(lambda: queues.status(b).get("allocated") == {"cpu": "1"}, what="b's status")
    assert queues.status(b)["borrowed"] == {"cpu": "0"}
    # The queue with a missing parent: its pod waits, told why, and the Queue says so.
    wait(lambda: cluster.condition("lost-0", "PodScheduled") is not None, what="told why")
    told = cluster.condition("lost-0", "PodScheduled")
    assert told is not None and f"Queue {lost}: spec.parent: no Queue" in told["message"]
    wait(lambda: queues.valid(lost).get("status") == "False", what="lost's condition")
    assert queues.valid(lost)["reason"] == "InvalidQueueTree"
    assert queues.status(lost)["pendingPods"] == 1
    events = cluster.admin.json("GET", "/apis/events.k8s.io/v1/namespaces/default/events")
    assert any(
        e["reason"] == "InvalidQueueTree" and e["regarding"]["name"] == lost
        for e in events["items"]
    )
    # Fixed: the parent is created, and the pod goes.
    queues.create("nowhere")
    wait(lambda: cluster.node_of("lost-0") != "", what="lost's pod bound once fixed")
    wait(lambda: queues.valid(lost).get("status") == "True", what="lost valid again")
    cluster.stop_schedulers()  # checks that no request was refused (queues/status in RBAC)


def test_the_new_leader_continues_from_the_stored_usage(
    cluster: Cluster, queues: Queues, tmp_path: Path
) -> None:
    cluster.node(f"u-{queues.suffix}", cpu="4")
    team = queues.create("team", nominal="1")
    config = tmp_path / "config.yaml"
    decay = {"name": "Queues", "args": {"usageHalfLife": "1h"}}
    config.write_text(yaml.safe_dump(shipped_raw_config(decay)))
    kubeconfig = cluster.plane.deploy()
    wait(lambda: _holder(cluster) == "", timeout=20, what="lease free")
    leader = Process(tmp_path, kubeconfig, config, f"a-{queues.suffix}")
    standby: Process | None = None
    try:
        wait(lambda: _holder(cluster) == leader.identity, timeout=60, what="a leads")
        standby = Process(tmp_path, kubeconfig, config, f"b-{queues.suffix}")
        cluster.pod("busy", cpu="2", labels={QUEUE_LABEL: team})
        wait(lambda: cluster.node_of("busy") != "", what="bound")
        # Two usage writes by the leader (10 s apart): the second counts the busy pod.
        wait(lambda: _stored(queues, team) > 0, timeout=40, what="usage written")
        wait(lambda: "caches synced" in standby.log(), what="standby synced")  # type: ignore[union-attr]
        written = _stored(queues, team)
        leader.stop(signal.SIGKILL)
        wait(lambda: _holder(cluster) == standby.identity, timeout=60, what="b leads")  # type: ignore[union-attr]
        # The new leader's first write continues from the stored value (decayed for the few
        # seconds the failover took), not from 0.
        before = queues.status(team)["usage"]["lastUpdateTime"]
        wait(
            lambda: queues.status(team)["usage"]["lastUpdateTime"] != before,
            timeout=40,
            what="b writes usage",
        )
        assert _stored(queues, team) >= 0.9 * written
        assert " 403 " not in standby.log()
    finally:
        leader.stop(signal.SIGKILL)
        if standby is not None:
            standby.stop()


def _stored(queues: Queues, name: str) -> float:
    """The queue's decayed CPU usage as stored (core-seconds; 0 before the first write)."""
    usage = queues.status(name).get("usage") or {}
    return float(usage.get("cpu", 0))


def test_a_queue_within_its_fair_share_reclaims_what_another_borrowed(
    cluster: Cluster, queues: Queues
) -> None:
    cluster.node(f"r-{queues.suffix}", cpu="4")
    lender = queues.create("lender", nominal="2")
    borrower = queues.create("borrower", nominal="2")
    cluster.run_scheduler()
    for i in range(4):
        cluster.pod(f"borrow-{i}", cpu="1", labels={QUEUE_LABEL: borrower})
    wait(lambda: all(cluster.node_of(f"borrow-{i}") for i in range(4)), what="all 4 borrowed")
    wait(lambda: queues.status(borrower).get("borrowed") == {"cpu": "2"}, what="2 borrowed")
    # The lender wants its nominal back: two of the borrower's pods are reclaimed.
    for i in range(2):
        cluster.pod(f"lend-{i}", cpu="1", labels={QUEUE_LABEL: lender})
    wait(lambda: all(cluster.node_of(f"lend-{i}") for i in range(2)), timeout=60, what="reclaimed")
    gone = [i for i in range(4) if cluster.get_pod(f"borrow-{i}") is None]
    assert len(gone) == 2
    reclaimed = cluster.events("Reclaimed")
    assert sorted(e["regarding"]["name"] for e in reclaimed) == [f"borrow-{i}" for i in gone]
    assert all(f"from queue {borrower}" in e["note"] for e in reclaimed)
    wait(lambda: queues.status(borrower).get("borrowed") == {"cpu": "0"}, what="nothing borrowed")
    assert queues.status(borrower)["allocated"] == {"cpu": "2"}
    wait(lambda: queues.status(lender).get("allocated") == {"cpu": "2"}, what="lender's status")
    assert queues.status(lender)["fairShare"] == {"cpu": "2"}
    cluster.stop_schedulers()
