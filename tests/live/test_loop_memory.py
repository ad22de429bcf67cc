"""The live loop keeps nothing of pods once they are deleted (issue 32, point 14): not in the
state, the plugins, the actuator's records of what it wrote, nor the event series."""

from __future__ import annotations

from typing import Any

from batchsched.live.events import EventRecorder, ObjectRef
from tests.leftovers import holders, outside_snapshots
from tests.live.conftest import Launcher, client_for, condition, node, node_of, pod
from tests.live.dra_objects import claim_pod, device_class, resource_claim, resource_slice
from tests.live.fake_apiserver import FakeApiServer

MARKER = "gone"


def _classed(name: str, cls: str, cpu: str, **meta: Any) -> dict[str, Any]:
    manifest = pod(name, cpu=cpu, **meta)
    manifest["spec"]["priorityClassName"] = cls
    return manifest


def test_deleted_pods_of_every_kind_leave_nothing_in_the_loop(
    api: FakeApiServer, launch: Launcher
) -> None:
    for cls, value in (("low", 10), ("high", 1000)):
        api.create("priorityclasses", {"metadata": {"name": cls}, "value": value})
    api.create("nodes", node("n1"))
    api.create("nodes", node("n2"))
    api.create("deviceclasses", device_class())
    api.create("resourceslices", resource_slice("n2", "gpu-0"))
    run = launch()
    group = f"{MARKER}-gang"
    api.create("podgroups", {"metadata": {"name": group}, "spec": {"minMember": 2}})
    member = {"labels": {"scheduling.x-k8s.io/pod-group": group}}
    pods = [f"{group}-{m}" for m in range(2)]
    for name in pods:
        api.create("pods", _classed(name, "low", "1", **member))
    for i in range(4):
        pods.append(f"{MARKER}-plain-{i}")
        api.create("pods", _classed(pods[-1], "low", "1"))
    api.create("resourceclaims", resource_claim(f"{MARKER}-claim"))
    claimed = claim_pod(f"{MARKER}-claimed", claim=f"{MARKER}-claim")
    claimed["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    api.create("pods", claimed)
    pods.append(f"{MARKER}-claimed")
    api.create("pods", _classed(f"{MARKER}-huge", "low", "64"))  # never fits
    assert api.wait_for(lambda s: all(node_of(s, name) for name in pods))
    assert api.wait_for(lambda s: condition(s, f"{MARKER}-huge") is not None)
    # Both nodes are full: a high-priority pod preempts low ones (deleted by the loop).
    api.create("pods", _classed(f"{MARKER}-urgent", "high", "3"))
    assert api.wait_for(lambda s: node_of(s, f"{MARKER}-urgent") != "")
    run.scheduler.actuator.wait()
    assert any(e["reason"] == "Preempted" for e in api.objects("events"))
    for obj in api.objects("pods"):
        api.delete("pods", obj["metadata"]["name"])
    api.delete("podgroups", group)
    api.delete("resourceclaims", f"{MARKER}-claim")
    assert api.wait_for(lambda s: not run.scheduler.state.pods.by_key)
    passes = run.scheduler.passes
    assert api.wait_for(lambda s: run.scheduler.passes >= passes + 2)
    assert run.halt() == 0
    assert outside_snapshots(holders(run.scheduler, MARKER)) == {}


def test_the_actuator_forgets_what_it_wrote_for_deleted_objects(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1", cpu="1"))
    run = launch()
    api.create("podgroups", {"metadata": {"name": "job"}, "spec": {"minMember": 2}})
    member = {"labels": {"scheduling.x-k8s.io/pod-group": "job"}}
    for m in range(2):
        api.create("pods", pod(f"job-{m}", cpu="1", **member))
    api.create("pods", pod("huge", cpu="8"))
    assert api.wait_for(lambda s: condition(s, "huge") is not None)
    assert api.wait_for(lambda s: (s.get("podgroups", "job") or {}).get("status") or {})
    actuator = run.scheduler.actuator
    actuator.wait()
    assert "default/huge" in actuator._conditions
    assert "default/job" in actuator._group_status
    api.delete("pods", "huge")
    for m in range(2):
        api.delete("pods", f"job-{m}")
    pods = run.scheduler.state.pods.by_key
    assert api.wait_for(
        lambda s: not {"default/huge", "default/job-0", "default/job-1"} & set(pods)
    )
    # The members go first, and only then the group: pods and groups come through separate
    # watches, so a group deleted with its members may leave the loop before them, and a
    # member still waiting would report on it again (rightly starting a new series).
    api.delete("podgroups", "job")
    assert api.wait_for(lambda s: "default/job" not in run.scheduler.state.groups.by_key)
    assert run.halt() == 0
    assert "default/huge" not in actuator._conditions
    assert "default/job" not in actuator._group_status
    owners = run.scheduler.events._series
    assert ("Pod", "default", "huge") not in owners
    assert ("PodGroup", "default", "job") not in owners


def test_event_series_are_kept_per_object_and_only_for_events_that_repeat(
    api: FakeApiServer,
) -> None:
    events = EventRecorder(client_for(api), "batchsched", "test", capacity=3)
    try:
        bound = ObjectRef("Pod", "default", "bound", "uid-1")
        events.record(bound, "Normal", "Scheduled", "Binding", "assigned", once=True)
        assert events._series == {}  # a pod is bound once: nothing to aggregate
        waiting = ObjectRef("Pod", "default", "waiting", "uid-2")
        for i in range(40):  # a new message every cycle: only the latest few are kept
            events.record(waiting, "Warning", "FailedScheduling", "Scheduling", f"try {i}")
        assert len(events._series[("Pod", "default", "waiting")]) == 16
        for i in range(5):  # more objects than the capacity: the least recent go
            events.record(ObjectRef("Pod", "default", f"p{i}"), "Warning", "W", "A", "n")
        assert list(events._series) == [("Pod", "default", f"p{i}") for i in (2, 3, 4)]
        events.forget("Pod", "default", "p3")
        assert ("Pod", "default", "p3") not in events._series
        events.flush()
    finally:
        events.close()
    assert sum(1 for e in api.objects("events") if e["reason"] == "Scheduled") == 1
