"""The refusal guard, scheduling gates and deleting pods in the live loop."""

from __future__ import annotations

from typing import Any

from tests.live.conftest import Launcher, condition, node, node_of, pod
from tests.live.fake_apiserver import FakeApiServer


def _events_for(api: FakeApiServer, name: str) -> list[dict[str, Any]]:
    return [e for e in api.objects("events") if e["regarding"]["name"] == name]


def test_refused_pods_stay_pending_with_the_field_named(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1", cpu="4"))
    refused = pod("refused", cpu="1")
    refused["spec"]["workloadRef"] = {"name": "training", "podGroup": "workers"}
    api.create("pods", refused)
    api.create("pods", pod("plain", cpu="1"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "plain") == "n1")
    assert api.wait_for(lambda s: condition(s, "refused") is not None)
    run.scheduler.actuator.wait()
    cond = condition(api, "refused")
    assert cond is not None and cond["reason"] == "Unschedulable"
    assert cond["message"] == "pod uses spec.workloadRef, which batchsched does not support yet"
    events = _events_for(api, "refused")
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "FailedScheduling")]
    assert "does not support yet" in events[0]["note"]
    assert node_of(api, "refused") == ""
    assert run.halt() == 0


def test_gated_and_deleting_pods_are_not_attempted(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1", cpu="4"))
    gated = pod("gated", cpu="1")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    api.create("pods", gated)
    api.create("pods", pod("leaving", cpu="1", deletionTimestamp="2026-11-22T09:00:00Z"))
    api.create("pods", pod("plain", cpu="1"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "plain") == "n1")
    run.scheduler.actuator.wait()
    # Neither was attempted: no binding, no condition written, no event.
    for name in ("gated", "leaving"):
        assert node_of(api, name) == "" and condition(api, name) is None
        assert _events_for(api, name) == []
    # Once its gates are removed, the pod is scheduled.
    released = api.get("pods", "gated")
    assert released is not None
    released["spec"]["schedulingGates"] = []
    api.update("pods", released)
    assert api.wait_for(lambda s: node_of(s, "gated") == "n1")
    assert node_of(api, "leaving") == ""
    assert run.halt() == 0
