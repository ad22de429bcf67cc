"""Reclaim's rules (preemption/reclaim.py, docs/queues.md#reclaim), one per test, with the
fair shares given: team `a` (empty) takes back room team `b` borrowed."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import numpy as np

from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import PodGroup
from batchsched.preemption.reclaim import Reclaimed, Reclaimer, Shares
from batchsched.state.cluster import ClusterState
from tests.conftest import schedule
from tests.preemption_world import NOW, Item, node, pdb, pod, priority_class, state_of


def queue(name: str, parent: str = "", guaranteed: int = 0, **kw: object) -> Queue:
    quota = QueueQuota(guaranteed, guaranteed)
    return Queue(name, QUEUE_API, parent, {"cpu": quota}, **kw)  # type: ignore[arg-type]


def in_queue(name: str, cpu: int, queue_name: str, **kw: object) -> Item:
    labels = {QUEUE_LABEL: queue_name, **kw.pop("labels", {})}  # type: ignore[dict-item]
    return pod(name, cpu, labels=labels, **kw)  # type: ignore[arg-type]


# Team b fills both nodes: on each, one pod started an hour ago and one two hours ago.
B_PODS = [
    in_queue("b1-old", 2000, "b", on="n1", started=timedelta(hours=2)),
    in_queue("b1-new", 2000, "b", on="n1"),
    in_queue("b2-old", 2000, "b", on="n2", started=timedelta(hours=2)),
    in_queue("b2-new", 2000, "b", on="n2"),
]
HALVES: Shares = {"a": {"cpu": 4000}, "b": {"cpu": 4000}}


def world(*items: Item, queues: tuple[Queue, ...] = (queue("a"), queue("b"))) -> ClusterState:
    state = state_of(node("n1"), node("n2"), *items, in_queue("p", 2000, "a"))
    for q in queues:
        state.upsert_queue(q)
    return state


def reclaim(state: ClusterState, shares: Shares = HALVES, leaf: str = "a") -> Reclaimed:
    preemptor = state.pods.by_key["default/p"]
    everywhere = np.ones(state.nodes.rows, dtype=np.bool_)
    return Reclaimer(state).find(
        preemptor,
        leaf,
        state.pods.demand(preemptor),
        state.free_for(preemptor),
        everywhere,
        NOW,
        shares,
    )


def victims(found: Reclaimed) -> list[str]:
    return [v.key for v in found.victims]


def test_a_queue_within_its_share_takes_back_the_most_recent_pod_of_a_borrowing_one() -> None:
    found = reclaim(world(*B_PODS))
    assert found.row == 0 and victims(found) == ["default/b1-new"]
    assert found.queues == {"default/b1-new": "b"}


def test_not_when_the_preemptor_s_queue_would_go_over_its_share() -> None:
    found = reclaim(world(*B_PODS), {"a": {"cpu": 1000}, "b": {"cpu": 4000}})
    assert found.row is None
    assert found.message == "reclaim: a would go over its fair share."


def test_not_from_a_queue_within_its_share() -> None:
    found = reclaim(world(*B_PODS), {"a": {"cpu": 4000}, "b": {"cpu": 8000}})
    assert found.message == "reclaim: b is within its fair share."


def test_never_so_far_that_the_victim_ends_below_the_preemptor() -> None:
    # b at 8000/7000 would fall to 6000/7000 = 0.86, below a's 2000/2100 = 0.95.
    found = reclaim(world(*B_PODS), {"a": {"cpu": 2100}, "b": {"cpu": 7000}})
    assert found.row is None
    assert found.message == "reclaim: b would fall below a's share."


def test_never_below_guaranteed() -> None:
    found = reclaim(world(*B_PODS, queues=(queue("a"), queue("b", guaranteed=8000))))
    assert found.message == "reclaim: b would fall below its guaranteed cpu."
    # 2000 above the guarantee: exactly one pod may go.
    found = reclaim(world(*B_PODS, queues=(queue("a"), queue("b", guaranteed=6000))))
    assert victims(found) == ["default/b1-new"]


def test_pods_already_terminating_count_as_gone_for_guaranteed() -> None:
    # b is guaranteed 6000 of its 8000: one pod may go, and b1-old is already going.
    leaving = [*B_PODS[:1], in_queue("b1-gone", 2000, "b", on="n1", terminating=True)]
    found = reclaim(world(*leaving, *B_PODS[2:], queues=(queue("a"), queue("b", guaranteed=6000))))
    assert found.message == "reclaim: b would fall below its guaranteed cpu."


def test_a_wave_of_preemptors_in_one_pass_leaves_the_victim_its_guaranteed() -> None:
    manifests = [
        {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        for name, spec in [
            ("a", {"resources": {GPU: {"nominal": 2}}}),
            ("b", {"resources": {GPU: {"guaranteed": 1, "nominal": 1}}}),
            ("a1", {"parent": "a", "resources": {GPU: {"nominal": 0}}}),
            ("b1", {"parent": "b", "resources": {GPU: {"guaranteed": 1, "nominal": 1}}}),
        ]
    ]
    manifests.append(node_manifest("n0", gpus=8))
    for i, gpus in enumerate((1, 3, 4)):
        manifests.append(pod_manifest(f"run-{i}", gpus, "b1", on="n0", minute=i // 2))
    for i, gpus in enumerate((1, 3, 1)):
        manifests.append(pod_manifest(f"wait-{i}", gpus, "a1", minute=i))
    result = schedule(*manifests)
    taken = {e.pod for e in result.evictions}
    assert taken  # a is below its nominal 2 and b above its 1: reclaim happens
    # However many preemptors take from b in the pass, b keeps its guaranteed GPU.
    kept = {"default/run-0": 1, "default/run-1": 3, "default/run-2": 4}
    assert sum(gpus for key, gpus in kept.items() if key not in taken) >= 1


GPU = "nvidia.com/gpu"


def node_manifest(name: str, gpus: int) -> dict[str, Any]:
    room = {"cpu": "16", "memory": "32Gi", GPU: str(gpus), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": room, "capacity": room},
    }


def pod_manifest(
    name: str, gpus: int, queue_name: str, on: str = "", minute: int = 0
) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}
    created = f"2026-11-22T09:{minute:02d}:00Z"
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {QUEUE_LABEL: queue_name},
            "creationTimestamp": created,
        },
        "spec": {
            "schedulerName": "batchsched",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Pending"},
    }
    if on:
        body["spec"]["nodeName"] = on
        body["status"] = {"phase": "Running", "startTime": f"2026-11-22T09:{59 - minute:02d}:00Z"}
    return body


def test_never_a_pod_younger_than_its_queue_s_reclaim_min_runtime() -> None:
    ninety = (queue("a"), queue("b", reclaim_min_runtime=5400.0))
    assert victims(reclaim(world(*B_PODS, queues=ninety))) == ["default/b1-old"]
    three_hours = (queue("a"), queue("b", reclaim_min_runtime=10800.0))
    found = reclaim(world(*B_PODS, queues=three_hours))
    assert found.row is None
    assert found.message == "reclaim: b's pods are younger than its reclaimMinRuntime 3h."
    # The answer changes when the oldest pod comes of age: two hours ago plus three hours.
    assert found.changes_at == (NOW + timedelta(hours=1)).timestamp()


def test_never_a_pod_inside_its_priority_class_s_toleration_window() -> None:
    guarded = priority_class("guarded", 0, seconds="7200")  # two hours from being scheduled
    pods = [
        in_queue("b1", 4000, "b", on="n1", klass="guarded"),  # scheduled an hour ago
        in_queue("b2", 4000, "b", on="n2", klass="guarded", started=timedelta(hours=3)),
    ]
    assert victims(reclaim(world(guarded, *pods))) == ["default/b2"]
    found = reclaim(world(guarded, *pods[:1]), {"a": {"cpu": 4000}, "b": {"cpu": 2000}})
    assert found.message == "reclaim: b's pods are inside their PriorityClass's toleration window."
    assert found.changes_at == (NOW + timedelta(hours=1)).timestamp()


def test_never_from_a_queue_that_is_not_reclaimable() -> None:
    found = reclaim(world(*B_PODS, queues=(queue("a"), queue("b", reclaimable=False))))
    assert found.message == "reclaim: b is not reclaimable."


def test_the_queue_most_above_its_share_goes_first_then_the_lowest_priority() -> None:
    pods = [
        in_queue("b-low", 2000, "b", on="n1", priority=1),
        in_queue("c-high", 2000, "c", on="n1", priority=100),
        in_queue("c-low", 2000, "c", on="n2", priority=1),
        in_queue("c-lowest", 2000, "c", on="n2", priority=0),
    ]
    queues = (queue("a"), queue("b"), queue("c"))
    shares: Shares = {"a": {"cpu": 4000}, "b": {"cpu": 1000}, "c": {"cpu": 2000}}
    # b: 2000/1000 = 2, c: 6000/2000 = 3: c goes first; on n2 one victim is enough.
    found = reclaim(world(*pods, queues=queues), shares)
    assert victims(found) == ["default/c-lowest"]


def test_a_pdb_protected_pod_is_spared_when_another_node_needs_none() -> None:
    budget = pdb("keep", {"app": "keep"}, 0)
    pods = [
        in_queue("b1", 4000, "b", on="n1", labels={"app": "keep"}),
        in_queue("b2", 4000, "b", on="n2"),
    ]
    assert victims(reclaim(world(budget, *pods))) == ["default/b2"]


def test_a_gang_goes_whole() -> None:
    label = {GROUP_LABEL: "g"}
    pods = [
        in_queue("g-1", 2000, "b", on="n1", labels=label),
        in_queue("g-2", 2000, "b", on="n2", labels=label),
        in_queue("b1", 2000, "b", on="n1", started=timedelta(hours=3)),
        in_queue("b2", 2000, "b", on="n2", started=timedelta(hours=3)),
    ]
    state = world(*pods)
    state.upsert_pod_group(PodGroup("default", "g", min_member=2))
    found = reclaim(state, {"a": {"cpu": 4000}, "b": {"cpu": 2000}})
    assert victims(found) == ["default/g-1", "default/g-2"]


def test_queues_are_compared_below_their_common_ancestor() -> None:
    # org holds a and b; c is another root. Between a and b, org's children compare; between
    # a and c, the roots org and c do.
    queues = (queue("org"), queue("a", "org"), queue("b", "org"), queue("c"))
    pods = [
        in_queue("b1", 2000, "b", on="n1", started=timedelta(hours=2)),
        in_queue("b2", 2000, "b", on="n1"),
        in_queue("c1", 2000, "c", on="n2", started=timedelta(hours=2)),
        in_queue("c2", 2000, "c", on="n2"),
    ]
    shares: Shares = {
        "org": {"cpu": 6000},
        "c": {"cpu": 2000},
        "a": {"cpu": 3000},
        "b": {"cpu": 3000},
    }
    # b at 4000/3000 against a's 2000/3000; c at 4000/2000 against org's 6000/6000: both
    # borrow, c more: its most recent pod goes.
    assert victims(reclaim(world(*pods, queues=queues), shares)) == ["default/c2"]
    # With org's share 5000, org would go over it: c is out of reach, b is not.
    found = reclaim(world(*pods, queues=queues), {**shares, "org": {"cpu": 5000}})
    assert victims(found) == ["default/b2"]


def test_every_queue_the_pod_joins_up_to_its_level_stays_within_its_share() -> None:
    # org holds a and b; c is another root and borrows. The roots compare (org 2000/6000
    # with the pod against c's 8000/2000), but a itself would be at 2000/1000: over its share
    # inside org, it would take b's room there (b would take it back). KAI checks the
    # reclaimer's whole path alike.
    queues = (queue("org"), queue("a", "org"), queue("b", "org"), queue("c"))
    pods = [in_queue(f"c{i}", 2000, "c", on=f"n{1 + i // 2}") for i in range(4)]
    shares: Shares = {"org": {"cpu": 6000}, "c": {"cpu": 2000}, "a": {"cpu": 1000}}
    found = reclaim(world(*pods, queues=queues), {**shares, "b": {"cpu": 5000}})
    assert found.row is None and found.message == "reclaim: a would go over its fair share."
    shares = {**shares, "a": {"cpu": 2000}, "b": {"cpu": 4000}}
    assert len(victims(reclaim(world(*pods, queues=queues), shares))) == 1


def test_nothing_to_say_without_other_queues_in_use() -> None:
    found = reclaim(world())
    assert found.row is None and found.message == "" and found.changes_at == math.inf


def test_pods_of_queues_out_of_reach_on_other_nodes_change_nothing() -> None:
    # c and d are within their shares; their pods (interned after b's) are not victims.
    queues = (queue("a"), queue("b"), queue("c"), queue("d"))
    pods = [
        in_queue("b1", 2000, "b", on="n1", started=timedelta(hours=2)),
        in_queue("b2", 2000, "b", on="n1"),
        in_queue("c1", 2000, "c", on="n2"),
        in_queue("d1", 2000, "d", on="n2"),
    ]
    shares: Shares = {
        "a": {"cpu": 4000},
        "b": {"cpu": 2000},
        "c": {"cpu": 2000},
        "d": {"cpu": 2000},
    }
    assert victims(reclaim(world(*pods, queues=queues), shares)) == ["default/b2"]
