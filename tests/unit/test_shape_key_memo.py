"""A pod's shape key is remembered per pod, and made again once the cluster moves what it
reads (here: a DeviceClass comes to map the pod's extended resource)."""

from __future__ import annotations

from batchsched.config import default_config
from batchsched.objects.records import DeviceClass, Node, Pod
from batchsched.scheduler import Scheduler
from batchsched.state.cluster import ClusterState


def _cluster() -> tuple[ClusterState, Scheduler]:
    state = ClusterState()
    state.upsert_node(Node("n0", {"cpu": 4000, "memory": 2**33, "pods": 110, "example.com/gpu": 4}))
    return state, Scheduler(state, default_config())


def test_a_device_class_mapping_the_request_makes_the_key_again() -> None:
    state, scheduler = _cluster()
    framework = scheduler.default_framework
    pod = Pod("ns", "p", requests={"cpu": 100, "example.com/gpu": 1})
    state.upsert_pod(pod)
    assert framework.shape_key(state, pod, state.demand(pod)) is not None
    state.upsert_device_class(DeviceClass("gpu", extended_resource_name="example.com/gpu"))
    # DynamicResources may now allocate devices for it: its placement is not shared.
    assert framework.shape_key(state, pod, state.demand(pod)) is None


def test_pods_alike_share_a_key_and_each_is_made_once() -> None:
    state, scheduler = _cluster()
    framework = scheduler.default_framework
    pods = [Pod("ns", f"p{i}", requests={"cpu": 100}, labels={"job": f"j{i}"}) for i in range(3)]
    for pod in pods:
        state.upsert_pod(pod)
    keys = [framework.shape_key(state, pod, state.demand(pod)) for pod in pods]
    assert keys[0] is not None and keys[0] == keys[1] == keys[2]
    # Asked again, in another order: the remembered keys, not new ones.
    again = [framework.shape_key(state, pod, state.demand(pod)) for pod in reversed(pods)]
    assert all(a is k for a, k in zip(again, reversed(keys), strict=True))
