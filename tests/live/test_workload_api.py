"""Upstream's Workload API PodGroups (scheduling.k8s.io) in live mode: discovery picks the
served version, members bind whole, the group's conditions and events are written to it."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.live.kinds import KINDS
from batchsched.live.snapshot import list_objects
from tests.live.conftest import Launcher, client_for, node, node_of, pod
from tests.live.fake_apiserver import UPSTREAM_ALPHA, UPSTREAM_BETA, FakeApiServer

UPSTREAM = next(k for k in KINDS if k.name == "UpstreamPodGroup")


def gang(name: str, min_count: int, version: str = "v1beta1") -> dict[str, Any]:
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def member(name: str, group: str, cpu: str = "1") -> dict[str, Any]:
    obj = pod(name, cpu=cpu)
    obj["spec"]["schedulingGroup"] = {"podGroupName": group}
    return obj


def conditions(api: FakeApiServer, store: str, name: str) -> dict[str, dict[str, Any]]:
    obj = api.get(store, name, "default") or {}
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}


def serve(api: FakeApiServer, store: str, group: dict[str, Any]) -> None:
    """A one-node (2 CPU) cluster serving upstream's PodGroups at one version, with `group`."""
    api.missing.discard(store)
    api.create("nodes", node("n1", cpu="2"))
    api.create(store, group)


def written(api: FakeApiServer, store: str, name: str, type_: str) -> dict[str, Any]:
    """The group's condition of that type, once the scheduler has written it."""
    assert api.wait_for(lambda s: type_ in conditions(s, store, name)), f"no {type_} on {name}"
    return conditions(api, store, name)[type_]


@pytest.mark.parametrize(
    ("served", "expected"),
    [
        ({UPSTREAM_ALPHA}, "scheduling.k8s.io/v1alpha2"),  # Kubernetes 1.36 with the gates
        ({UPSTREAM_ALPHA, UPSTREAM_BETA}, "scheduling.k8s.io/v1beta1"),  # the newest wins
        ({UPSTREAM_BETA}, "scheduling.k8s.io/v1beta1"),  # Kubernetes 1.37
    ],
)
def test_discovery_reads_the_served_version(
    api: FakeApiServer, served: set[str], expected: str
) -> None:
    api.missing -= served
    store = UPSTREAM_BETA if expected.endswith("v1beta1") else UPSTREAM_ALPHA
    api.create(store, gang("g", 2, expected.rsplit("/", 1)[1]))
    client = client_for(api)
    kind = UPSTREAM.served(client)
    assert kind.api_version == expected
    assert kind.path == f"/apis/{expected}/podgroups"
    [group] = list_objects(client).pod_groups
    assert (group.key, group.api_version, group.min_member) == ("default/g", expected, 2)


def test_an_api_server_without_the_workload_api_has_no_upstream_groups(
    api: FakeApiServer,
) -> None:
    objects = list_objects(client_for(api))  # neither version served (gates off)
    assert objects.pod_groups == []


def test_a_gang_binds_whole_and_its_condition_is_written(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.missing.discard(UPSTREAM_BETA)
    api.create("nodes", node("n1", cpu="2"))
    api.create("nodes", node("n2", cpu="2"))
    # Members first: they wait for their group, and are retried when it appears.
    for i in range(3):
        api.create("pods", member(f"w-{i}", "train"))
    run = launch()
    assert api.wait_for(lambda s: bool(s.get("pods", "w-0", "default")["status"].get("conditions")))  # type: ignore[index]
    assert all(node_of(api, f"w-{i}") == "" for i in range(3))
    api.create(UPSTREAM_BETA, gang("train", 3))
    assert api.wait_for(lambda s: all(node_of(s, f"w-{i}") for i in range(3)))
    cond = written(api, UPSTREAM_BETA, "train", "PodGroupInitiallyScheduled")
    assert (cond["status"], cond["reason"]) == ("True", "Scheduled")
    assert cond["lastTransitionTime"]
    assert run.halt() == 0


def test_a_gang_that_cannot_fit_gets_the_reason_and_an_event(
    api: FakeApiServer, launch: Launcher
) -> None:
    serve(api, UPSTREAM_ALPHA, gang("big", 2, "v1alpha2"))
    api.create("pods", member("b-0", "big", cpu="2"))
    api.create("pods", member("b-1", "big", cpu="2"))
    run = launch()
    cond = written(api, UPSTREAM_ALPHA, "big", "PodGroupScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert "1/2 members can run" in cond["message"]
    assert node_of(api, "b-0") == node_of(api, "b-1") == ""  # nothing bound below minCount
    run.scheduler.actuator.wait()
    assert api.wait_for(
        lambda s: any(e["regarding"]["kind"] == "PodGroup" for e in s.objects("events"))
    )
    [event] = [e for e in api.objects("events") if e["regarding"]["kind"] == "PodGroup"]
    assert event["regarding"]["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert event["regarding"]["name"] == "big"
    assert run.halt() == 0


def test_a_group_preempted_whole_is_marked_as_the_disruption_target(
    api: FakeApiServer, launch: Launcher
) -> None:
    low = gang("low", 1)
    low["spec"]["disruptionMode"] = {"all": {}}
    serve(api, UPSTREAM_BETA, low)
    running = member("m-0", "low", cpu="2")
    running["spec"].update(nodeName="n1", priority=0)
    api.create("pods", running)
    run = launch()
    urgent = pod("urgent", cpu="2", priority=1000)
    api.create("pods", urgent)
    target = written(api, UPSTREAM_BETA, "low", "DisruptionTarget")
    assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
    assert "preempted by default/urgent" in target["message"]
    assert run.halt() == 0
