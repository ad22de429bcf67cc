"""DRA in live mode: slices and claims watched, claims allocated and written before the
Binding (PreBind), undone when the Binding fails, template claims awaited."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import pytest

from batchsched.decisions import Decision
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.queue import QueuedPod
from tests.live.conftest import Launcher, condition, config, node, node_of, pod
from tests.live.dra_objects import (
    claim_pod,
    claim_spec,
    device_class,
    resource_claim,
    resource_slice,
)
from tests.live.fake_apiserver import FakeApiServer


def allocation(api: FakeApiServer, claim: str) -> dict[str, Any] | None:
    obj = api.get("resourceclaims", claim) or {}
    found = (obj.get("status") or {}).get("allocation")
    return dict(found) if found else None


def devices_of(api: FakeApiServer, claim: str) -> list[str]:
    found = allocation(api, claim) or {}
    return [r["device"] for r in found["devices"]["results"]] if found else []


def reserved_for(api: FakeApiServer, claim: str) -> list[str]:
    obj = api.get("resourceclaims", claim) or {}
    return [r["name"] for r in (obj.get("status") or {}).get("reservedFor") or []]


def _cluster(api: FakeApiServer, *gpus: str) -> None:
    api.create("nodes", node("n1"))
    api.create("nodes", node("n2"))
    api.create("deviceclasses", device_class())
    api.create("resourceslices", resource_slice("n2", *gpus))


def test_claims_are_written_before_the_binding_and_their_devices_stay_taken(
    api: FakeApiServer, launch: Launcher
) -> None:
    _cluster(api, "gpu-0", "gpu-1")
    api.create("resourceclaims", resource_claim("two", count=2))
    api.create("resourceclaims", resource_claim("one"))
    first = api.create("pods", claim_pod("first", claim="two"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "first") == "n2")
    claim = api.get("resourceclaims", "two") or {}
    status = claim["status"]
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == [
        "gpu-0",
        "gpu-1",
    ]
    assert status["allocation"]["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
        ]
    }
    assert status["reservedFor"] == [
        {"resource": "pods", "name": "first", "uid": first["metadata"]["uid"]}
    ]
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    # Both devices are in use now (as the informer reports them): a second pod waits.
    api.create("pods", claim_pod("second", claim="one"))
    assert api.wait_for(lambda s: condition(s, "second") is not None)
    cond = condition(api, "second")
    assert cond is not None and "cannot allocate all claims" in cond["message"]
    assert allocation(api, "one") is None
    # The first claim given back (as the resourceclaim controller does when its pod is done)
    # frees the devices.
    api.delete("pods", "first")
    released = api.get("resourceclaims", "two") or {}
    released["status"] = {}
    api.update("resourceclaims", released)
    assert api.wait_for(lambda s: node_of(s, "second") == "n2")
    assert devices_of(api, "one") == ["gpu-0"]
    assert run.halt() == 0


def test_a_shared_claim_is_allocated_once_and_reserved_for_each_pod(
    api: FakeApiServer, launch: Launcher
) -> None:
    _cluster(api, "gpu-0")
    api.create("resourceclaims", resource_claim("shared"))
    api.create("pods", claim_pod("a", claim="shared"))
    api.create("pods", claim_pod("b", claim="shared"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "a") == "n2" and node_of(s, "b") == "n2")
    run.scheduler.actuator.wait()
    assert devices_of(api, "shared") == ["gpu-0"]
    assert sorted(reserved_for(api, "shared")) == ["a", "b"]
    assert run.halt() == 0


def test_a_template_claim_is_awaited_until_the_controller_creates_it(
    api: FakeApiServer, launch: Launcher
) -> None:
    _cluster(api, "gpu-0")
    api.create(
        "resourceclaimtemplates",
        {"metadata": {"name": "one-gpu", "namespace": "default"}, "spec": {"spec": claim_spec()}},
    )
    api.create("pods", claim_pod("p", template="one-gpu"))
    run = launch()
    assert api.wait_for(lambda s: condition(s, "p") is not None)
    cond = condition(api, "p")
    assert cond is not None and "waiting for the resourceclaim controller" in cond["message"]
    assert node_of(api, "p") == ""
    # The resourceclaim controller's part: the claim, then the pod's status naming it.
    current = api.get("pods", "p") or {}
    made = resource_claim("p-gpu-x7k2q")
    owner = {"kind": "Pod", "name": "p", "uid": current["metadata"]["uid"], "controller": True}
    made["metadata"]["ownerReferences"] = [owner]
    api.create("resourceclaims", made)
    current["status"]["resourceClaimStatuses"] = [
        {"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}
    ]
    api.update("pods", current)
    assert api.wait_for(lambda s: node_of(s, "p") == "n2")
    assert devices_of(api, "p-gpu-x7k2q") == ["gpu-0"]
    assert reserved_for(api, "p-gpu-x7k2q") == ["p"]
    assert run.halt() == 0


def test_a_template_claim_the_pod_does_not_own_is_not_used(
    api: FakeApiServer, launch: Launcher
) -> None:
    _cluster(api, "gpu-0")
    api.create("pods", claim_pod("p", template="one-gpu"))
    made = resource_claim("p-gpu-x7k2q")
    made["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "p", "uid": "someone-else", "controller": True}
    ]
    api.create("resourceclaims", made)
    current = api.get("pods", "p") or {}
    current["status"] = {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}]
    }
    api.update("pods", current)
    run = launch()
    assert api.wait_for(lambda s: condition(s, "p") is not None)
    cond = condition(api, "p")
    assert cond is not None and cond["message"].startswith(
        "0/2 nodes are available: 2 ResourceClaim default/p-gpu-x7k2q was not created for "
        "Pod default/p (Pod is not owner)."
    )
    assert node_of(api, "p") == "" and devices_of(api, "p-gpu-x7k2q") == []
    assert run.halt() == 0


def test_a_conflicting_claim_write_is_retried(api: FakeApiServer, launch: Launcher) -> None:
    _cluster(api, "gpu-0")
    api.create("resourceclaims", resource_claim("c"))
    api.create("pods", claim_pod("p", claim="c"))
    api.inject(409, count=2, method="PATCH", path="/resourceclaims/c/status")
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "p") == "n2")
    assert devices_of(api, "c") == ["gpu-0"]
    assert reserved_for(api, "c") == ["p"]
    assert run.halt() == 0


def _claim_history(api: FakeApiServer, name: str) -> list[tuple[bool, list[str]]]:
    """(allocated, reservedFor names) of every version of a claim the server stored."""
    with api.lock:
        versions = [
            o
            for _, plural, _, o in api.history
            if plural == "resourceclaims" and o["metadata"]["name"] == name
        ]
    return [
        (
            bool((o.get("status") or {}).get("allocation")),
            [r["name"] for r in (o.get("status") or {}).get("reservedFor") or []],
        )
        for o in versions
    ]


def test_a_failed_binding_gives_the_claim_back_and_the_pod_is_tried_again(
    api: FakeApiServer, launch: Launcher
) -> None:
    _cluster(api, "gpu-0")
    api.create("resourceclaims", resource_claim("c"))
    api.create("pods", claim_pod("p", claim="c"))
    api.inject(403, count=1, method="POST", path="/binding")
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "p") == "n2")
    assert devices_of(api, "c") == ["gpu-0"]
    assert reserved_for(api, "c") == ["p"]
    # Created, written, undone after the rejected Binding, written again for the retry.
    states: list[tuple[bool, list[str]]] = []
    for state in _claim_history(api, "c"):
        if not states or states[-1] != state:
            states.append(state)
    assert states == [(False, []), (True, ["p"]), (False, []), (True, ["p"])]
    finalizers = (api.get("resourceclaims", "c") or {})["metadata"]["finalizers"]
    assert finalizers == ["resource.kubernetes.io/delete-protection"]
    assert run.halt() == 0


def _extended_pod(name: str) -> dict[str, Any]:
    manifest = pod(name)
    manifest["spec"]["containers"][0]["resources"]["limits"] = {"example.com/gpu": "2"}
    return manifest


def _claims_of(api: FakeApiServer, owner: str) -> list[dict[str, Any]]:
    return [
        c
        for c in api.objects("resourceclaims")
        if any(o["name"] == owner for o in c["metadata"].get("ownerReferences") or [])
    ]


def test_extended_resources_get_a_claim_created_allocated_and_named_in_the_pod(
    api: FakeApiServer, launch: Launcher
) -> None:
    _cluster(api, "gpu-0", "gpu-1", "gpu-2")
    mapped = device_class() | {
        "spec": device_class()["spec"] | {"extendedResourceName": "example.com/gpu"}
    }
    api.update("deviceclasses", mapped)
    created = api.create("pods", _extended_pod("p"))
    api.inject(403, count=1, method="POST", path="/pods/p/binding")
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "p") == "n2")
    run.scheduler.actuator.wait()
    # The claim of the rejected first Binding was deleted; the second attempt made another.
    [claim] = _claims_of(api, "p")
    meta = claim["metadata"]
    assert meta["name"].startswith("p-extended-resources-")
    assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert meta["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-1",
            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        }
    ]
    assert devices_of(api, meta["name"]) == ["gpu-0", "gpu-1"]
    assert reserved_for(api, meta["name"]) == ["p"]
    status = (api.get("pods", "p") or {})["status"]["extendedResourceClaimStatus"]
    assert status == {
        "requestMappings": [
            {
                "containerName": "c",
                "resourceName": "example.com/gpu",
                "requestName": "container-0-request-1",
            }
        ],
        "resourceClaimName": meta["name"],
    }
    created_names = {
        o["metadata"]["name"]
        for _, plural, kind, o in api.history
        if plural == "resourceclaims" and kind == "ADDED"
    }
    assert len(created_names) == 2
    # The devices stay taken once the claim is reported: one GPU is left for the next pod.
    api.create("pods", _extended_pod("q"))
    assert api.wait_for(lambda s: condition(s, "q") is not None)
    cond = condition(api, "q")
    assert cond is not None and "cannot allocate all claims" in cond["message"]
    assert run.halt() == 0


def test_the_pods_claim_status_written_while_it_is_tried_brings_it_back(
    api: FakeApiServer, launch: Launcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resourceclaim controller creates the claim, which wakes the pod, and names it in
    the pod's status a moment later. When that update lands while the pod is being tried
    (the attempt still sees the pod without it), the update must bring the pod back: it is
    the only change left, and nothing else would retry the pod before the 5-minute net."""
    _cluster(api, "gpu-0")
    api.create("pods", claim_pod("p", template="one-gpu"))
    made = resource_claim("p-gpu-x7k2q")
    updated = threading.Event()
    original = Scheduler._attempt

    def attempt(self: Scheduler, entry: QueuedPod, now: datetime) -> list[Decision]:
        claim_made = "default/p-gpu-x7k2q" in self.state.devices.claims
        if entry.pod.key == "default/p" and claim_made and not updated.is_set():
            # The controller's status write lands now: this attempt still sees the pod
            # without it, and the loop applies it only after the attempt failed.
            current = api.get("pods", "p") or {}
            current.setdefault("status", {})["resourceClaimStatuses"] = [
                {"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}
            ]
            api.update("pods", current)
            updated.set()
        return original(self, entry, now)

    monkeypatch.setattr(Scheduler, "_attempt", attempt)
    backoff = {"podInitialBackoffSeconds": 0.05, "podMaxBackoffSeconds": 0.1}
    run = launch(config(**backoff))
    assert api.wait_for(lambda s: condition(s, "p") is not None)
    cond = condition(api, "p")
    assert cond is not None and "waiting for the resourceclaim controller" in cond["message"]
    current = api.get("pods", "p") or {}
    made["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "p", "uid": current["metadata"]["uid"], "controller": True}
    ]
    api.create("resourceclaims", made)  # wakes the pod, whose status does not name it yet
    assert api.wait_for(lambda s: updated.is_set())
    assert api.wait_for(lambda s: node_of(s, "p") == "n2")
    assert reserved_for(api, "p-gpu-x7k2q") == ["p"]
    assert run.halt() == 0


def test_a_gang_members_failed_prebind_is_undone_and_the_member_retried_alone(
    api: FakeApiServer, launch: Launcher
) -> None:
    # Two GPUs on n2 and a gang of two members, one GPU each: both are placed together, each
    # member's PreBind writes its own claim. The first status write of b's claim is refused
    # (403): a's binding stands, b's allocation is given back, b is tried again after
    # its backoff, alone (a counts towards minMember now), and gets a device again.
    _cluster(api, "gpu-0", "gpu-1")
    api.create(
        "podgroups", {"metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    for name in ("a", "b"):
        api.create("resourceclaims", resource_claim(f"{name}-gpu"))
        member = claim_pod(name, claim=f"{name}-gpu")
        member["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "job"}
        api.create("pods", member)
    api.inject(403, count=1, method="PATCH", path="/resourceclaims/b-gpu/status")
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "a") == "n2" and node_of(s, "b") == "n2")
    run.scheduler.actuator.wait()
    assert reserved_for(api, "a-gpu") == ["a"] and reserved_for(api, "b-gpu") == ["b"]
    assert sorted(devices_of(api, "a-gpu") + devices_of(api, "b-gpu")) == ["gpu-0", "gpu-1"]
    failed = [
        e["regarding"]["name"]
        for e in api.objects("events")
        if e.get("reason") == "FailedScheduling" and "running PreBind" in e.get("note", "")
    ]
    assert failed == ["b"]
    states: list[tuple[bool, list[str]]] = []
    for state in _claim_history(api, "b-gpu"):
        if not states or states[-1] != state:
            states.append(state)
    assert states == [(False, []), (True, ["b"])]  # the failed write left nothing behind
    assert run.halt() == 0
