"""The queue tree in the state: queues that break the tree's rules hold back their subtree's
pods (naming the queue and field at fault) and nothing else; fixing the tree lets them go; a
status write is not a change of the tree."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from batchsched.objects.parse import read_node, read_pod
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, read_queue
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod

GPU = "nvidia.com/gpu"


def queue(name: str, parent: str = "", guaranteed: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {GPU: {"guaranteed": guaranteed}}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def in_queue(name: str, leaf: str, node_name: str = "") -> dict[str, Any]:
    return pod(
        name,
        labels={QUEUE_LABEL: leaf},
        extra_requests={GPU: "1"},
        node_name=node_name,
        phase="Running" if node_name else "",
    )


def state_of(*queues: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    state.apply("Node", read_node(node("n1", nvidia_com__gpu="8")))
    for obj in queues:
        state.apply("Queue", read_queue(obj))
    return state


def test_a_subtree_below_a_broken_queue_waits_naming_it_and_the_rest_is_admitted() -> None:
    state = state_of(queue("org"), queue("a", "org"), queue("lost", "nowhere"), queue("x", "lost"))
    assert set(state.queues.problems()) == {"lost"}
    waiting = state.queue_of(read_pod(in_queue("w", "x")))
    assert waiting.queue == "x"
    assert waiting.problem == (
        "queue 'x' (label batchsched.io/queue of the pod) is ignored while its tree breaks "
        "the rules: Queue lost: spec.parent: no Queue 'nowhere' (known: a, lost, org, x)"
    )
    assert state.queue_of(read_pod(in_queue("ok", "a"))).problem == ""
    # Fixed: the parent appears, and the pods go.
    state.apply("Queue", read_queue(queue("nowhere")))
    assert state.queues.problems() == {}
    assert state.queue_of(read_pod(in_queue("w", "x"))).problem == ""


def test_children_guaranteed_over_the_parent_hold_back_the_parents_subtree_only() -> None:
    state = state_of(
        queue("top", guaranteed=5),
        queue("org", "top", guaranteed=1),
        queue("a", "org", guaranteed=2),
        queue("b", "top"),
    )
    assert set(state.queues.problems()) == {"org"}
    problem = state.queue_of(read_pod(in_queue("p", "a"))).problem
    assert "Queue org: spec.resources.nvidia.com/gpu.guaranteed: 1 is less than" in problem
    assert state.queue_of(read_pod(in_queue("q", "b"))).problem == ""


def test_a_cycle_holds_back_the_queues_in_it_and_below_it() -> None:
    state = state_of(queue("a", "b"), queue("b", "a"), queue("leaf", "a"), queue("free"))
    assert set(state.queues.problems()) == {"a", "b", "leaf"}
    assert "a -> b -> a" in state.queue_of(read_pod(in_queue("p", "leaf"))).problem
    assert state.queue_of(read_pod(in_queue("q", "free"))).problem == ""


def test_bound_pods_of_an_ignored_subtree_still_count_for_its_ancestors() -> None:
    state = state_of(queue("top", guaranteed=5), queue("org", "top", 1), queue("a", "org", 2))
    state.apply("Pod", read_pod(in_queue("running", "a", node_name="n1")))
    assert state.queue_usage()["top"][GPU] == 1


def test_a_status_write_does_not_change_the_tree() -> None:
    state = state_of(queue("a"))
    version, generation = state.queues.version, state.generation
    written = read_queue(queue("a"))
    written = replace(written, resource_version="7", status={"pendingPods": 3})
    state.apply("Queue", written)
    assert (state.queues.version, state.generation) == (version, generation)
    assert state.queues.queues["a"].status == {"pendingPods": 3}  # kept all the same
    state.apply("Queue", read_queue(queue("a", guaranteed=1)))
    assert state.queues.version == version + 1 and state.generation == generation + 1


def test_the_tree_is_shown_parents_first_siblings_by_name_and_cycles_left_out() -> None:
    state = state_of(
        queue("z"), queue("b", "a"), queue("a"), queue("c", "a"), queue("d", "b"),
        queue("x", "y"), queue("y", "x"),
    )  # fmt: skip
    order = state.queues.in_tree_order()
    assert order == [("a", 0), ("b", 1), ("d", 2), ("c", 1), ("z", 0)]


def test_a_leaf_is_limited_when_a_queue_on_its_path_has_a_limit() -> None:
    # Admission adds nothing up for a leaf with no limit above it (the Queues PreFilter).
    state = state_of(queue("org"), queue("a", "org"), queue("solo"))
    assert not state.queues.limited("a") and not state.queues.limited("solo")
    capped = queue("org")
    capped["spec"]["resources"][GPU]["limit"] = 4
    state.apply("Queue", read_queue(capped))
    assert state.queues.limited("a") and state.queues.limited("org")
    assert not state.queues.limited("solo") and not state.queues.limited("nowhere")
