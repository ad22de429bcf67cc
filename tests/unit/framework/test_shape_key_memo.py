"""A pod's shape key is remembered per pod, and made again once the cluster moves what it
reads (here: a DeviceClass comes to map the pod's extended resource)."""

from __future__ import annotations

from collections.abc import Hashable

from pytest import MonkeyPatch

import batchsched.framework.runtime as framework_module
from batchsched.config import default_config
from batchsched.framework.interface import Cycle
from batchsched.objects.records import DeviceClass, Node, Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.resources import Demand
from tests.preemption_world import NOW

Shapes = tuple[Hashable, ...] | None


def _cluster() -> tuple[ClusterState, Scheduler]:
    state = ClusterState()
    state.upsert_node(Node("n0", {"cpu": 4000, "memory": 2**33, "pods": 110, "example.com/gpu": 4}))
    return state, Scheduler(state, default_config())


def test_a_device_class_mapping_the_request_makes_the_key_again() -> None:
    state, scheduler = _cluster()
    framework = scheduler.default_framework
    pod = Pod("ns", "p", requests={"cpu": 100, "example.com/gpu": 1})
    state.upsert_pod(pod)
    assert framework.shape_key(state, pod, state.pods.demand(pod)) is not None
    state.upsert_device_class(DeviceClass("gpu", extended_resource_name="example.com/gpu"))
    # DynamicResources may now allocate devices for it: its placement is not shared.
    assert framework.shape_key(state, pod, state.pods.demand(pod)) is None


def test_pods_alike_share_a_key_and_each_is_made_once() -> None:
    state, scheduler = _cluster()
    framework = scheduler.default_framework
    pods = [Pod("ns", f"p{i}", requests={"cpu": 100}, labels={"job": f"j{i}"}) for i in range(3)]
    for pod in pods:
        state.upsert_pod(pod)
    keys = [framework.shape_key(state, pod, state.pods.demand(pod)) for pod in pods]
    assert keys[0] is not None and keys[0] == keys[1] == keys[2]
    # Asked again, in another order: the remembered keys, not new ones.
    again = [framework.shape_key(state, pod, state.pods.demand(pod)) for pod in reversed(pods)]
    assert all(a is k for a, k in zip(again, reversed(keys), strict=True))


def test_the_memo_holds_more_pending_pods_than_its_floor(monkeypatch: MonkeyPatch) -> None:
    # With more pods waiting than the floor, each pod's key is still made once: a pass (or
    # a gang search) asking for its pods in turn would otherwise make every key again.
    monkeypatch.setattr(framework_module, "_CACHE_LIMIT", 4)
    state, scheduler = _cluster()
    framework = scheduler.default_framework
    pods = [Pod("ns", f"p{i}", requests={"cpu": 100 * (i + 1)}) for i in range(10)]
    for pod in pods:
        state.upsert_pod(pod)
    made: list[str] = []
    shape_key = framework._shape_key

    def counted(state: ClusterState, pod: Pod, demand: Demand, shapes: Shapes) -> Hashable:
        made.append(pod.name)
        return shape_key(state, pod, demand, shapes)

    monkeypatch.setattr(framework, "_shape_key", counted)
    for _ in range(3):
        keys = [framework.shape_key(state, pod, state.pods.demand(pod)) for pod in pods]
        assert len(set(keys)) == len(pods)
    assert sorted(made) == sorted(pod.name for pod in pods)


def test_static_shapes_follow_each_pod_asked_in_turn() -> None:
    # The filters' shapes come from the same memo: pods asked in turn each get their own.
    state = ClusterState()
    for zone in ("a", "b"):
        state.upsert_node(
            Node(f"n-{zone}", {"cpu": 4000, "memory": 2**33, "pods": 110}, {"zone": zone})
        )
    scheduler = Scheduler(state, default_config())
    framework = scheduler.default_framework
    pods = [
        Pod("ns", f"p-{zone}", requests={"cpu": 100}, node_selector={"zone": zone})
        for zone in ("a", "b")
    ]
    for pod in pods:
        state.upsert_pod(pod)
    for _ in range(2):
        for pod, row in zip(pods, (0, 1), strict=True):
            cycle = Cycle(state, pod, NOW, state.pods.demand(pod), state.free_for(pod))
            feasible, _ = framework.find_nodes(cycle)
            assert feasible.tolist() == [row == 0, row == 1]
