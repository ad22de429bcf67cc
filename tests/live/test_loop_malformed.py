"""Malformed objects in the live loop: reported on the object, and everything else flows."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.config import parse_config
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API
from tests.live.conftest import FAST_LEASE, Launcher, condition, config, node, node_of, pod
from tests.live.fake_apiserver import UPSTREAM_BETA, WAIT_SECONDS, FakeApiServer


def _events(api: FakeApiServer, kind: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in api.objects("events")
        if e["regarding"]["kind"] == kind and e["regarding"]["name"] == name
    ]


def test_malformed_objects_get_events_and_pods_a_condition(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1", cpu="8"))
    api.create("priorityclasses", {"metadata": {"name": "huge"}, "value": 2**40})
    api.create("pods", pod("greedy", cpu="1e20"))
    api.create("pods", pod("foreign", cpu="1e20", scheduler="default-scheduler"))
    # Admission resolved its priority when it was created; the class is only read for policy.
    classy = pod("classy", priority=1000)
    classy["spec"]["priorityClassName"] = "huge"
    api.create("pods", classy)
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "classy") == "n1")
    assert api.wait_for(lambda s: condition(s, "greedy") is not None)
    api.create("pods", pod("later", cpu="1"))
    assert api.wait_for(lambda s: node_of(s, "later") == "n1")
    run.scheduler.actuator.wait()

    cond = condition(api, "greedy")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == (
        "batchsched cannot read this pod and does not schedule it: "
        "spec.containers[0].resources.requests.cpu: '1e20' is too large "
        "(at most 9223372036854775807 millicores, a signed 64-bit integer)"
    )
    assert node_of(api, "greedy") == ""
    # One event per object version: the condition written (a new version) and the re-reads
    # it causes add no event.
    [event] = _events(api, "Pod", "greedy")
    assert (event["type"], event["reason"], event["note"]) == (
        "Warning",
        "MalformedObject",
        cond["message"],
    )
    assert event["regarding"]["namespace"] == "default"
    assert event["regarding"]["uid"] == api.get("pods", "greedy")["metadata"]["uid"]

    # Another scheduler's pod: told by an event, its condition left to its scheduler.
    assert condition(api, "foreign") is None
    [foreign] = _events(api, "Pod", "foreign")
    assert foreign["note"].startswith("batchsched ignores it: spec.containers[0]")

    [pc_event] = _events(api, "PriorityClass", "huge")
    assert pc_event["regarding"]["apiVersion"] == "scheduling.k8s.io/v1"
    assert "namespace" not in pc_event["regarding"]
    assert pc_event["note"] == (
        "batchsched ignores it: value: must be at most 2147483647 (a 32-bit integer), "
        "got 1099511627776"
    )
    assert run.halt() == 0


def test_a_fixed_object_is_read_again(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1", cpu="4"))
    api.create("pods", pod("typo", cpu="100000Ei"))
    run = launch()
    assert api.wait_for(lambda s: condition(s, "typo") is not None)
    api.update("pods", pod("typo", cpu="1") | {"status": api.get("pods", "typo")["status"]})
    assert api.wait_for(lambda s: node_of(s, "typo") == "n1")
    assert run.halt() == 0


def test_a_standby_reports_what_it_saw_once_it_leads(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1"))
    cfg = parse_config({"leaderElection": FAST_LEASE})
    a = launch(cfg, identity="a")
    assert api.wait_for(lambda s: a.scheduler.is_leading())
    b = launch(cfg, identity="b")
    assert b.scheduler.synced.wait(WAIT_SECONDS)
    api.create("pods", pod("bad", cpu="100000Ei"))

    def reporters(s: FakeApiServer) -> set[str]:
        return {e["reportingInstance"] for e in _events(s, "Pod", "bad")}

    assert api.wait_for(lambda s: reporters(s) == {"a"})
    assert a.halt() == 0  # releases the lease
    assert api.wait_for(lambda s: reporters(s) == {"a", "b"})
    api.create("pods", pod("good"))
    assert api.wait_for(lambda s: node_of(s, "good") == "n1")


def test_a_malformed_upstream_pod_group_is_named_at_its_served_version(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.missing.discard(UPSTREAM_BETA)
    api.create("nodes", node("n1"))
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2**40}}},
    }
    api.create(UPSTREAM_BETA, group)
    run = launch()
    assert api.wait_for(lambda s: bool(_events(s, "PodGroup", "train")))
    [event] = _events(api, "PodGroup", "train")
    assert event["regarding"]["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert "minCount: must be at most 2147483647" in event["note"]
    api.create("pods", pod("solo"))
    assert api.wait_for(lambda s: node_of(s, "solo") == "n1")
    assert run.halt() == 0


def test_a_bad_stated_runtime_keeps_the_pod_counted_and_pending_with_why(
    api: FakeApiServer, launch: Launcher
) -> None:
    """An annotation or label the API server does not validate: a running pod stating a bad
    runtime still holds its room (dropping it would over-commit its node); a pending one
    stays pending with the error as its message (docs/backfill.md#stated-runtimes)."""
    api.create("nodes", node("n1", cpu="4"))
    running = pod(
        "busy",
        cpu="4",
        node_name="n1",
        annotations={"batchsched.io/max-runtime": "soon"},
    )
    running["status"] = {"phase": "Running", "startTime": "2026-11-22T09:00:00Z"}
    api.create("pods", running)
    api.create("pods", pod("typo", labels={"kueue.x-k8s.io/max-exec-time-seconds": "abc"}))
    run = launch()
    assert api.wait_for(lambda s: condition(s, "typo") is not None)
    api.create("pods", pod("later", cpu="1"))
    assert api.wait_for(lambda s: condition(s, "later") is not None)
    run.scheduler.actuator.wait()
    assert node_of(api, "later") == ""
    assert "Insufficient cpu" in (condition(api, "later") or {})["message"]
    cond = condition(api, "typo")
    assert cond is not None and node_of(api, "typo") == ""
    assert cond["message"] == (
        "Pod default/typo: metadata.labels.kueue.x-k8s.io/max-exec-time-seconds: "
        "'abc' is not a whole number of seconds (e.g. 3600)"
    )
    assert run.halt() == 0


@pytest.mark.parametrize("upstream", [False, True], ids=["crd", "workload-api"])
def test_members_of_a_malformed_pod_group_are_told_why_until_it_is_fixed(
    api: FakeApiServer, launch: Launcher, upstream: bool
) -> None:
    """A PodGroup that exists but cannot be read is not one "to be created": its members'
    condition names it, the field and what is allowed; fixed by an update, they schedule."""
    api.create("nodes", node("n1", cpu="4"))
    if upstream:
        api.missing.discard(UPSTREAM_BETA)
        store, field = UPSTREAM_BETA, "spec.schedulingPolicy.gang.minCount"
        bad: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}},
        }
        fixed = {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
    else:
        store, field = "podgroups", "spec.minMember"
        bad = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"minMember": -1},
        }
        fixed = {"spec": {"minMember": 2}}
    api.create(store, bad)
    for name in ("m1", "m2"):
        member = pod(name)
        if upstream:
            member["spec"]["schedulingGroup"] = {"podGroupName": "train"}
        else:
            member["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "train"}
        api.create("pods", member)
    run = launch()
    assert api.wait_for(lambda s: condition(s, "m1") is not None)
    run.scheduler.actuator.wait()
    cond = condition(api, "m1")
    assert cond is not None and node_of(api, "m1") == ""
    assert cond["message"].startswith(f"PodGroup default/train: cannot be read: {field}: ")
    assert "must be at least 1, got " in cond["message"]
    assert "does not exist" not in cond["message"]
    api.update(store, api.get(store, "train", "default") | fixed)
    assert api.wait_for(lambda s: node_of(s, "m1") == node_of(s, "m2") == "n1")
    assert run.halt() == 0


def test_a_running_pod_or_pod_group_stating_a_bad_runtime_gets_one_warning_per_value(
    api: FakeApiServer, launch: Launcher
) -> None:
    """Nothing keeps them pending to say so: a Warning event names the field and what is
    allowed, once per object and value, not at every pass (docs/backfill.md#stated-runtimes)."""
    api.create("nodes", node("n1", cpu="4"))
    soon = pod("soon", node_name="n1", annotations={"batchsched.io/max-runtime": "soon"})
    minus = pod("minus", node_name="n1", labels={"kueue.x-k8s.io/max-exec-time-seconds": "-5"})
    for running in (soon, minus):
        running["status"] = {"phase": "Running", "startTime": "2026-11-22T09:00:00Z"}
        api.create("pods", running)
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "metadata": {
            "name": "train",
            "namespace": "default",
            "annotations": {"batchsched.io/max-runtime": "0s"},
        },
        "spec": {"minMember": 1},
    }
    api.create("podgroups", group)
    run = launch(config(podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.1))

    def reasons(name: str, kind: str = "Pod") -> list[tuple[str, str, str]]:
        return [(e["type"], e["reason"], e["note"]) for e in _events(api, kind, name)]

    assert api.wait_for(lambda s: all(_events(s, "Pod", n) for n in ("soon", "minus")))
    assert reasons("soon") == [
        (
            "Warning",
            "InvalidStatedRuntime",
            "metadata.annotations.batchsched.io/max-runtime: 'soon' is not a duration: whole "
            "numbers with units h, m or s (e.g. 90m, 2h, 3600s, 1h30m); planned as stating no "
            "runtime",
        )
    ]
    assert reasons("minus") == [
        (
            "Warning",
            "InvalidStatedRuntime",
            "metadata.labels.kueue.x-k8s.io/max-exec-time-seconds: '-5' is not a whole number "
            "of seconds (e.g. 3600); planned as stating no runtime",
        )
    ]
    assert api.wait_for(lambda s: len(_events(s, "PodGroup", "train")) == 1)
    [(_, reason, note)] = reasons("train", "PodGroup")
    assert reason == "InvalidStatedRuntime" and note.startswith(
        "metadata.annotations.batchsched.io/max-runtime: '0s' must be more than 0 seconds"
    )
    [event] = _events(api, "PodGroup", "train")
    assert event["regarding"]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    # Passes go on (a pod arrives, binds) and a new version with the same value comes: no
    # event more. A new value is told.
    api.create("pods", pod("later"))
    assert api.wait_for(lambda s: node_of(s, "later") == "n1")
    soon = api.get("pods", "soon") or {}
    soon["metadata"]["labels"] = {"touched": "yes"}
    api.update("pods", soon)
    soon = api.get("pods", "soon") or {}
    soon["metadata"]["annotations"] = {"batchsched.io/max-runtime": "later"}
    api.update("pods", soon)
    assert api.wait_for(lambda s: len(_events(s, "Pod", "soon")) == 2)
    api.create("pods", pod("last"))
    assert api.wait_for(lambda s: node_of(s, "last") == "n1")
    run.scheduler.actuator.wait()
    assert len(_events(api, "Pod", "soon")) == 2 and len(_events(api, "Pod", "minus")) == 1
    assert "'later' is not a duration" in reasons("soon")[-1][2]
    assert run.halt() == 0


