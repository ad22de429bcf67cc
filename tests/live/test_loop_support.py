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
    api.create(
        "deviceclasses",
        {
            "metadata": {"name": "gpu.example.com"},
            "spec": {"extendedResourceName": "example.com/gpu"},
        },
    )
    anti = pod("anti", cpu="1")
    anti["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
    api.create("pods", anti)
    dra = pod("dra", cpu="1")
    dra["spec"]["containers"][0]["resources"]["limits"] = {"example.com/gpu": "1"}
    api.create("pods", dra)
    api.create("pods", pod("plain", cpu="1"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "plain") == "n1")
    assert api.wait_for(lambda s: condition(s, "anti") is not None)
    assert api.wait_for(lambda s: condition(s, "dra") is not None)
    run.scheduler.actuator.wait()
    cond = condition(api, "anti")
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable"
    # Claims are allocated by `schedule` only: live mode has no PreBind to write them.
    assert cond["message"] == (
        "pod uses spec.resourceClaims (allocated by `batchsched schedule` with the "
        "DynamicResources plugin only; live mode cannot write claim status yet), which "
        "batchsched does not support yet"
    )
    dra_cond = condition(api, "dra")
    assert dra_cond is not None and "DeviceClass gpu.example.com" in dra_cond["message"]
    for name in ("anti", "dra"):
        events = _events_for(api, name)
        assert [(e["type"], e["reason"]) for e in events] == [("Warning", "FailedScheduling")]
        assert "does not support yet" in events[0]["note"]
        assert node_of(api, name) == ""
    # The mapping goes with its DeviceClass: the pod is then counted as usual, and fits.
    api.delete("deviceclasses", "gpu.example.com")
    api.update(
        "nodes",
        node("n1", cpu="4")
        | {
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/gpu": "1"}
            }
        },
    )
    assert api.wait_for(lambda s: node_of(s, "dra") == "n1")
    assert node_of(api, "anti") == ""
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
