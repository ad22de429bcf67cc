"""Reservations across Queues go in the scheduler's order (docs/backfill.md#rules): pods in no
queue first, then the queue order (docs/queues.md#queue-order), each holder rated by its first
pod, with a reservation taken earlier in the walk counted in its queue's usage."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from batchsched.commands.schedule import build_state
from batchsched.config import parse_config
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Node, Pod
from batchsched.plugins.backfill.candidates import Candidates
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.queue import default_sort_key
from batchsched.state.queue_order import lane_of
from tests.builders import node, pod, pod_group, priority_class
from tests.conftest import NOW, objects_of
from tests.unit.plugins.backfill.pods import gpus, running

GPU = "nvidia.com/gpu"


def _queue(name: str) -> dict[str, Any]:
    # Its running pods are never reclaimed: the pods waiting here reserve.
    spec = {"resources": {GPU: {}}, "reclaimMinRuntime": "2h"}
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def test_a_queue_under_its_share_reserves_before_an_older_higher_priority_gang_over_it() -> None:
    # 32 GPUs, fair shares 16 and 16. Queue a runs 24 GPUs, b 8 (1 h each, priority 1000:
    # nothing is preempted). a's gang (priority 100, 08:00) would take a to 40/16, b's pod
    # (priority 0, 09:55) b to 16/16. At 10:00 b's pod is too young and the gang reserves;
    # at 10:06 b's pod may reserve and comes first in the scheduler's order: it takes the one
    # reservation, which the queue sort alone (priority, then creation) gave the gang.
    def member(name: str) -> dict[str, Any]:
        labels = {GROUP_LABEL: "g", QUEUE_LABEL: "a"}
        created = "2026-11-22T08:00:00Z"
        return pod(
            name,
            namespace="ml",
            labels=labels,
            priority_class="high",
            created=created,
            extra_requests=gpus(8),
        )

    busy = [
        running(f"run-{q}{i}", 8, "1h", on=f"n{n}", labels={QUEUE_LABEL: q}, priority=1000)
        for n, (q, i) in enumerate([("a", 0), ("a", 1), ("a", 2), ("b", 0)])
    ]
    state = build_state(
        objects_of(
            priority_class("high", 100, preemption_policy="Never"),
            _queue("a"),
            _queue("b"),
            *(node(f"n{n}", nvidia_com__gpu="8") for n in range(4)),
            *busy,
            pod_group("g", 2),
            member("g-0"),
            member("g-1"),
            pod(
                "under",
                labels={QUEUE_LABEL: "b"},
                created="2026-11-22T09:55:00Z",
                extra_requests=gpus(8),
            ),
        )
    )
    config = parse_config(
        {"profiles": [{"pluginConfig": [{"name": "Backfill", "args": {"maxReservations": 1}}]}]}
    )
    scheduler = Scheduler(state, config)
    scheduler.schedule_pass(NOW)
    assert list(state.start_reservations.by_holder) == ["PodGroup ml/g"]
    scheduler.schedule_pass(NOW + timedelta(minutes=6))
    assert list(state.start_reservations.by_holder) == ["Pod default/under"]
    assert "reserved n0; expected start" in scheduler.messages["default/under"]
    assert "reserved n" not in scheduler.messages["ml/g-0"]


def _state(tree: dict[str, str], asks: dict[str, tuple[str, int]]) -> ClusterState:
    """A 4-GPU node, the queues of `tree` (name -> parent) and a pending pod per `asks`
    (name -> its queue, "" for none, and GPUs), all created at the same time."""
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 4}))
    for name, parent in tree.items():
        state.upsert_queue(Queue(name, QUEUE_API, parent, {GPU: QueueQuota()}))
    for name, (leaf, count) in asks.items():
        labels = {QUEUE_LABEL: leaf} if leaf else {}
        state.upsert_pod(Pod("ml", name, labels=labels, requests={GPU: count}))
    return state


def _walk(state: ClusterState, count: bool = False) -> list[str]:
    """Every pending pod a candidate, walked in order; each counted (`count`) as it comes."""
    candidates = Candidates()
    for pending in state.pods.pending.values():
        order = default_sort_key(pending, 0.0)
        candidates.add(f"Pod {pending.key}", order, lane_of(state, pending))

    def pods_of(holder: str) -> list[Pod]:
        return [state.pods.pending[holder.removeprefix("Pod ")]]

    walk = candidates.walk(state, pods_of)
    order = []
    for holder in walk:
        order.append(holder.removeprefix("Pod ml/"))
        if count:
            walk.count()
    return order


def test_pods_in_no_queue_come_first() -> None:
    state = _state({"a": ""}, {"a-0": ("a", 1), "z-loose": ("", 1), "a-1": ("a", 1)})
    assert _walk(state) == ["z-loose", "a-0", "a-1"]


def test_queues_tie_by_name() -> None:
    # b's pod sorts first by name, but a and b rate alike (1 of 2 GPUs): a goes first.
    state = _state({"b": "", "a": ""}, {"0-b": ("b", 1), "1-a": ("a", 1)})
    assert _walk(state) == ["1-a", "0-b"]


def test_a_reservation_counts_in_its_queues_usage_for_the_rest_of_the_walk() -> None:
    # Shares 2 and 2. Counted, a's first reservation takes a to 1 of 2: b's first pod rates
    # lower than a's second (1/2 against 2/2). Uncounted (none reserved), a keeps its turn
    # as nothing was placed.
    asks = {"a-0": ("a", 1), "a-1": ("a", 1), "b-0": ("b", 1), "b-1": ("b", 1)}
    state = _state({"a": "", "b": ""}, asks)
    assert _walk(state, count=True) == ["a-0", "b-0", "a-1", "b-1"]
    assert _walk(state) == ["a-0", "a-1", "b-0", "b-1"]


def test_each_level_of_the_tree_chooses_among_its_children() -> None:
    # org (x and y) and ops share 4 GPUs: 2 each, x and y 1 each. ops's pod goes first (1/2
    # against org's 1/2, by name), then x (1/1 ties y, by name) once counted, then ops again
    # (2/2 against org's 2/2: "ops" < "org"), then y.
    tree = {"org": "", "x": "org", "y": "org", "ops": ""}
    asks = {"x-0": ("x", 1), "y-0": ("y", 1), "ops-0": ("ops", 1), "ops-1": ("ops", 1)}
    assert _walk(_state(tree, asks), count=True) == ["ops-0", "x-0", "ops-1", "y-0"]


def test_a_holder_gone_is_met_at_once_and_the_walk_goes_on() -> None:
    state = _state({"a": "", "b": ""}, {"a-0": ("a", 1), "b-0": ("b", 1), "b-1": ("b", 1)})
    candidates = Candidates()
    for pending in state.pods.pending.values():
        candidates.add(
            f"Pod {pending.key}", default_sort_key(pending, 0.0), lane_of(state, pending)
        )
    state.remove_pod("ml/b-0")
    pending = state.pods.pending

    def pods_of(holder: str) -> list[Pod]:
        key = holder.removeprefix("Pod ")
        return [pending[key]] if key in pending else []

    met = []
    for holder in candidates.walk(state, pods_of):
        met.append(holder)
        if holder == "Pod ml/b-0":
            candidates.discard(holder)  # as Backfill drops it
    assert met == ["Pod ml/b-0", "Pod ml/a-0", "Pod ml/b-1"]
    assert "Pod ml/b-0" not in candidates
