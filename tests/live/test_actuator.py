"""The actuator: each decision becomes the API writes kube-scheduler would make."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from batchsched.decisions import (
    Bind,
    Evict,
    GroupPlaced,
    Nominate,
    PodGroupUpdate,
    Unschedulable,
    Warn,
)
from batchsched.live.actuator import Actuator, describe
from batchsched.live.events import EventRecorder
from batchsched.live.facts import BindFailed, Fact, apply_fact
from batchsched.live.metrics import Metrics
from batchsched.live.ratelimit import TokenBucket
from batchsched.objects.parse import read_node, read_pod, read_pod_group
from batchsched.objects.records import PodGroupStatus
from batchsched.state.cluster import ClusterState
from tests.live.conftest import client_for, node, pod
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer


@dataclass
class Rig:
    api: FakeApiServer
    state: ClusterState
    actuator: Actuator
    feedback: queue.Queue[Fact]
    metrics: Metrics
    leading: list[bool]

    def add_node(self, name: str, cpu: str = "4") -> None:
        self.state.upsert_node(read_node(self.api.create("nodes", node(name, cpu=cpu))))

    def add_pod(self, name: str, **kwargs: object) -> None:
        self.state.upsert_pod(read_pod(self.api.create("pods", pod(name, **kwargs))))  # type: ignore[arg-type]

    def run(self, *decisions: object) -> None:
        self.actuator.apply(list(decisions), self.state, {})  # type: ignore[arg-type]
        self.actuator.wait()

    def writes(self) -> list[tuple[str, str]]:
        return [r for r in self.api.requests if r[0] != "GET"]


@pytest.fixture
def rig(api: FakeApiServer) -> Iterator[Rig]:
    client = client_for(api)
    metrics = Metrics()
    client.error_hook = metrics.api_error
    feedback: queue.Queue[Fact] = queue.Queue()
    leading = [True]
    events = EventRecorder(client, "batchsched", "test-instance")
    actuator = Actuator(client, events, feedback, metrics, lambda: leading[0], workers=4)
    yield Rig(api, ClusterState(), actuator, feedback, metrics, leading)
    actuator.shutdown()
    events.close()


def test_bind_posts_a_binding_and_a_scheduled_event(rig: Rig) -> None:
    rig.add_node("n1")
    rig.add_pod("p")
    rig.state.assume("default/p", "n1")
    rig.run(Bind("default/p", "n1"))
    assert rig.api.get("pods", "p")["spec"]["nodeName"] == "n1"  # type: ignore[index]
    events = rig.api.objects("events")
    assert [(e["reason"], e["type"], e["regarding"]["name"]) for e in events] == [
        ("Scheduled", "Normal", "p")
    ]
    assert events[0]["note"] == "Successfully assigned default/p to n1"
    assert rig.feedback.empty()


def test_a_409_bind_gives_the_room_back(rig: Rig) -> None:
    rig.add_node("n1", cpu="1")
    rig.add_node("n2", cpu="1")
    rig.add_pod("p")
    # Someone else bound it after our informer last saw it.
    other = rig.api.get("pods", "p")
    assert other is not None
    rig.api.store["pods"]["default/p"] = {**other, "spec": {**other["spec"], "nodeName": "n2"}}
    rig.state.assume("default/p", "n1")
    rig.run(Bind("default/p", "n1"))
    fact = rig.feedback.get(timeout=WAIT_SECONDS)
    assert isinstance(fact, BindFailed) and "already assigned" in fact.reason
    apply_fact(rig.state, fact)
    idx = rig.state.nodes.row_of["n1"]
    assert rig.state.nodes.free[idx, rig.state.nodes.resources.intern("cpu")] == 1000
    assert "default/p" in rig.state.pods.pending


def test_429_and_5xx_are_retried(rig: Rig) -> None:
    rig.add_node("n1")
    rig.add_pod("p")
    rig.api.inject(429, count=2, path="/binding", retry_after=0)
    rig.api.inject(500, count=1, path="/binding")
    rig.state.assume("default/p", "n1")
    rig.run(Bind("default/p", "n1"))
    assert rig.api.get("pods", "p")["spec"]["nodeName"] == "n1"  # type: ignore[index]
    errors = rig.metrics.registry.get_sample_value
    assert errors("batchsched_api_errors_total", {"verb": "POST", "code": "429"}) == 2
    assert errors("batchsched_api_errors_total", {"verb": "POST", "code": "500"}) == 1


def test_unschedulable_writes_the_condition_and_one_event_however_often_it_repeats(
    rig: Rig,
) -> None:
    rig.add_pod("p")
    message = "0/3 nodes are available: 3 Insufficient cpu."
    for _ in range(5):
        rig.run(Unschedulable("default/p", message))
    status = rig.api.get("pods", "p")["status"]  # type: ignore[index]
    [cond] = [c for c in status["conditions"] if c["type"] == "PodScheduled"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", message)
    assert [w for w in rig.writes() if w[1].endswith("/status")] == [
        ("PATCH", "/api/v1/namespaces/default/pods/p/status")
    ]
    [event] = rig.api.objects("events")
    assert (event["reason"], event["type"], event["note"]) == (
        "FailedScheduling",
        "Warning",
        message,
    )
    # A different reason is news: written again.
    rig.run(Unschedulable("default/p", "0/3 nodes are available: 3 node(s) had untolerated taint."))
    assert len([w for w in rig.writes() if w[1].endswith("/status")]) == 2
    assert len(rig.api.objects("events")) == 2


def test_event_series_is_updated_at_most_once_per_interval(rig: Rig) -> None:
    rig.actuator.events.series_interval = 0.0
    rig.add_pod("p")
    for _ in range(3):
        rig.run(Unschedulable("default/p", "no room"))
    [event] = rig.api.objects("events")
    assert event["series"]["count"] == 3


def test_nomination_and_condition_go_in_one_status_patch(rig: Rig) -> None:
    rig.add_node("n1")
    rig.add_pod("p")
    rig.run(Nominate("default/p", "n1"), Unschedulable("default/p", "waiting for victims"))
    assert rig.api.get("pods", "p")["status"]["nominatedNodeName"] == "n1"  # type: ignore[index]
    assert len([w for w in rig.writes() if w[1].endswith("/status")]) == 1
    rig.run(Nominate("default/p", None))
    assert "nominatedNodeName" not in rig.api.get("pods", "p")["status"]  # type: ignore[index]


def test_eviction_marks_the_victim_then_deletes_it_by_uid(rig: Rig) -> None:
    rig.add_node("n1")
    rig.add_pod("victim", node_name="n1")
    rig.run(Evict("default/victim", "n1", "default/big", "preempted"))
    assert rig.api.get("pods", "victim") is None
    kinds = [w for w in rig.writes() if "victim" in w[1]]
    assert kinds == [
        ("PATCH", "/api/v1/namespaces/default/pods/victim/status"),
        ("DELETE", "/api/v1/namespaces/default/pods/victim"),
    ]
    [event] = [e for e in rig.api.objects("events") if e["reason"] == "Preempted"]
    assert event["note"] == "Preempted by default/big on node n1"
    assert rig.metrics.registry.get_sample_value("batchsched_preemption_victims_total") == 1


def test_a_reclaim_tells_victim_and_preemptor_naming_both_queues(rig: Rig) -> None:
    rig.add_node("n1")
    rig.add_pod("victim", node_name="n1")
    rig.add_pod("taker")
    rig.run(Evict("default/victim", "n1", "default/taker", "reclaimed", ("team-a", "team-b")))
    events = {e["reason"]: e for e in rig.api.objects("events")}
    assert events["Reclaimed"]["note"] == (
        "Reclaimed by default/taker of queue team-a from queue team-b on node n1"
    )
    assert events["Reclaimed"]["regarding"]["name"] == "victim"
    assert events["Reclaiming"]["note"] == (
        "Reclaimed default/victim of queue team-b for queue team-a on node n1"
    )
    assert events["Reclaiming"]["regarding"]["name"] == "taker"
    assert "Preempted" not in events


def test_a_broken_promise_tells_the_victim_its_overrun_and_the_reservation(rig: Rig) -> None:
    rig.add_node("n1")
    rig.add_pod("victim", node_name="n1")
    rig.add_pod("big")
    reason = (
        "Backfill: broken promise: ran 30m past its stated runtime 1h; evicted for the "
        "reservation of PodGroup ml/big (expected start 2026-11-22T10:00:00Z) on node n1"
    )
    rig.run(Evict("default/victim", "n1", "default/big", reason, broken_promise="PodGroup ml/big"))
    assert rig.api.get("pods", "victim") is None
    events = {e["reason"]: e for e in rig.api.objects("events")}
    assert events["BrokenPromise"]["note"] == reason.removeprefix("Backfill: ")
    assert events["BrokenPromise"]["regarding"]["name"] == "victim"
    assert events["Reserving"]["note"] == (
        "Evicted default/victim on node n1, past its stated runtime"
    )
    assert "Preempted" not in events


def test_eviction_never_deletes_a_new_pod_that_took_the_victims_name(rig: Rig) -> None:
    rig.add_node("n1")
    rig.add_pod("victim", node_name="n1")
    rig.api.delete("pods", "victim")
    rig.api.create("pods", pod("victim", node_name="n1"))  # same name, new UID
    rig.run(Evict("default/victim", "n1", "default/big", "preempted"))
    assert rig.api.get("pods", "victim") is not None
    assert rig.metrics.registry.get_sample_value("batchsched_preemption_victims_total") == 0


def test_pod_group_status_goes_to_the_status_subresource_once(rig: Rig) -> None:
    group = {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    rig.state.upsert_pod_group(read_pod_group(rig.api.create("podgroups", group)))
    update = PodGroupUpdate("default/g", PodGroupStatus(phase="Scheduling", admitted=2))
    rig.run(update)
    rig.run(update)
    status = rig.api.get("podgroups", "g")["status"]  # type: ignore[index]
    assert status["phase"] == "Scheduling" and status["admitted"] == 2
    assert rig.writes() == [
        ("PATCH", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/g/status")
    ]


def test_warn_becomes_a_warning_event_on_the_object(rig: Rig) -> None:
    rig.run(Warn("PriorityClass low", "minimum-preemptable-priority: 'x' is not an integer"))
    [event] = rig.api.objects("events")
    assert event["type"] == "Warning"
    assert event["regarding"] == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "name": "low",
    }


def test_a_placed_topology_gang_gets_a_normal_event_on_its_pod_group(rig: Rig) -> None:
    group = {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    rig.state.upsert_pod_group(read_pod_group(rig.api.create("podgroups", group)))
    rig.run(GroupPlaced("default/g", "placed 2 member(s) in example.com/rack rack-a"))
    [event] = rig.api.objects("events")
    assert (event["type"], event["reason"]) == ("Normal", "Scheduled")
    assert event["note"] == "placed 2 member(s) in example.com/rack rack-a"
    assert event["regarding"]["kind"] == "PodGroup" and event["regarding"]["name"] == "g"
    assert describe(GroupPlaced("default/g", "placed 2 member(s)")) == (
        "would tell PodGroup default/g: placed 2 member(s)"
    )


def test_a_replica_that_does_not_lead_writes_nothing(rig: Rig) -> None:
    rig.add_node("n1")
    rig.add_pod("p")
    rig.leading[0] = False
    rig.state.assume("default/p", "n1")
    rig.run(Bind("default/p", "n1"), Unschedulable("default/q", "x"))
    assert rig.writes() == []
    fact = rig.feedback.get(timeout=WAIT_SECONDS)
    assert isinstance(fact, BindFailed)


class _Gate(TokenBucket):
    """A rate limiter that holds every request until the test opens it."""

    def __init__(self) -> None:
        super().__init__(1.0, 1)
        self.open = threading.Event()

    def acquire(self) -> None:
        self.open.wait(WAIT_SECONDS)


def test_writes_waiting_for_the_rate_limit_are_dropped_once_leadership_is_lost(
    rig: Rig,
) -> None:
    rig.add_node("n1")
    gate = _Gate()
    rig.actuator.client.limiter = gate
    for name in ("a", "b"):
        rig.add_pod(name)
        rig.state.assume(f"default/{name}", "n1")
    rig.actuator.apply([Bind("default/a", "n1"), Bind("default/b", "n1")], rig.state, {})
    rig.leading[0] = False  # the lease is lost while both binds wait for a token
    gate.open.set()
    rig.actuator.wait()
    assert rig.writes() == []
    failed = {rig.feedback.get(timeout=WAIT_SECONDS).pod for _ in range(2)}  # type: ignore[union-attr]
    assert failed == {"default/a", "default/b"}
