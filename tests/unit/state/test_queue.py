from collections.abc import Hashable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from batchsched.objects.records import Pod, PodCondition
from batchsched.state.queue import SchedulingQueue


def p(name: str, priority: int = 0, created: float | None = None) -> Pod:
    pod = Pod(namespace="ns", name=name, priority=priority)
    if created is not None:
        pod.creation_timestamp = datetime.fromtimestamp(created, UTC)
    return pod


def drain(queue: SchedulingQueue) -> list[str]:
    out = []
    while (entry := queue.pop()) is not None:
        out.append(entry.pod.name)
    return out


def test_order_is_priority_then_enqueue_time_then_name() -> None:
    queue = SchedulingQueue()
    queue.add(p("b", 0, created=10), now=100)
    queue.add(p("a", 0, created=10), now=100)
    queue.add(p("early", 0, created=5), now=100)
    queue.add(p("high", 5, created=50), now=100)
    assert drain(queue) == ["high", "early", "a", "b"]


def test_backoff_doubles_from_one_second_to_ten() -> None:
    queue = SchedulingQueue()
    assert [queue.backoff_seconds(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert queue.backoff_seconds(5000) == 10  # however often a pod failed


def test_unschedulable_pod_waits_for_a_cluster_change_then_backs_off() -> None:
    queue = SchedulingQueue()
    queue.add(p("x"), now=0)
    assert drain(queue) == ["x"]
    queue.mark_unschedulable("ns/x", now=0, generation=7)
    queue.refresh(now=100, generation=7)  # nothing changed: still waiting
    assert drain(queue) == []
    queue.refresh(now=100.5, generation=8)  # changed, backoff (1 s from t=0) already over
    assert drain(queue) == ["x"]
    queue.mark_unschedulable("ns/x", now=200, generation=8)
    queue.refresh(now=201, generation=9)  # second failure: 2 s backoff
    assert drain(queue) == []
    assert queue.next_wakeup() == 202
    queue.refresh(now=202, generation=9)
    assert drain(queue) == ["x"]


def test_long_waiting_pods_are_retried_even_without_changes() -> None:
    queue = SchedulingQueue(max_unschedulable_seconds=300)
    queue.add(p("x"), now=0)
    drain(queue)
    queue.mark_unschedulable("ns/x", now=0, generation=1)
    queue.refresh(now=299, generation=1)
    assert drain(queue) == []
    queue.refresh(now=300, generation=1)
    assert drain(queue) == ["x"]


def test_removed_pods_never_pop() -> None:
    queue = SchedulingQueue()
    queue.add(p("x"), now=0)
    queue.remove("ns/x")
    assert drain(queue) == [] and len(queue) == 0


def test_flush_makes_everything_active() -> None:
    queue = SchedulingQueue()
    for name in ("a", "b"):
        queue.add(p(name), now=0)
    drain(queue)
    queue.mark_unschedulable("ns/a", now=0, generation=1)
    queue.mark_unschedulable("ns/b", now=0, generation=1)
    queue.flush()
    assert drain(queue) == ["a", "b"]


class StillCluster:
    """Hints for a cluster where nothing happens: no change wakes anyone."""

    def marks(self) -> Hashable:
        return 0

    def moved(self, since: Hashable) -> bool:
        return False

    def wakes(self, asked: Sequence[tuple[Hashable, Pod, Hashable]]) -> list[str | None]:
        return [None] * len(asked)

    def failed_as_is(self, pod_key: str) -> bool:
        return False


def test_a_new_version_of_a_waiting_pod_backs_off_then_is_tried_however_it_was_filed() -> None:
    """Upstream's unschedulable-pod update: more than the status changed, so the pod may fit
    now; it waits out its backoff from its failure, not the next cluster change."""
    queue = SchedulingQueue()
    queue.hints = StillCluster()
    for name in ("alone", "grouped", "twin"):
        queue.add(p(name), now=0)
    drain(queue)
    queue.mark_unschedulable("ns/alone", now=10, generation=1)  # no hint group
    for name in ("grouped", "twin"):
        queue.mark_unschedulable(f"ns/{name}", now=10, generation=1, group="shape")
    for name in ("alone", "grouped"):
        queue.add(replace(p(name), labels={"tier": "gold"}), now=10.5)
    assert queue.incoming["UnschedulablePodUpdate"] == 2
    queue.refresh(now=10.5, generation=1)  # nothing else changed, backoff not over yet
    assert drain(queue) == []
    assert queue.next_wakeup() == 11
    queue.refresh(now=11, generation=1)
    [*tried] = (queue.pop(), queue.pop(), queue.pop())
    assert [e.pod.name if e else None for e in tried] == ["alone", "grouped", None]
    assert all(e.pod.labels == {"tier": "gold"} for e in tried if e is not None)
    assert queue.pending_counts()["unschedulable"] == 1  # the twin, unchanged, still waits


def test_a_waiting_pods_new_status_alone_does_not_bring_it_back() -> None:
    """Its condition, nomination or resourceVersion (our own writes among them) change
    nothing it is scheduled by."""
    queue = SchedulingQueue()
    queue.add(p("x"), now=0)
    drain(queue)
    queue.mark_unschedulable("ns/x", now=0, generation=1)
    written = PodCondition("PodScheduled", "False", None, "Unschedulable", "0/1 nodes")
    status = {
        "conditions": (written,),
        "nominated_node_name": "n1",
        "resource_version": "42",
        "phase": "Pending",
    }
    queue.add(replace(p("x"), **status), now=5)
    queue.refresh(now=100, generation=1)
    assert drain(queue) == [] and "UnschedulablePodUpdate" not in queue.incoming
