"""The full live loop against the fake API server: facts in, writes out."""

from __future__ import annotations

from tests.live.conftest import Launcher, node, node_of, pod
from tests.live.fake_apiserver import FakeApiServer


def test_pending_pods_are_bound_and_reported(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1", cpu="2"))
    api.create("nodes", node("n2", cpu="2"))
    for i in range(3):
        api.create("pods", pod(f"p{i}", cpu="1"))
    run = launch()
    assert api.wait_for(lambda s: all(node_of(s, f"p{i}") for i in range(3)))
    # A pod created while running is bound too; one that cannot fit gets the condition.
    api.create("pods", pod("p3", cpu="1"))
    api.create("pods", pod("huge", cpu="64"))
    assert api.wait_for(lambda s: node_of(s, "p3") != "")
    assert api.wait_for(lambda s: _condition(s, "huge") is not None)
    cond = _condition(api, "huge")
    assert cond is not None
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert "0/2 nodes are available" in cond["message"]
    run.scheduler.actuator.wait()
    reasons = sorted(e["reason"] for e in api.objects("events"))
    assert reasons.count("Scheduled") == 4
    assert reasons.count("FailedScheduling") == 1
    # Never over-committed: 2 CPUs per node, 1 CPU per pod.
    placed = [node_of(api, f"p{i}") for i in range(4)]
    assert sorted(placed) == ["n1", "n1", "n2", "n2"]
    assert run.halt() == 0


def _condition(api: FakeApiServer, name: str) -> dict[str, str] | None:
    obj = api.get("pods", name)
    for cond in (obj or {}).get("status", {}).get("conditions", []):
        if cond["type"] == "PodScheduled":
            return dict(cond)
    return None
