"""Queue order (docs/queues.md#queue-order): among queues with pending work, at each level the
child with the lowest dominant ratio once its next pod is placed goes next; within a leaf, the
profile's queue sort; a head that cannot be placed does not block its queue."""

from __future__ import annotations

from typing import Any

from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Node, Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.fair_share import FairSharePlan
from batchsched.state.queue_order import QueueOrder
from tests.builders import node, pod, pod_group
from tests.conftest import same_decisions_whatever_the_order, schedule

GPU = "nvidia.com/gpu"


def queue(name: str, parent: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"resources": {GPU: spec.pop("gpu", {})}, **spec}
    if parent:
        body["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": body}


def gpu_pods(leaf: str, count: int, gpus: int = 1, first: int = 0) -> list[dict[str, Any]]:
    return [
        pod(f"{leaf}-{i}", cpu="100m", labels={QUEUE_LABEL: leaf}, extra_requests={GPU: str(gpus)})
        for i in range(first, first + count)
    ]


def bound_in_order(*manifests: dict[str, Any], gpus: int = 4) -> list[str]:
    nodes = [node("n1", cpu="64", nvidia_com__gpu=str(gpus))]
    return [b.pod.split("/")[1] for b in schedule(*nodes, *manifests).bindings]


def test_queues_take_turns_by_dominant_ratio_not_by_name() -> None:
    # By the queue sort alone all of a's pods (their names sort first) would take the GPUs.
    order = bound_in_order(queue("a"), queue("b"), *gpu_pods("a", 4), *gpu_pods("b", 4))
    assert order == ["a-0", "b-0", "a-1", "b-1"]


def test_weights_set_the_shares_the_turns_follow() -> None:
    manifests = [queue("a", weight=3), queue("b"), *gpu_pods("a", 8), *gpu_pods("b", 8)]
    order = bound_in_order(*manifests, gpus=8)
    assert sorted(order) == ["a-0", "a-1", "a-2", "a-3", "a-4", "a-5", "b-0", "b-1"]


def test_each_level_chooses_among_its_children() -> None:
    # org's children x and y share org's half; ops has the other half to itself. Each level
    # compares its children: ops's ratio against org's, then x's against y's.
    manifests = [
        queue("org"),
        queue("x", "org"),
        queue("y", "org"),
        queue("ops"),
        *gpu_pods("x", 4),
        *gpu_pods("y", 4),
        *gpu_pods("ops", 4),
    ]
    order = bound_in_order(*manifests, gpus=8)
    assert sorted(order) == ["ops-0", "ops-1", "ops-2", "ops-3", "x-0", "x-1", "y-0", "y-1"]
    assert order[:3] == ["ops-0", "x-0", "ops-1"]


def test_a_head_that_cannot_be_placed_does_not_block_its_queue() -> None:
    big = pod("a-big", cpu="100m", labels={QUEUE_LABEL: "a"}, extra_requests={GPU: "8"})
    order = bound_in_order(queue("a"), queue("b"), big, *gpu_pods("a", 2, first=1))
    assert order == ["a-1", "a-2"]


def test_pods_in_no_queue_go_first() -> None:
    loose = pod("loose", cpu="100m", extra_requests={GPU: "1"})
    order = bound_in_order(queue("a"), *gpu_pods("a", 2), loose)
    assert order == ["loose", "a-0", "a-1"]


def test_a_queue_over_its_fair_share_waits_for_the_others() -> None:
    # a runs 2 of the 4 GPUs already, its fair share: b's pods go before a's next ones.
    running = [
        pod(f"run-{i}", cpu="100m", labels={QUEUE_LABEL: "a"}, extra_requests={GPU: "1"},
            node_name="n1", phase="Running")
        for i in range(2)
    ]  # fmt: skip
    manifests = [queue("a"), queue("b"), *running, *gpu_pods("a", 2), *gpu_pods("b", 2)]
    assert bound_in_order(*manifests) == ["b-0", "b-1"]


