"""An attempt that raises is one pod's failure, not the pass's: the others are decided."""

from __future__ import annotations

from datetime import timedelta

import pytest

from batchsched.decisions import Bind, InternalError, Unschedulable
from batchsched.objects.records import Node, Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod
from tests.conftest import NOW, schedule
from tests.faults import exploding_for

GI = 2**30


def test_the_pass_goes_on_and_the_faulty_pod_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    config = exploding_for(monkeypatch, "bad")
    result = schedule(
        node("n1", cpu="4"),
        pod("a", cpu="1"),
        pod("bad", cpu="1"),
        pod("z", cpu="1"),
        config=config,
    )
    assert sorted(b.pod for b in result.bindings) == ["default/a", "default/z"]
    assert result.to_json()["unschedulable"] == [
        {"pod": "default/bad", "message": "internal error: RuntimeError: boom for bad"}
    ]


def test_the_faulty_pod_backs_off_and_is_retried_without_a_cluster_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {"cpu": 4, "memory": 8 * GI, "pods": 10}))
    for name in ("a", "bad"):
        state.upsert_pod(Pod("ns", name, requests={"cpu": 1}, scheduler_name="batchsched"))
    scheduler = Scheduler(state, exploding_for(monkeypatch, "bad"))
    decisions = scheduler.schedule_pass(NOW)
    assert Bind("ns/a", "n1") in decisions
    errors = [d for d in decisions if isinstance(d, InternalError)]
    assert [(e.pod, e.error) for e in errors] == [("ns/bad", "RuntimeError: boom for bad")]
    assert "Traceback" in errors[0].detail and "boom for bad" in errors[0].detail
    assert Unschedulable("ns/bad", "internal error: RuntimeError: boom for bad") in decisions
    # Backing off: not tried again at once, but after the initial backoff (1 s) although
    # nothing in the cluster moved.
    assert scheduler.schedule_pass(NOW + timedelta(milliseconds=500)) == []
    again = scheduler.schedule_pass(NOW + timedelta(seconds=1))
    assert [d.pod for d in again if isinstance(d, InternalError)] == ["ns/bad"]
