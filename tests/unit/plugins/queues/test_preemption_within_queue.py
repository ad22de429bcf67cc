"""Priority preemption with Queue objects (docs/queues.md#reclaim): it stays inside the
preemptor's leaf queue; pods in no queue preempt only pods in no queue."""

from __future__ import annotations

from typing import Any

from tests.builders import node, pod_group
from tests.conftest import schedule
from tests.unit.plugins.queues.test_queues_plugin import gpu_pod, queue

ONE_NODE = node("n1", cpu="32", nvidia_com__gpu="8")
TWO = [queue("a"), queue("b")]


def running(name: str, gpus: int, queue_name: str = "", priority: int = 0, **kw: Any) -> Any:
    return gpu_pod(name, gpus, queue_name, node_name="n1", phase="Running", priority=priority, **kw)


def evicted(*manifests: dict[str, Any]) -> tuple[set[str], dict[str, str]]:
    result = schedule(ONE_NODE, *manifests)
    return {e.pod for e in result.evictions}, result.unschedulable


def test_a_high_priority_pod_takes_a_lower_pod_of_its_own_queue() -> None:
    gone, _ = evicted(*TWO, running("low", 8, "a"), gpu_pod("high", 8, "a", priority=100))
    assert gone == {"default/low"}


def test_a_high_priority_pod_never_takes_another_queues_pod() -> None:
    gone, pending = evicted(*TWO, running("low", 8, "b"), gpu_pod("high", 8, "a", priority=100))
    assert gone == set()
    assert "No preemption victims found" in pending["default/high"]


def test_of_two_lower_pods_only_the_one_in_the_preemptors_queue_goes() -> None:
    gone, _ = evicted(
        *TWO,
        running("other", 4, "b"),
        running("mine", 4, "a"),
        gpu_pod("high", 4, "a", priority=100),
    )
    assert gone == {"default/mine"}


def test_pods_in_no_queue_preempt_only_pods_in_no_queue() -> None:
    gone, _ = evicted(*TWO, running("queued", 8, "a"), gpu_pod("free", 8, priority=100))
    assert gone == set()
    gone, _ = evicted(*TWO, running("loose", 8), gpu_pod("free", 8, priority=100))
    assert gone == {"default/loose"}


def test_without_queue_objects_preemption_is_as_before() -> None:
    gone, _ = evicted(running("low", 8, "b"), gpu_pod("high", 8, "a", priority=100))
    assert gone == {"default/low"}  # the labels name queues that do not exist: no queues


def test_twins_in_two_queues_get_their_own_answers() -> None:
    # Same shape and priority, different queues: the first finds no victim in its queue;
    # its answer must not be handed to the second, which has one.
    gone, pending = evicted(
        *TWO,
        running("low-b", 8, "b"),
        gpu_pod("high-a", 8, "a", priority=100, created="2026-11-22T08:00:00Z"),
        gpu_pod("high-b", 8, "b", priority=100, created="2026-11-22T08:30:00Z"),
    )
    assert gone == {"default/low-b"}
    assert "default/high-a" in pending


def test_a_gang_preempts_only_within_its_queue() -> None:
    group = pod_group("g", 2)
    group["metadata"]["labels"] = {"batchsched.io/queue": "a"}
    members = [
        gpu_pod(
            f"g-{i}", 4, priority=100, namespace="ml", labels={"scheduling.x-k8s.io/pod-group": "g"}
        )
        for i in range(2)
    ]
    gone, pending = evicted(*TWO, running("low-b", 8, "b"), group, *members)
    assert gone == set()
    assert "0 pod(s) may be preempted" in pending["ml/g-0"]
    gone, _ = evicted(*TWO, running("low-a", 8, "a"), group, *members)
    assert gone == {"default/low-a"}