def test_a_leaf_that_ran_out_of_pods_is_not_chosen_later() -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 4}))
    for name, parent in (("a", ""), ("a1", "a"), ("a2", "a")):
        state.upsert_queue(Queue(name, QUEUE_API, parent, {GPU: QueueQuota()}))
    p1 = Pod("ml", "p1", labels={QUEUE_LABEL: "a1"}, requests={GPU: 1})
    p2 = Pod("ml", "p2", labels={QUEUE_LABEL: "a2"}, requests={GPU: 1})
    state.upsert_pod(p1)
    state.upsert_pod(p2)
    order = QueueOrder(state)
    assert order.choose({"a1": p1}, ["a1"]) == "a1"
    assert order.choose({}, ["a1"]) is None  # a1's last pod was taken: no lane has work
    assert order.choose({"a2": p2}, ["a2"]) == "a2"


def test_a_lanes_next_pod_bound_with_its_gang_is_skipped() -> None:
    # g1's two members are a2's next pods; the first one's turn binds both, and a2's next
    # entry (the second, or its hint group) has left when a2 is chosen again.
    def member(name: str, group: str, leaf: str, gpus: int) -> dict[str, Any]:
        labels = {GROUP_LABEL: group, QUEUE_LABEL: leaf}
        return pod(name, namespace="ml", labels=labels, extra_requests={GPU: str(gpus)})

    manifests = [
        queue("a", gpu={"limit": 1}),
        queue("b"),
        queue("a1", "a"),
        queue("a2", "a"),
        queue("b1", "b"),
        node("n0", cpu="16", memory="32Gi", nvidia_com__gpu="8"),
        pod_group("g0", 1),
        member("g0-0", "g0", "a1", 2),
        pod_group("g1", 2),
        member("g1-0", "g1", "a2", 1),
        member("g1-1", "g1", "a2", 1),
        pod_group("g2", 1),
        member("g2-0", "g2", "a2", 1),
    ]
    assert same_decisions_whatever_the_order(manifests, 0)


def test_fair_shares_are_computed_only_when_two_queues_compete(monkeypatch: Any) -> None:
    # A level with one child with work needs no rating: with decayed usage the fair shares
    # move at every pass, and computing them for lone picks was most of a replay's cost.
    computed: list[int] = []
    original = FairSharePlan.shares

    def counted(self: FairSharePlan, *args: Any, **kwargs: Any) -> Any:
        computed.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FairSharePlan, "shares", counted)
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 4}))
    for name in ("a", "b"):
        state.upsert_queue(Queue(name, QUEUE_API, "", {GPU: QueueQuota()}))
    pa = Pod("ml", "pa", labels={QUEUE_LABEL: "a"}, requests={GPU: 1})
    pb = Pod("ml", "pb", labels={QUEUE_LABEL: "b"}, requests={GPU: 2})
    state.upsert_pod(pa)
    state.upsert_pod(pb)
    order = QueueOrder(state)
    assert order.choose({"a": pa}, ["a"]) == "a"
    assert computed == []
    # Both compete: a would use 1 of its 2 GPUs, b 2 of its 2; a goes first.
    assert order.choose({"a": pa, "b": pb}, ["b"]) == "a"
    assert computed == [1]


def test_no_lane_with_work_asks_nothing_of_the_fair_shares(monkeypatch: Any) -> None:
    # Each pass ends with a choice among no lanes: it needs neither the shares nor their mark
    # (with decayed usage that mark moves at every pass).
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 4}))
    for name in ("a", "b"):
        state.upsert_queue(Queue(name, QUEUE_API, "", {GPU: QueueQuota()}))
    pa = Pod("ml", "pa", labels={QUEUE_LABEL: "a"}, requests={GPU: 1})
    state.upsert_pod(pa)
    order = QueueOrder(state)
    assert order.choose({"a": pa}, ["a"]) == "a"

    def unexpected() -> None:
        raise AssertionError("the fair shares' mark was asked with no lane to rate")

    monkeypatch.setattr(state, "queue_fair_shares_at", unexpected)
    assert order.choose({}, ["a"]) is None
