"""The one definition of pods that schedule alike (framework/signature.py).

A pod's shape key is remembered per pod, and made again once the cluster moves what it reads
(here: a DeviceClass comes to map the pod's extended resource); labels no affinity term
names do not split shapes; the preemptor key is the priority and the demand."""

from __future__ import annotations

from collections.abc import Hashable

from pytest import MonkeyPatch

import batchsched.framework.signature as signature_module
from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.framework.interface import Cycle
from batchsched.framework.signature import preemptor_key
from batchsched.objects.records import DeviceClass, Node, Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.resources import Demand
from tests import builders
from tests.conftest import objects_of
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
    assert framework.shapes.key(state, pod, state.pods.demand(pod)) is not None
    state.upsert_device_class(DeviceClass("gpu", extended_resource_name="example.com/gpu"))
    # DynamicResources may now allocate devices for it: its placement is not shared.
    assert framework.shapes.key(state, pod, state.pods.demand(pod)) is None


def test_pods_alike_share_a_key_and_each_is_made_once() -> None:
    state, scheduler = _cluster()
    framework = scheduler.default_framework
    pods = [Pod("ns", f"p{i}", requests={"cpu": 100}, labels={"job": f"j{i}"}) for i in range(3)]
    for pod in pods:
        state.upsert_pod(pod)
    keys = [framework.shapes.key(state, pod, state.pods.demand(pod)) for pod in pods]
    assert keys[0] is not None and keys[0] == keys[1] == keys[2]
    # Asked again, in another order: the remembered keys, not new ones.
    again = [framework.shapes.key(state, pod, state.pods.demand(pod)) for pod in reversed(pods)]
    assert all(a is k for a, k in zip(again, reversed(keys), strict=True))


def test_a_twin_key_hashes_and_compares_as_the_plain_tuple_it_holds() -> None:
    # Its hash is worked out once: were it kept wrong (or stale), the failures and groups
    # filed under one pod's key would not be found under a twin's equal key.
    state, scheduler = _cluster()
    framework = scheduler.default_framework
    pods = [Pod("ns", f"p{i}", requests={"cpu": 100 * (1 + i // 2)}) for i in range(3)]
    for pod in pods:
        state.upsert_pod(pod)
    keys = [scheduler.twins.twin("batchsched", framework.shapes, pod) for pod in pods]
    assert keys[0] is not keys[1] and keys[0] == keys[1] != keys[2]
    for key in keys:
        assert isinstance(key, tuple)
        plain = tuple(key)
        assert hash(key) == hash(plain) and key == plain
        assert {plain: 1}[key] == 1 and {key: 1}[plain] == 1
    assert {keys[0]: "failed"}.get(keys[1]) == "failed" and {keys[0]: 1}.get(keys[2]) is None


def test_the_memo_holds_more_pending_pods_than_its_floor(monkeypatch: MonkeyPatch) -> None:
    # With more pods waiting than the floor, each pod's key is still made once: a pass (or
    # a gang search) asking for its pods in turn would otherwise make every key again.
    monkeypatch.setattr(signature_module, "_MEMO_FLOOR", 4)
    state, scheduler = _cluster()
    framework = scheduler.default_framework
    pods = [Pod("ns", f"p{i}", requests={"cpu": 100 * (i + 1)}) for i in range(10)]
    for pod in pods:
        state.upsert_pod(pod)
    made: list[str] = []
    shape_keys = framework.shapes._shape_keys

    def counted(
        state: ClusterState, pod: Pod, demand: Demand, shapes: Shapes
    ) -> tuple[Hashable, Hashable]:
        made.append(pod.name)
        return shape_keys(state, pod, demand, shapes)

    monkeypatch.setattr(framework.shapes, "_shape_keys", counted)
    for _ in range(3):
        keys = [framework.shapes.key(state, pod, state.pods.demand(pod)) for pod in pods]
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


def test_labels_no_term_names_do_not_split_shapes_until_a_term_names_them() -> None:
    host = builders.node("n", cpu="8", labels={"kubernetes.io/hostname": "n"})
    manifests = [builders.pod(name, labels={"job": name}) for name in ("a", "b")]
    state = build_state(objects_of(host, *manifests))
    scheduler = Scheduler(state, default_config())
    framework = scheduler.default_framework
    a, b = state.pods.by_key["default/a"], state.pods.by_key["default/b"]

    def shape(pod: Pod) -> Hashable:
        return scheduler.twins.shape(framework.profile.scheduler_name, framework.shapes, pod)

    assert shape(a) == shape(b)
    term = {"labelSelector": {"matchLabels": {"job": "a"}}, "topologyKey": "kubernetes.io/hostname"}
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    picky = builders.pod("picky", affinity={"podAntiAffinity": anti})
    state.upsert_pod(objects_of(picky).pods[0])
    assert shape(a) != shape(b)


def test_the_preemptor_key_is_the_priority_and_the_demand() -> None:
    state, _ = _cluster()
    pods = [
        Pod("ns", "a", requests={"cpu": 100, "memory": 2**20}),
        Pod("ns", "b", requests={"memory": 2**20, "cpu": 100}),  # the same, in another order
        Pod("ns", "c", requests={"cpu": 200, "memory": 2**20}),
    ]
    a, b, c = (preemptor_key(10, state.pods.demand(pod)) for pod in pods)
    assert a == b != c
    assert a != preemptor_key(11, state.pods.demand(pods[0]))
