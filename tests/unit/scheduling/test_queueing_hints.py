"""Queueing hints: which plugins have them, what each says, and how the queue uses them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.decisions import Bind, Decision, Unschedulable
from batchsched.objects.records import Node, Pod, PodCondition, Taint, Toleration
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests import builders
from tests.conftest import NOW, objects_of

GI = 2**30


def pod(name: str, cpu: int, created: float = 0.0, node: str = "") -> Pod:
    return Pod(
        "ns",
        name,
        requests={"cpu": cpu, "memory": GI, "pods": 1},
        priority=0,
        node_name=node,
        scheduler_name="batchsched",
        creation_timestamp=datetime.fromtimestamp(created, UTC),
    )


def cluster(*nodes: Node) -> tuple[ClusterState, Scheduler]:
    state = ClusterState()
    for n in nodes:
        state.upsert_node(n)
    return state, Scheduler(state, default_config())


def counts(decisions: list[Decision]) -> tuple[int, int]:
    binds = sum(isinstance(d, Bind) for d in decisions)
    return binds, sum(isinstance(d, Unschedulable) for d in decisions)


def test_a_pod_asking_an_ignored_resource_group_wakes_when_the_rest_fits() -> None:
    """NodeResourcesFit's hint checks what its filter checks: a resource of an ignored group
    (none of the nodes has it) does not keep the pod waiting once its cpu fits."""
    args = {"ignoredResourceGroups": ["example.com"]}
    raw = {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": args}]}]}
    state = ClusterState()
    state.upsert_node(Node("n", {"cpu": 2000, "memory": 8 * GI, "pods": 10}))
    scheduler = Scheduler(state, parse_config(raw))
    state.upsert_pod(pod("running", 2000, node="n"))
    fpga = pod("fpga", 1000)
    state.upsert_pod(replace(fpga, requests={**fpga.requests, "example.com/fpga": 1}))
    assert counts(scheduler.schedule_pass(NOW)) == (0, 1)
    state.remove_pod("ns/running")
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (1, 0)


def test_room_freed_where_the_pod_still_does_not_fit_does_not_wake_it() -> None:
    state, scheduler = cluster(
        Node("small", {"cpu": 1000, "memory": 8 * GI, "pods": 10}),
        Node("big", {"cpu": 4000, "memory": 8 * GI, "pods": 10}),
    )
    state.upsert_pod(pod("on-small", 1000, node="small"))
    state.upsert_pod(pod("on-big", 2000, node="big"))
    # Created now: it has not waited long enough to reserve a node (docs/backfill.md), which
    # would make it read the cluster otherwise and be tried after the next change.
    state.upsert_pod(pod("wide", 3000, created=NOW.timestamp()))
    assert counts(scheduler.schedule_pass(NOW)) == (0, 1)
    state.remove_pod("ns/on-small")  # 1 CPU free there: still too little for 3
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (0, 0)
    state.remove_pod("ns/on-big")
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=40))) == (1, 0)
    assert scheduler.queue.incoming["NodeRoom"] == 1


def test_a_relabelled_node_wakes_pods_its_labels_kept_out() -> None:
    tainted = Node("n", {"cpu": 4000, "memory": 8 * GI, "pods": 10})
    tainted.taints = (Taint("dedicated", "x", "NoSchedule"),)
    state, scheduler = cluster(tainted)
    state.upsert_pod(pod("p", 1000))
    assert counts(scheduler.schedule_pass(NOW)) == (0, 1)
    state.upsert_node(Node("n", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (1, 0)
    assert scheduler.queue.incoming["Node"] == 1


def test_a_woken_shape_is_tried_until_one_fails_while_the_state_stands_still() -> None:
    state = ClusterState()
    state.upsert_node(Node("n", {"cpu": 2000, "memory": 8 * GI, "pods": 10}))
    # One reservation at a time (with more, the second pod would reserve the node's other
    # half too: docs/backfill.md).
    args = {"maxReservations": 1}
    raw = {"profiles": [{"pluginConfig": [{"name": "Backfill", "args": args}]}]}
    scheduler = Scheduler(state, parse_config(raw))
    state.upsert_pod(pod("running", 2000, node="n"))
    for i in range(10):
        state.upsert_pod(pod(f"p{i}", 1000, created=i))
    assert counts(scheduler.schedule_pass(NOW)) == (0, 10)
    state.remove_pod("ns/running")
    # Two fit: the third fails and reserves n (it has waited: docs/backfill.md), which the
    # fourth, kept off n by the first's reservation before, is told and tried for; it fails and
    # nothing moves after it, so the six behind it are told nothing new and are not tried
    # (without hints, all eight would be).
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (2, 2)
    assert sorted(k for k in state.pods.bound) == ["ns/p0", "ns/p1"]
    assert scheduler.queue.pending_counts()["unschedulable"] == 8


def test_without_hints_every_waiting_pod_is_tried_after_any_change() -> None:
    state = ClusterState()
    state.upsert_node(Node("n", {"cpu": 2000, "memory": 8 * GI, "pods": 10}))
    scheduler = Scheduler(state, default_config(), queueing_hints=False)
    state.upsert_pod(pod("running", 2000, node="n"))
    for i in range(10):
        state.upsert_pod(pod(f"p{i}", 1000, created=i))
    scheduler.schedule_pass(NOW)
    state.remove_pod("ns/running")
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (2, 8)


ANTI = "requiredDuringSchedulingIgnoredDuringExecution"


def _anti_to(app: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {ANTI: [term]}}


def _one_node_state(*manifests: dict[str, Any]) -> tuple[ClusterState, Scheduler]:
    host = builders.node("n", cpu="8", labels={"kubernetes.io/hostname": "n"})
    state = build_state(objects_of(host, *manifests))
    return state, Scheduler(state, default_config())


def test_an_anti_affinity_pod_wakes_when_a_pod_its_term_selects_leaves_not_another() -> None:
    state, scheduler = _one_node_state(
        builders.pod("db", labels={"app": "db"}, node_name="n"),
        builders.pod("other", labels={"app": "other"}, node_name="n"),
        builders.pod("web", labels={"app": "web"}, affinity=_anti_to("db")),
    )
    assert counts(scheduler.schedule_pass(NOW)) == (0, 1)
    state.remove_pod("default/other")  # room came free, but not the clash
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (0, 0)
    state.remove_pod("default/db")
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=40))) == (1, 0)


def test_a_pod_wanting_a_host_port_wakes_when_its_holder_leaves() -> None:
    def ported(name: str, node_name: str = "") -> dict[str, Any]:
        container = {"name": "c", "ports": [{"containerPort": 8080, "hostPort": 80}]}
        return builders.pod(name, node_name=node_name, containers=[container])

    state, scheduler = _one_node_state(
        ported("holder", "n"), builders.pod("other", node_name="n"), ported("p")
    )
    assert counts(scheduler.schedule_pass(NOW)) == (0, 1)
    state.remove_pod("default/other")
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (0, 0)
    state.remove_pod("default/holder")
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=40))) == (1, 0)


@pytest.mark.parametrize("hints", [True, False])
def test_a_waiting_pods_own_update_brings_it_back_whichever_plugin_rejected_it(
    hints: bool,
) -> None:
    """No cluster change stands for the pod's own: a toleration added, or requests scaled
    down, retry it (upstream's UpdatePodToleration and UpdatePodScaleDown), with or without
    hints, while its twins, unchanged, keep waiting."""
    tainted = Node("tainted", {"cpu": 4000, "memory": 8 * GI, "pods": 10})
    tainted.taints = (Taint("dedicated", "x", "NoSchedule"),)
    state = ClusterState()
    state.upsert_node(tainted)
    state.upsert_node(Node("small", {"cpu": 1000, "memory": 8 * GI, "pods": 10}))
    scheduler = Scheduler(state, default_config(), queueing_hints=hints)
    for name in ("tolerant", "twin", "shrinking"):
        state.upsert_pod(pod(name, 2000))
    assert counts(scheduler.schedule_pass(NOW)) == (0, 3)
    toleration = Toleration("dedicated", "Equal", "x", "NoSchedule")
    state.upsert_pod(replace(pod("tolerant", 2000), tolerations=(toleration,)))
    state.upsert_pod(pod("shrinking", 1000))
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (2, 0)
    placed = {key: state.nodes.name(row) for key, row in state.pods.bound.items()}
    assert placed == {"ns/tolerant": "tainted", "ns/shrinking": "small"}
    assert scheduler.queue.incoming["UnschedulablePodUpdate"] == 2
    assert scheduler.queue.pending_counts()["unschedulable"] == 1  # the twin


def test_a_waiting_pods_new_condition_does_not_bring_it_back() -> None:
    state, scheduler = cluster(Node("n", {"cpu": 1000, "memory": 8 * GI, "pods": 10}))
    state.upsert_pod(pod("wide", 2000))
    assert counts(scheduler.schedule_pass(NOW)) == (0, 1)
    written = PodCondition("PodScheduled", "False", NOW, "Unschedulable", "0/1 nodes")
    state.upsert_pod(replace(pod("wide", 2000), conditions=(written,), resource_version="7"))
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (0, 0)


def test_a_nominated_pod_waits_in_a_group_of_its_own_not_behind_its_twins() -> None:
    # p2 preempts the victim and is nominated to n; p1, alike but created before it, comes
    # later and waits too. When the victim is gone, p1 goes first and fails (n's room is
    # held for p2): p2 must still be tried, not left asleep in p1's group with n empty.
    state, scheduler = cluster(Node("n", {"cpu": 2000, "memory": 8 * GI, "pods": 10}))
    created = NOW.timestamp()
    state.upsert_pod(replace(pod("victim", 2000, node="n"), priority=-1))
    state.upsert_pod(pod("p2", 2000, created=created + 2))
    assert counts(scheduler.schedule_pass(NOW)) == (0, 1)
    assert dict(state.nominations.items()) == {"ns/p2": 0}
    state.upsert_pod(pod("p1", 2000, created=created + 1))
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=1))) == (0, 1)
    state.remove_pod("ns/victim")
    binds = scheduler.schedule_pass(NOW + timedelta(seconds=20))
    assert [(d.pod, d.node) for d in binds if isinstance(d, Bind)] == [("ns/p2", "n")]
