"""Queueing hints: which plugins have them, what each says, and how the queue uses them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.decisions import Bind, Decision, Unschedulable
from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    FilterPlugin,
    PodsHint,
    QueueingHint,
)
from batchsched.framework.runtime import Framework
from batchsched.objects.records import Node, Pod, PodCondition, Taint, Toleration
from batchsched.plugins.registry import REGISTRY
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests import builders
from tests.conftest import NOW, objects_of

GI = 2**30
# Every plugin that can reject a pod has hints; a plugin added without them wakes its pods
# after any change (the base class's default), which is always safe. Those without are
# scores and the queue sort, which reject nothing.
WITH_HINTS = {
    "Coscheduling",
    "DaemonSetPreemption",
    "DefaultPreemption",
    "DynamicResources",
    "InterPodAffinity",
    "NodeAffinity",
    "NodeName",
    "NodePorts",
    "NodeResourcesFit",
    "NodeUnschedulable",
    "NodeVolumeLimits",
    "PodTopologySpread",
    "PreemptionToleration",
    "TaintToleration",
    "VolumeBinding",
    "VolumeRestrictions",
    "VolumeZone",
}
WITHOUT_HINTS = {"ImageLocality", "NodeResourcesBalancedAllocation", "PrioritySort"}


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


def test_the_plugins_with_hints() -> None:
    have = {name for name, build in REGISTRY.items() if build(None).events_to_register()}
    assert have == WITH_HINTS
    assert set(REGISTRY) - have == WITHOUT_HINTS


def test_a_plugin_without_hints_wakes_its_pods_on_any_event() -> None:
    class Strict(FilterPlugin):
        name = "Strict"

    framework = Framework(default_config().profiles[0])
    framework._events["Strict"] = Strict().events_to_register()
    state = ClusterState()
    change = ClusterChange(state, frozenset({ClusterEvent.POLICY}), np.zeros(0, np.intp), None)
    rejected = [frozenset({"Strict"}), frozenset({"NodeResourcesFit"})]
    assert framework.queueing_hints(change, rejected, [pod("p", 1)] * 2) == [
        ClusterEvent.POLICY,
        None,
    ]


def test_each_hint_is_asked_once_per_change_for_every_pod_that_needs_its_answer() -> None:
    asked: list[list[str]] = []

    def fits_wide(change: ClusterChange, pods: Sequence[Pod]) -> list[bool]:
        asked.append([p.name for p in pods])
        return [p.requests["cpu"] > 1 for p in pods]

    class Room(FilterPlugin):
        name = "Room"

        def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
            return {ClusterEvent.NODE_ROOM: PodsHint(fits_wide)}

    class Labels(FilterPlugin):
        name = "Labels"

        def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
            return {ClusterEvent.NODE: None}

    framework = Framework(default_config().profiles[0])
    framework._events["Room"] = Room().events_to_register()
    framework._events["Labels"] = Labels().events_to_register()
    events = frozenset({ClusterEvent.NODE, ClusterEvent.NODE_ROOM})
    change = ClusterChange(ClusterState(), events, np.zeros(1, np.intp), None)
    room, both = frozenset({"Room"}), frozenset({"Room", "Labels"})
    pods = [pod("a", 1), pod("b", 1), pod("c", 2), pod("d", 2)]
    found = framework.queueing_hints(change, [room, both, room, both], pods)
    # b and d wake on the node event first (its hint needs no asking): only a and c are
    # asked about the room, in one call.
    assert found == [None, ClusterEvent.NODE, ClusterEvent.NODE_ROOM, ClusterEvent.NODE]
    assert asked == [["a", "c"]]


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
    state.upsert_pod(pod("wide", 3000))
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
    state, scheduler = cluster(Node("n", {"cpu": 2000, "memory": 8 * GI, "pods": 10}))
    state.upsert_pod(pod("running", 2000, node="n"))
    for i in range(10):
        state.upsert_pod(pod(f"p{i}", 1000, created=i))
    assert counts(scheduler.schedule_pass(NOW)) == (0, 10)
    state.remove_pod("ns/running")
    # Two fit: the third fails and nothing moves after it, so the seven behind it are told
    # nothing new and are not tried (without hints, all ten would be).
    assert counts(scheduler.schedule_pass(NOW + timedelta(seconds=20))) == (2, 1)
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


def test_the_volume_plugins_wake_on_volume_objects_and_pods_with_volumes() -> None:
    state = ClusterState()
    state.upsert_node(Node("n", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    plain = pod("plain", 1)
    rows = np.zeros(1, np.intp)
    mark = state.nodes.change_mark()
    volumes_changed = ClusterChange(state, frozenset({ClusterEvent.VOLUME}), rows, mark)
    state.upsert_pod(pod("gone", 1, node="n"))  # a pod without volumes came and went
    state.remove_pod("ns/gone")
    plain_left = ClusterChange(state, frozenset({ClusterEvent.NODE_ROOM}), rows, mark)
    for name in ("VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits"):
        framework = Framework(default_config().profiles[0])
        rejected = [frozenset({name})]
        assert framework.queueing_hints(volumes_changed, rejected, [plain]) == [ClusterEvent.VOLUME]
        assert framework.queueing_hints(plain_left, rejected, [plain]) == [None]


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


@pytest.mark.parametrize("log_limit", [1000, 5])
def test_changes_since_many_marks_are_each_marks_own(
    monkeypatch: pytest.MonkeyPatch, log_limit: int
) -> None:
    """A refresh asks for the changes since many marks at once (`Scheduler._changes`, one
    walk of the log from the newest mark back): each is what its own mark alone gives,
    rows since it sorted and distinct, every row once the log no longer reaches back."""
    monkeypatch.setattr("batchsched.state.nodes._CHANGE_LOG_LIMIT", log_limit)
    state = ClusterState()
    for i in range(6):
        state.upsert_node(Node(f"n{i}", {"cpu": 4000, "memory": 8 * GI, "pods": 110}))
    scheduler = Scheduler(state, default_config())
    marks = [scheduler.marks()]
    # Rows changed between marks: some twice, some between no two marks, one mark repeated.
    for step, rows in enumerate([[3, 1], [], [1, 5, 5], [0], [4, 2, 3]]):
        for row in rows:
            state.upsert_pod(
                Pod("ns", f"p{step}-{row}-{len(marks)}", requests={"cpu": 10}, node_name=f"n{row}")
            )
            marks.append(scheduler.marks())
        marks.append(scheduler.marks())
    state.upsert_pod(Pod("ns", "last", requests={"cpu": 10}, node_name="n2"))
    asked = [marks[i] for i in (4, 0, 9, 4, 2, len(marks) - 1, 7)]
    reached = []
    for since, change in zip(asked, scheduler._changes(asked), strict=True):
        logged = state.nodes.rows_changed_since(since.rows)
        reached.append(logged is not None)
        if logged is None:
            assert change.rows.tolist() == list(range(6)) and change.mark is None
        else:
            assert change.rows.tolist() == sorted(set(logged)) and change.mark == since.rows
        assert change.rows.dtype == np.intp
        assert (ClusterEvent.NODE_ROOM in change.events) == bool(change.rows.shape[0])
        assert (ClusterEvent.ANY in change.events) == (since.generation != state.generation)
    # The short log reaches back to some of the marks only.
    assert all(reached) == (log_limit > 5) and any(reached)
