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


def queued(
    tree: dict[str, str], asks: dict[str, tuple[str, int]]
) -> tuple[ClusterState, dict[str, Pod]]:
    """A state with a 4-GPU node, the queues of `tree` (name -> parent) and a pending pod for
    each of `asks` (name -> its leaf and GPUs)."""
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 4}))
    for name, parent in tree.items():
        state.upsert_queue(Queue(name, QUEUE_API, parent, {GPU: QueueQuota()}))
    pods = {}
    for name, (leaf, gpus) in asks.items():
        pods[name] = Pod("ml", name, labels={QUEUE_LABEL: leaf}, requests={GPU: gpus})
        state.upsert_pod(pods[name])
    return state, pods


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
    state, pods = queued({"a": "", "a1": "a", "a2": "a"}, {"p1": ("a1", 1), "p2": ("a2", 1)})
    p1, p2 = pods["p1"], pods["p2"]
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
    state, pods = queued({"a": "", "b": ""}, {"pa": ("a", 1), "pb": ("b", 2)})
    pa, pb = pods["pa"], pods["pb"]
    order = QueueOrder(state)
    assert order.choose({"a": pa}, ["a"]) == "a"
    assert computed == []
    # Both compete: a would use 1 of its 2 GPUs, b 2 of its 2; a goes first.
    assert order.choose({"a": pa, "b": pb}, ["b"]) == "a"
    assert computed == [1]


def test_no_lane_with_work_asks_nothing_of_the_fair_shares(monkeypatch: Any) -> None:
    # Each pass ends with a choice among no lanes: it needs neither the shares nor their mark
    # (with decayed usage that mark moves at every pass).
    state, pods = queued({"a": "", "b": ""}, {"pa": ("a", 1)})
    pa = pods["pa"]
    order = QueueOrder(state)
    assert order.choose({"a": pa}, ["a"]) == "a"

    def unexpected() -> None:
        raise AssertionError("the fair shares' mark was asked with no lane to rate")

    monkeypatch.setattr(state, "queue_fair_shares_at", unexpected)
    assert order.choose({}, ["a"]) is None


def test_a_leaf_moved_under_another_parent_is_chosen_among_its_new_siblings() -> None:
    # What is kept per leaf (its path) holds for one version of the tree only.
    tree = {"p1": "", "p2": "", "x": "p1", "y": "p2"}
    state, pods = queued(tree, {"px": ("x", 1), "py": ("y", 2)})
    px, py = pods["px"], pods["py"]
    order = QueueOrder(state)
    assert order.choose({"x": px}, ["x"]) == "x"
    state.remove_queue("p1")
    state.upsert_queue(Queue("x", QUEUE_API, "p2", {GPU: QueueQuota()}))
    # x would use 1 of its 2 GPUs under p2, y 2 of its 2: x goes first.
    assert order.choose({"x": px, "y": py}, ["y"]) == "x"