def test_pods_of_a_malformed_queue_wait_naming_its_field_and_never_run_over_its_limit(
    api: FakeApiServer, launch: Launcher
) -> None:
    """The only Queue object cannot be read: its pods are not scheduled as if queues were off
    (with no quota at all) but wait naming it (docs/queues.md#a-queue-that-cannot-be-read); a
    pod in no queue runs; fixed, its limit holds; malformed again and deleted, its pods are in
    no queue and run."""
    api.create("nodes", node("n1", cpu="4"))
    spec = {"resources": {"cpu": {"limit": "-1"}}}
    team = {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": "team"}, "spec": spec}
    api.create("queues", team)
    for name in ("t1", "t2"):
        api.create("pods", pod(name, labels={QUEUE_LABEL: "team"}))
    api.create("pods", pod("free"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "free") == "n1")
    told = "queue 'team' (label batchsched.io/queue of the pod) cannot be read: "
    assert api.wait_for(lambda s: told in message(s, "t1") and told in message(s, "t2"))
    assert message(api, "t1") == (
        f"{told}spec.resources.cpu.limit: '-1' is negative (a quantity such as 8, 500m or 64Gi); "
        "waiting for it to be fixed"
    )
    assert node_of(api, "t1") == node_of(api, "t2") == ""

    def bound(s: FakeApiServer) -> list[str]:
        return [name for name in ("t1", "t2") if node_of(s, name)]

    api.update(
        "queues", api.get("queues", "team") | {"spec": {"resources": {"cpu": {"limit": "1"}}}}
    )
    assert api.wait_for(lambda s: len(bound(s)) == 1)
    [waiting] = {"t1", "t2"} - set(bound(api))
    assert api.wait_for(lambda s: "limit 1, in use 1, asks 1" in message(s, waiting))
    assert bound(api) != [waiting]  # never both: the limit is 1 CPU

    api.update("queues", api.get("queues", "team") | {"spec": spec})
    assert api.wait_for(lambda s: told in message(s, waiting))
    api.delete("queues", "team")
    assert api.wait_for(lambda s: node_of(s, waiting) == "n1")
    assert run.halt() == 0


def message(api: FakeApiServer, name: str) -> str:
    cond = condition(api, name)
    return str(cond.get("message", "")) if cond else ""
