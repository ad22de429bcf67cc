"""A step after Reserve that fails or raises gives back what Reserve held (upstream's
Unreserve): volume bindings, device allocations, the pod's room; a gang binds all or none."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.commands.schedule import build_state, run
from batchsched.config import default_config
from batchsched.decisions import Bind, InternalError
from batchsched.objects.records import Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, pod_group
from tests.conftest import NOW, objects_of
from tests.faults import exploding_for, exploding_reserve_for
from tests.unit.state.test_volumes import claim_pod, pv, pvc

WFFC = {
    "kind": "StorageClass",
    "metadata": {"name": "local"},
    "provisioner": "kubernetes.io/no-provisioner",
    "volumeBindingMode": "WaitForFirstConsumer",
}
PROVISIONED = {
    "kind": "StorageClass",
    "metadata": {"name": "fast"},
    "provisioner": "ebs.csi.aws.com",
    "volumeBindingMode": "WaitForFirstConsumer",
}
GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
}
ONE_GPU = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        }
    },
}


def _slice(node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }


def _user(name: str, priority: int) -> dict[str, Any]:
    """A pod with a local volume to match, one to provision and a GPU from a template."""
    manifest = claim_pod(name, f"{name}-data", f"{name}-scratch", priority=priority)
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    return manifest


def _cluster(*pods: dict[str, Any]) -> list[dict[str, Any]]:
    size = {"resources": {"requests": {"storage": "1Gi"}}}
    claims = []
    for p in pods:
        name = p["metadata"]["name"]
        claims.append(pvc(f"{name}-data", storageClassName="local", **size))
        claims.append(pvc(f"{name}-scratch", storageClassName="fast", **size))
    local = pv("local-1", "n1", storageClassName="local", capacity={"storage": "1Gi"})
    n1 = node("n1", labels={"kubernetes.io/hostname": "n1"})
    return [n1, WFFC, PROVISIONED, local, GPU_CLASS, ONE_GPU, _slice("n1"), *claims, *pods]


def test_a_raise_after_reserve_gives_back_the_volumes_and_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `bad` goes first (higher priority) and takes n1's one local PV and one GPU at Reserve,
    # then a later Reserve plugin raises: both go back, so `good` gets them in the same pass.
    config, plugin = exploding_reserve_for(monkeypatch, "bad")
    objects = objects_of(*_cluster(_user("bad", 10), _user("good", 0)))
    result = run(objects, config, NOW)
    assert {b.pod: b.node for b in result.bindings} == {"default/good": "n1"}
    # Retried once backed off: the volume and the GPU are `good`'s by then.
    assert "cannot allocate all claims" in result.unschedulable["default/bad"]
    assert plugin.unreserved == ["bad"]
    report = result.to_json()
    assert [(b.claim, b.volume) for b in result.volume_bindings] == [
        ("default/good-data", "local-1"),
        ("default/good-scratch", ""),
    ]
    assert [c["claim"] for c in report["claims"]] == ["default/good-gpu"]


def test_what_bad_held_is_as_before_in_the_state(monkeypatch: pytest.MonkeyPatch) -> None:
    config, _ = exploding_reserve_for(monkeypatch, "bad")
    objects = objects_of(*_cluster(_user("bad", 0)))
    state = build_state(objects)
    state.volumes.binds_at_scheduling = True
    decisions = Scheduler(state, config).schedule_pass(NOW)
    assert [d.pod for d in decisions if isinstance(d, InternalError)] == ["default/bad"]
    volumes, devices = state.volumes, state.devices
    data, scratch = volumes.claims["default/bad-data"], volumes.claims["default/bad-scratch"]
    assert (data.volume_name, data.bind_completed, data.phase) == ("", False, "Pending")
    assert scratch.selected_node == ""
    assert (volumes.volumes["local-1"].claim_ref, volumes.volumes["local-1"].phase) == (
        "",
        "Available",
    )
    assert volumes.assumed() == []
    assert devices.allocated_here == [] and devices.in_use() == set()
    assert "default/bad-gpu" not in devices.claims
    assert "default/bad" in state.pods.pending and "default/bad" not in state.pods.bound


def test_a_raise_while_assuming_unreserves_and_keeps_the_pod_pending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects = objects_of(*_cluster(_user("p", 0)))
    state = build_state(objects)
    state.volumes.binds_at_scheduling = True
    calls: list[str] = []
    unreserve = type(Scheduler(state, default_config()).default_framework).unreserve

    def spy(self: Any, state: ClusterState, pod: Pod) -> None:
        calls.append(pod.key)
        unreserve(self, state, pod)

    def broken(self: ClusterState, key: str, node_name: str) -> None:
        raise RuntimeError("assume failed")

    scheduler = Scheduler(state, default_config())
    monkeypatch.setattr(type(scheduler.default_framework), "unreserve", spy)
    monkeypatch.setattr(ClusterState, "assume", broken)
    decisions = scheduler.schedule_pass(NOW)
    assert [d.error for d in decisions if isinstance(d, InternalError)] == [
        "RuntimeError: assume failed"
    ]
    assert calls == ["default/p"]
    assert state.volumes.assumed() == [] and state.devices.allocated_here == []
    monkeypatch.undo()
    scheduler.queue.flush()
    bound = [(d.pod, d.node) for d in scheduler.schedule_pass(NOW) if isinstance(d, Bind)]
    assert bound == [("default/p", "n1")]


def _gang(size: int) -> list[dict[str, Any]]:
    label = {"scheduling.x-k8s.io/pod-group": "g"}
    members = [pod(f"m{i}", cpu="1", labels=label, namespace="ml") for i in range(size)]
    return [pod_group("g", size), *members]


def test_a_gang_whose_binding_raises_half_way_binds_no_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = build_state(objects_of(node("n1", cpu="8"), *_gang(3)))
    scheduler = Scheduler(state, default_config())
    assume = ClusterState.assume
    seen: list[str] = []

    def third_fails(self: ClusterState, key: str, node_name: str) -> None:
        seen.append(key)
        if len(seen) == 3:
            raise RuntimeError("assume failed")
        assume(self, key, node_name)

    monkeypatch.setattr(ClusterState, "assume", third_fails)
    decisions = scheduler.schedule_pass(NOW)
    assert not any(isinstance(d, Bind) for d in decisions)
    assert any(isinstance(d, InternalError) for d in decisions)
    assert state.pods.bound == {} and state.pods.assumed == set()
    assert sorted(state.pods.pending) == ["ml/m0", "ml/m1", "ml/m2"]
    assert not state.nodes.pods_on[0]
    free = state.free_for(state.pods.by_key["ml/m0"])
    assert int(free[0, state.nodes.resources.intern("cpu")]) == 8000


def test_a_gang_member_whose_filter_raises_leaves_no_tentative_placement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # m0 is placed tentatively (its room taken, shown on n1), then m1's filter raises: the
    # placement is undone, the group binds nothing and n1 is as empty as before.
    state = build_state(objects_of(node("n1", cpu="8"), *_gang(3)))
    scheduler = Scheduler(state, exploding_for(monkeypatch, "m1"))
    decisions = scheduler.schedule_pass(NOW)
    assert not any(isinstance(d, Bind) for d in decisions)
    assert {d.error for d in decisions if isinstance(d, InternalError)} == {
        "RuntimeError: boom for m1"
    }
    assert not state.nodes.pods_on[0] and state.pods.bound == {}
    assert int(state.nodes.free[0, state.nodes.resources.intern("cpu")]) == 8000
