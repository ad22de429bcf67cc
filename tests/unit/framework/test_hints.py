"""Queueing hints (framework/hints.py): which plugins have them, how a profile asks them
(each once per change for every pod that needs its answer), and the changes since the
queue's marks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from batchsched.config import default_config
from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    FilterPlugin,
    PodsHint,
    QueueingHint,
)
from batchsched.framework.runtime import Framework
from batchsched.objects.records import Node, Pod
from batchsched.plugins.registry import REGISTRY
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState

GI = 2**30
# Every plugin that can reject a pod has hints; a plugin added without them wakes its pods
# after any change (the base class's default), which is always safe. Those without are
# scores and the queue sort, which reject nothing.
WITH_HINTS = {
    "Backfill",
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
    "PodTopology",
    "PodTopologySpread",
    "PreemptionToleration",
    "Queues",
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


def test_the_plugins_with_hints() -> None:
    have = {name for name, build in REGISTRY.items() if build(None).events_to_register()}
    assert have == WITH_HINTS
    assert set(REGISTRY) - have == WITHOUT_HINTS


def test_a_plugin_without_hints_wakes_its_pods_on_any_event() -> None:
    class Strict(FilterPlugin):
        name = "Strict"

    framework = Framework(default_config().profiles[0])
    framework.hints._events["Strict"] = Strict().events_to_register()
    state = ClusterState()
    change = ClusterChange(state, frozenset({ClusterEvent.POLICY}), np.zeros(0, np.intp), None)
    rejected = [frozenset({"Strict"}), frozenset({"NodeResourcesFit"})]
    assert framework.hints.queueing_hints(change, rejected, [pod("p", 1)] * 2) == [
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
    framework.hints._events["Room"] = Room().events_to_register()
    framework.hints._events["Labels"] = Labels().events_to_register()
    events = frozenset({ClusterEvent.NODE, ClusterEvent.NODE_ROOM})
    change = ClusterChange(ClusterState(), events, np.zeros(1, np.intp), None)
    room, both = frozenset({"Room"}), frozenset({"Room", "Labels"})
    pods = [pod("a", 1), pod("b", 1), pod("c", 2), pod("d", 2)]
    found = framework.hints.queueing_hints(change, [room, both, room, both], pods)
    # b and d wake on the node event first (its hint needs no asking): only a and c are
    # asked about the room, in one call.
    assert found == [None, ClusterEvent.NODE, ClusterEvent.NODE_ROOM, ClusterEvent.NODE]
    assert asked == [["a", "c"]]


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
        assert framework.hints.queueing_hints(volumes_changed, rejected, [plain]) == [
            ClusterEvent.VOLUME
        ]
        assert framework.hints.queueing_hints(plain_left, rejected, [plain]) == [None]


@pytest.mark.parametrize("log_limit", [1000, 5])
def test_changes_since_many_marks_are_each_marks_own(
    monkeypatch: pytest.MonkeyPatch, log_limit: int
) -> None:
    """A refresh asks for the changes since many marks at once (`ClusterHints._changes`, one
    walk of the log from the newest mark back): each is what its own mark alone gives,
    rows since it sorted and distinct, every row once the log no longer reaches back."""
    monkeypatch.setattr("batchsched.state.nodes._CHANGE_LOG_LIMIT", log_limit)
    state = ClusterState()
    for i in range(6):
        state.upsert_node(Node(f"n{i}", {"cpu": 4000, "memory": 8 * GI, "pods": 110}))
    scheduler = Scheduler(state, default_config())
    marks = [scheduler.hints.marks()]
    # Rows changed between marks: some twice, some between no two marks, one mark repeated.
    for step, rows in enumerate([[3, 1], [], [1, 5, 5], [0], [4, 2, 3]]):
        for row in rows:
            state.upsert_pod(
                Pod("ns", f"p{step}-{row}-{len(marks)}", requests={"cpu": 10}, node_name=f"n{row}")
            )
            marks.append(scheduler.hints.marks())
        marks.append(scheduler.hints.marks())
    state.upsert_pod(Pod("ns", "last", requests={"cpu": 10}, node_name="n2"))
    asked = [marks[i] for i in (4, 0, 9, 4, 2, len(marks) - 1, 7)]
    reached = []
    for since, change in zip(asked, scheduler.hints._changes(asked), strict=True):
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
