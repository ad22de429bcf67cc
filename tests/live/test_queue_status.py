"""The Queue status patch: only the fields that changed, null for what is gone, the Valid
condition's transition time kept while its truth holds, other writers' conditions kept."""

from __future__ import annotations

from batchsched.controllers.queues import QueueStatus
from batchsched.live.events import EventRecorder
from batchsched.live.metrics import Metrics
from batchsched.live.queue_status import QueueStatusWriter, merge_patch, status_json
from batchsched.objects.queues import QUEUE_API, read_queue
from batchsched.state.cluster import ClusterState
from tests.live.conftest import client_for
from tests.live.fake_apiserver import FakeApiServer
from tests.live.test_loop_queues import status_writes


def test_the_patch_carries_changes_and_nulls_what_went_away() -> None:
    before = {
        "allocated": {"cpu": "2", "nvidia.com/gpu": "1"},
        "borrowed": {"cpu": "0"},
        "pendingPods": 3,
        "someoneElse": "kept",
    }
    after = {"allocated": {"cpu": "3"}, "borrowed": {"cpu": "0"}, "pendingPods": 3}
    assert merge_patch(before, after) == {"allocated": {"cpu": "3", "nvidia.com/gpu": None}}
    assert merge_patch(after, after) == {}
    assert merge_patch({}, after) == after  # a first write: everything


def test_the_condition_keeps_its_transition_time_while_its_truth_holds() -> None:
    broken = QueueStatus(
        {}, {}, {}, 1, problem="Queue q: spec.parent: no Queue 'p'", own_problem=True
    )
    first = status_json(broken, {"conditions": [{"type": "Other", "status": "True"}]}, "T1")
    [other, cond] = first["conditions"]
    assert other == {"type": "Other", "status": "True"}
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
        "False",
        "InvalidQueueTree",
        "T1",
    )
    assert status_json(broken, first, "T2")["conditions"][1]["lastTransitionTime"] == "T1"
    fixed = status_json(QueueStatus({}, {}, {}, 0), first, "T3")["conditions"][1]
    assert (fixed["status"], fixed["message"], fixed["lastTransitionTime"]) == ("True", "", "T3")


def test_a_replica_that_takes_the_lead_writes_at_once(api: FakeApiServer) -> None:
    """Its last look as a standby (a moment ago) does not hold back its first write."""
    api.create("queues", {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": "a"}})
    state = ClusterState()
    state.apply("Queue", read_queue(api.get("queues", "a") or {}))
    client = client_for(api)
    leading = [False]
    writer = QueueStatusWriter(
        client,
        EventRecorder(client, "batchsched", "test"),
        Metrics(),
        lambda: leading[0],
        lambda: 5.0,
    )
    writer.tick(state)  # a standby: metrics only
    writer.wait()
    assert status_writes(api, "a") == 0
    leading[0] = True
    writer.tick(state)  # the same instant, now leading
    writer.wait()
    assert status_writes(api, "a") == 1
    writer.shutdown()
