"""Queues against a real control plane: the CRD from deploy/ takes the status batchsched
writes (through the status subresource, as deploy/'s ServiceAccount), two queues borrow, and a
queue whose parent does not exist is reported on the Queue while the rest is scheduled."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from batchsched.live.client import ApiError
from batchsched.objects.queue_membership import QUEUE_LABEL
from tests.e2e.cluster import Cluster, wait

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
