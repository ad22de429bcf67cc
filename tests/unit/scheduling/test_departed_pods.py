"""What the scheduler keeps per pod lives no longer than the pod (issue 32, point 14): each
holder that kept pods that had come and gone, tied to the pod's lifetime or bounded."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from batchsched.objects.dra import AllocatedDevice, Allocation, ResourceClaim
from batchsched.objects.records import Node, Pod
from batchsched.preemption.gang_victims import GangSearchMemo
from batchsched.preemption.victims import VictimRule
from batchsched.state.cluster import ClusterState
from batchsched.state.queue import SchedulingQueue
from tests.builders import pod, pod_group
from tests.churn import MARKER, T0, World, job, play, world
from tests.leftovers import holders

GI = 2**30


def kept(churned: World, holder: str) -> dict[str, int]:
    """Paths through `holder` to names of pods that are gone."""
    return {p: n for p, n in holders(churned.scheduler, MARKER).items() if holder in p}


def bound(name: str, node: str = "a") -> Pod:
    return Pod("ns", name, requests={"cpu": 100, "pods": 1}, node_name=node)


def test_the_change_log_keeps_pods_as_far_back_as_a_hint_may_ask() -> None:
    state = ClusterState()
    state.upsert_node(Node("a", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    for i in range(3):
        state.upsert_pod(bound(f"early-{i}"))
    mark = state.nodes.change_mark()
    state.remove_pod("ns/early-0")
    state.upsert_pod(bound("late"))
    state.nodes.forget_pods_before(mark)
    # From `mark` on, the log still names the pods behind each change, the one gone too.
    since = state.nodes.pods_changed_since(mark)
    assert since is not None
    assert [p.name for p in since if p is not None] == ["early-0", "late"]
    assert state.nodes.pods_changed_since(mark - 1) is None  # no hint asks that far back
    state.nodes.forget_pods_before(None)
    assert state.nodes.pods_changed_since(mark) is None
    assert state.nodes.pods_changed_since(state.nodes.change_mark()) is not None


def test_a_tentative_scope_keeps_the_log_where_it_is() -> None:
    state = ClusterState()
    state.upsert_node(Node("a", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    state.upsert_pod(bound("p"))
    mark = state.nodes.change_mark()
    with state.nodes.tentative():
        state.nodes.forget_pods_before(None)
    assert state.nodes.pods_changed_since(mark) is not None


def test_a_pass_lets_the_log_forget_pods_no_waiting_pod_asks_about() -> None:
    churned = world()
    play(churned, [job("plain", 0, 0, 1), job("plain", 1, 1, 0)])
    assert kept(churned, "_changed_pods") == {}


def test_the_framework_and_the_room_hint_forget_pods_that_left() -> None:
    churned = world()
    for i in range(8):  # both nodes full of 1-cpu pods
        churned.create("Pod", pod(f"{MARKER}-full-{i}", cpu="1", priority_class="low"))
    churned.run_pass(0)
    waiting = pod(f"{MARKER}-waiting", cpu="3", priority_class="low")
    churned.create("Pod", waiting)
    churned.run_pass(1)
    # A pod leaves: room moved, so the waiting pod's room hint is asked (and remembers it).
    churned.delete("Pod", pod(f"{MARKER}-full-0"))
    churned.run_pass(2)
    assert "default/gone-waiting" in churned.state.pods.pending
    for i in range(1, 8):
        churned.delete("Pod", pod(f"{MARKER}-full-{i}"))
    churned.delete("Pod", waiting)
    churned.run_pass(3)
    assert kept(churned, "(ShapeKeys)._memo") == {}
    assert kept(churned, "._pod_needs") == {}


def test_dynamic_resources_forgets_the_claims_held_for_a_pod_that_left() -> None:
    churned = world()
    play(churned, [job("claimed", 0, 0, 1)])
    assert kept(churned, "._held") == {}


def test_coscheduling_forgets_the_events_of_a_group_that_is_gone() -> None:
    churned = world()
    name = f"{MARKER}-stuck"
    churned.create("PodGroup", pod_group(name, 2, namespace="default"))
    label = {"scheduling.x-k8s.io/pod-group": name}
    members = [pod(f"{name}-{m}", cpu="64", labels=label) for m in range(2)]
    for member in members:
        churned.create("Pod", member)
    churned.run_pass(0)
    assert kept(churned, "._events")  # the group was told why it waits
    for member in members:
        churned.delete("Pod", member)
    churned.delete("PodGroup", pod_group(name, 2, namespace="default"))
    churned.run_pass(1)
    assert kept(churned, "._events") == {}
    assert kept(churned, "._backoff_until") == {}


def test_the_queue_sweeps_timed_records_of_pods_that_left() -> None:
    queue = SchedulingQueue()
    stays = Pod("ns", "stays", requests={"cpu": 1})
    queue.add(stays, 0.0)
    for i in range(500):
        gone = Pod("ns", f"{MARKER}-{i}", requests={"cpu": 1})
        queue.add(gone, float(i))
        queue.mark_unschedulable(gone.key, float(i), 0)
        queue.wake_at(gone.key, 10_000.0)
        queue.remove(gone.key)
    assert len(queue._failures) <= 2 * len(queue) + 64
    assert len(queue._wakeups) <= 2 * len(queue) + 64
    queue.remove(stays.key)
    assert (len(queue._failures), len(queue._wakeups), len(queue._backoff)) == (0, 0, 0)


def test_gang_search_answers_of_an_earlier_time_are_let_go() -> None:
    state = ClusterState()
    state.upsert_node(Node("a", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    state.upsert_pod(replace(bound("victim"), priority=0))
    preemptor = Pod("ns", "preemptor", requests={"cpu": 4000, "pods": 1}, priority=100)
    state.upsert_pod(preemptor)
    memo = GangSearchMemo(state)
    demand = state.pods.demand(preemptor)
    for seconds in range(5):
        at = T0.replace(second=seconds)
        memo.answers(VictimRule(state, preemptor, 100, at, lambda name: (False, None)), demand)
    assert len(memo._answers) == 1


def test_nominations_let_their_sums_go_with_the_last_one() -> None:
    state = ClusterState()
    state.upsert_node(Node("a", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    nominee = Pod("ns", "nominee", requests={"cpu": 1000, "pods": 1}, priority=10)
    state.upsert_pod(nominee)
    state.nominate(nominee.key, "a")
    low = Pod("ns", "low", requests={"cpu": 1, "pods": 1}, priority=0)
    assert state.nominations.held_for(low, state.nodes.free[: state.nodes.rows]) is not None
    assert state.nominations._sums
    state.remove_pod(nominee.key)
    assert state.nominations._sums == {}
    assert np.array_equal(state.free_for(low), state.nodes.free[: state.nodes.rows])


def test_a_pod_deleted_while_its_bind_is_in_flight_gives_its_claims_back() -> None:
    state = ClusterState()
    state.devices.live = True
    state.upsert_node(Node("a", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    claim = ResourceClaim("ns", "c", ())
    state.upsert_dra_object(claim)
    pending = Pod("ns", "p", requests={"cpu": 100, "pods": 1})
    state.upsert_pod(pending)
    device = AllocatedDevice("dev", "gpu.example.com", "a", "dev-0")
    state.devices.allocate(claim, Allocation((device,), ()), "p", "a")
    state.assume(pending.key, "a")
    state.remove_pod(pending.key)
    assert state.devices.claims["ns/c"] == claim
    assert state.devices._assumed_by == {}
