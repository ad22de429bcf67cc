"""Within a pass, a pod identical to one that just failed, against the same state, is told
the same without a new search; any change to the state ends that."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.config import default_config
from batchsched.decisions import Evict, Unschedulable
from batchsched.framework import Framework
from batchsched.objects.records import Node, Pod
from batchsched.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.conftest import NOW

GI = 2**30


def pod(name: str, cpu: int, priority: int, created: float, node: str = "") -> Pod:
    from datetime import UTC, datetime

    return Pod(
        "ns",
        name,
        requests={"cpu": cpu, "memory": GI, "pods": 1},
        priority=priority,
        node_name=node,
        scheduler_name="batchsched",
        creation_timestamp=datetime.fromtimestamp(created, UTC),
    )


def counting_place(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = Framework.place

    def place(self: Framework, cycle: Any, allowed: Any = None) -> Any:
        calls.append(cycle.pod.name)
        return original(self, cycle, allowed)

    monkeypatch.setattr(Framework, "place", place)
    return calls


def test_twins_of_a_failed_pod_get_its_message_without_a_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {"cpu": 1000, "memory": 8 * GI, "pods": 10}))
    for i in range(5):
        state.upsert_pod(pod(f"big-{i}", 2000, 0, created=i))
    calls = counting_place(monkeypatch)
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    messages = {d.pod: d.message for d in decisions if isinstance(d, Unschedulable)}
    assert calls == ["big-0"]
    assert len(messages) == 5 and len(set(messages.values())) == 1
    assert "1 Insufficient cpu" in messages["ns/big-0"]


def test_a_change_in_the_pass_sends_the_next_twin_through_a_full_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {"cpu": 2000, "memory": 8 * GI, "pods": 10}))
    state.upsert_pod(pod("victim", 2000, 1, created=0, node="n1"))
    # Queue order: twin-a (fails: the node is too small even without the victim), then the
    # preemptor (evicts the victim), then twin-b, which must see the changed state.
    state.upsert_pod(pod("twin-a", 3000, 5, created=1))
    state.upsert_pod(pod("preemptor", 2000, 5, created=2))
    state.upsert_pod(pod("twin-b", 3000, 5, created=3))
    state.upsert_pod(pod("twin-c", 3000, 5, created=4))
    calls = counting_place(monkeypatch)
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    assert [d.pod for d in decisions if isinstance(d, Evict)] == ["ns/victim"]
    assert calls == ["twin-a", "preemptor", "twin-b"]  # twin-c reuses twin-b's answer
