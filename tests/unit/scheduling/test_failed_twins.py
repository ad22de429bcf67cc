"""A pod identical to one that failed, against the same state, is told the same without a
new search, in that pass or a later one; any change to the state ends that, and so does the
clock reaching the time a rule that reads it said its answer may change (a toleration)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from batchsched.config import default_config
from batchsched.decisions import Evict, Unschedulable
from batchsched.framework.runtime import Framework
from batchsched.objects.records import Node, Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.conftest import NOW
from tests.preemption_world import node, priority_class, state_of
from tests.preemption_world import pod as world_pod

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


def too_big_for_the_node(twins: int) -> ClusterState:
    """One node of 1 CPU and `twins` pending pods of 2 CPUs each (big-0, big-1, ...)."""
    state = ClusterState()
    state.upsert_node(Node("n1", {"cpu": 1000, "memory": 8 * GI, "pods": 10}))
    for i in range(twins):
        state.upsert_pod(pod(f"big-{i}", 2000, 0, created=i))
    return state


def test_twins_of_a_failed_pod_get_its_message_without_a_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = too_big_for_the_node(5)
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


def test_a_failure_is_kept_into_later_passes_while_the_cluster_stands_still(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = too_big_for_the_node(3)
    calls = counting_place(monkeypatch)
    scheduler = Scheduler(state, default_config())
    scheduler.schedule_pass(NOW)
    scheduler.queue.flush()
    later = scheduler.schedule_pass(NOW + timedelta(hours=1))
    assert calls == ["big-0"]
    assert {d.pod for d in later if isinstance(d, Unschedulable)} == {
        "ns/big-0",
        "ns/big-1",
        "ns/big-2",
    }
    scheduler.queue.flush()
    # A clock gone back before the attempt: what held from then on need not hold before.
    scheduler.schedule_pass(NOW - timedelta(minutes=1))
    assert calls == ["big-0", "big-0"]
    state.upsert_pod(pod("small", 100, 0, created=9, node="n1"))  # room on n1 changed
    scheduler.queue.flush()
    scheduler.schedule_pass(NOW + timedelta(hours=2))
    assert calls == ["big-0", "big-0", "big-0"]


def test_a_kept_failure_ends_when_the_toleration_it_relied_on_runs_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guarded = priority_class("guarded", 8000, "10000", "600")
    state = state_of(
        node("n1"),
        priority_class("high", 9000),
        guarded,
        world_pod("victim", 4000, on="n1", klass="guarded", scheduled=timedelta(minutes=5)),
        world_pod("p1", 4000, klass="high"),
        world_pod("p2", 4000, klass="high"),
    )
    calls = counting_place(monkeypatch)
    scheduler = Scheduler(state, default_config())
    assert not any(isinstance(d, Evict) for d in scheduler.schedule_pass(NOW))
    scheduler.queue.flush()
    # Still protected (its 10 minutes end at NOW + 5 min): the kept answer holds.
    assert not any(
        isinstance(d, Evict) for d in scheduler.schedule_pass(NOW + timedelta(minutes=4))
    )
    assert calls == ["p1"]
    scheduler.queue.flush()
    later = scheduler.schedule_pass(NOW + timedelta(minutes=5))
    assert [d.pod for d in later if isinstance(d, Evict)] == ["default/victim"]
    assert calls == ["p1", "p1", "p2"]  # p2 sees the eviction and p1's nomination


def test_whether_a_pod_failed_as_is_is_its_own_answer_not_the_last_failures() -> None:
    # big-0 fails; the cluster moves (a node too small for either arrives), so its failure is
    # forgotten; huge then fails in the new state. Asked about big-0 (the queue asks about
    # the pod it just tried), the scheduler must judge big-0 itself, not reuse what huge's
    # failure was remembered under.
    state = too_big_for_the_node(1)
    scheduler = Scheduler(state, default_config())
    scheduler.schedule_pass(NOW)
    assert scheduler.failed_as_is("ns/big-0")
    state.upsert_node(Node("n2", {"cpu": 1000, "memory": 8 * GI, "pods": 10}))
    state.upsert_pod(pod("huge", 3000, 0, created=5))
    decisions = scheduler.schedule_pass(NOW)
    assert [d.pod for d in decisions if isinstance(d, Unschedulable)] == ["ns/huge"]
    assert scheduler.failed_as_is("ns/huge")
    assert not scheduler.failed_as_is("ns/big-0")
