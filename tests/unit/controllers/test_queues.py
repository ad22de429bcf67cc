"""Queue status: allocated and borrowed per named resource, pending pods of the subtree, and
whether the queue (or an ancestor) breaks the tree's rules."""

from __future__ import annotations

from typing import Any

from batchsched.controllers.queues import QueueStatus, queue_statuses
from batchsched.objects.parse import read_pod
from batchsched.objects.queues import QUEUE_API, read_queue
from tests.unit.state.test_queues import GPU, in_queue, state_of


def limited(name: str, parent: str = "", nominal: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {GPU: {"nominal": nominal}}, "parent": parent}
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def test_allocated_borrowed_fair_share_and_pending_add_up_the_subtree() -> None:
    state = state_of(limited("org", nominal=4), limited("a", "org", nominal=1), limited("b", "org"))
    for i in range(3):
        state.apply("Pod", read_pod(in_queue(f"run-{i}", "a", node_name="n1")))
    state.apply("Pod", read_pod(in_queue("wait-a", "a")))
    state.apply("Pod", read_pod(in_queue("wait-b", "b")))
    statuses = queue_statuses(state)
    # Fair shares: org's demand (5) out of the node's 8; a (4 asked) and b (1) split it.
    assert statuses["a"] == QueueStatus({GPU: 3}, {GPU: 2}, {GPU: 4}, 1)
    assert statuses["b"] == QueueStatus({GPU: 0}, {GPU: 0}, {GPU: 1}, 1)
    assert statuses["org"] == QueueStatus({GPU: 3}, {GPU: 0}, {GPU: 5}, 2)


def test_the_faulty_queue_owns_its_problem_and_its_subtree_shares_it() -> None:
    state = state_of(limited("org", "gone"), limited("a", "org"))
    statuses = queue_statuses(state)
    assert statuses["org"].own_problem and not statuses["a"].own_problem
    assert statuses["org"].problem == statuses["a"].problem
    assert statuses["a"].problem.startswith("Queue org: spec.parent: no Queue 'gone'")
    state.apply("Queue", read_queue(limited("gone")))
    assert all(not s.problem for s in queue_statuses(state).values())
