"""Live mode's history: each pod's last events (a repeat kept once), bounded, and the last
preemptions newest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from batchsched.decisions import Bind, Evict, Nominate, Unschedulable
from batchsched.state.cluster import ClusterState
from batchsched.ui.history import History

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_events_per_pod_in_order_a_repeat_once() -> None:
    history = History()
    state = ClusterState()
    history.record([Unschedulable("a/p", "0/3 nodes are available")], state, T0)
    later = T0 + timedelta(seconds=5)
    history.record([Unschedulable("a/p", "0/3 nodes are available")], state, later)
    history.record([Nominate("a/p", "n1"), Nominate("a/p", None)], state, later)
    history.record([Bind("a/p", "n1")], state, later)
    events = history.events()["a/p"]
    assert [(e.at, e.reason) for e in events] == [
        (T0, "FailedScheduling"), (later, "Nominated"), (later, "Scheduled")
    ]  # fmt: skip
    assert events[-1].message == "Successfully assigned a/p to n1"


def test_history_is_bounded() -> None:
    history = History(events_per_pod=2, pods_kept=2, preemptions_kept=2)
    state = ClusterState()
    for i in range(3):
        history.record([Unschedulable("a/p", f"try {i}")], state, T0)
        history.record([Evict(f"a/v{i}", "n1", "a/p", "rule")], state, T0)
    assert [e.message for e in history.events()["a/p"]] == ["try 1", "try 2"]
    assert set(history.events()) == {"a/p", "a/v2"}  # the oldest pods forgotten first
    assert [p.victim for p in history.preemptions()] == ["a/v2", "a/v1"]


def test_a_reclaim_names_both_queues_from_the_decision() -> None:
    history = History()
    evict = Evict("b/v", "n1", "a/p", "reclaim: queue a takes back from b", reclaim=("qa", "qb"))
    history.record([evict], ClusterState(), T0)
    (p,) = history.preemptions()
    assert (p.reclaim, p.preemptor_queue, p.victim_queue) == (True, "qa", "qb")
    assert history.events()["b/v"][0].reason == "Reclaimed"
