"""The full loop carrying out preemption (with toleration) and gang scheduling."""

from __future__ import annotations

from typing import Any

import yaml

from tests.live.conftest import Launcher, condition, node, node_of, pod
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer
from tests.live.test_deploy import DEPLOY

EXAMPLE_CLASSES = DEPLOY / "examples" / "priorityclasses" / "priorityclasses.yaml"
PROTECTED = "batchsched-low-non-preempted"


def _classes(api: FakeApiServer) -> None:
    for doc in yaml.safe_load_all(EXAMPLE_CLASSES.read_text()):
        api.create("priorityclasses", doc)


def _classed(name: str, cls: str, value: int, cpu: str, **kwargs: Any) -> dict[str, Any]:
    obj = pod(name, cpu=cpu, priority=value, **kwargs)
    obj["spec"]["priorityClassName"] = cls  # admission would have set spec.priority too
    return obj


def test_a_high_pod_preempts_a_low_one_and_binds_once_it_is_gone(
    api: FakeApiServer, launch: Launcher
) -> None:
    _classes(api)
    api.create("nodes", node("n1", cpu="2"))
    api.create("pods", _classed("low", "batchsched-low", 8000, "2", node_name="n1"))
    api.create("pods", _classed("protected", PROTECTED, 8000, "0", node_name="n1"))
    run = launch()
    assert run.scheduler.synced.wait(WAIT_SECONDS)
    api.create("pods", _classed("high", "batchsched-high", 9000, "2"))
    assert api.wait_for(lambda s: node_of(s, "high") == "n1")
    assert api.get("pods", "low") is None
    assert api.get("pods", "protected") is not None  # tolerates `high` forever
    run.scheduler.actuator.wait()
    [event] = [e for e in api.objects("events") if e["reason"] == "Preempted"]
    assert event["regarding"]["name"] == "low"
    assert "default/high" in event["note"]
    deletes = [r for r in api.requests if r[0] == "DELETE"]
    assert deletes == [("DELETE", "/api/v1/namespaces/default/pods/low")]
    victims = run.scheduler.metrics.registry.get_sample_value("batchsched_preemption_victims_total")
    assert victims == 1


def test_a_tolerated_pod_is_not_preempted_and_the_preemptor_is_told(
    api: FakeApiServer, launch: Launcher
) -> None:
    _classes(api)
    api.create("nodes", node("n1", cpu="2"))
    api.create("pods", _classed("sticky", PROTECTED, 8000, "2", node_name="n1"))
    launch()
    api.create("pods", _classed("high", "batchsched-high", 9000, "2"))
    assert api.wait_for(lambda s: condition(s, "high", "PodScheduled") is not None)
    assert api.get("pods", "sticky") is not None
    assert node_of(api, "high") == ""


def _member(name: str, group: str, cpu: str) -> dict[str, Any]:
    return pod(name, cpu=cpu, labels={"scheduling.x-k8s.io/pod-group": group})


def test_a_gang_binds_whole_or_not_at_all(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1", cpu="2"))
    api.create(
        "podgroups", {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 3}}
    )
    for i in range(3):
        api.create("pods", _member(f"job-{i}", "job", "1"))
    run = launch()
    # Room for two of three: none binds, each member says why, the group's status is written.
    assert api.wait_for(lambda s: all(condition(s, f"job-{i}", "PodScheduled") for i in range(3)))
    assert [node_of(api, f"job-{i}") for i in range(3)] == ["", "", ""]
    assert api.wait_for(
        lambda s: (s.get("podgroups", "job") or {}).get("status", {}).get("phase") == "Scheduling"
    )
    api.create("nodes", node("n2", cpu="2"))
    assert api.wait_for(lambda s: all(node_of(s, f"job-{i}") for i in range(3)))
    assert api.wait_for(
        lambda s: (s.get("podgroups", "job") or {}).get("status", {}).get("admitted") == 3
    )
    gang = run.scheduler.metrics.registry.get_sample_value
    assert gang("batchsched_gang_attempts_total", {"result": "scheduled"}) == 3


def test_the_built_in_classes_exist_without_their_objects(
    api: FakeApiServer, launch: Launcher
) -> None:
    # The server lists no PriorityClass: a victim naming a class that is missing would make
    # its node unusable for preemption, but the API server's own classes always exist.
    api.create("nodes", node("n1", cpu="2"))
    dns = _classed("dns", "system-cluster-critical", 2_000_000_000, "2", node_name="n1")
    api.create("pods", dns)
    run = launch()
    assert run.scheduler.synced.wait(WAIT_SECONDS)
    api.create("pods", _classed("proxy", "system-node-critical", 2_000_001_000, "2"))
    assert api.wait_for(lambda s: node_of(s, "proxy") == "n1")
    assert api.get("pods", "dns") is None
    assert run.halt() == 0
