"""Queues in the live loop: status written through the status subresource (only what changed,
at most once a second, by the leader), metrics, and a tree that breaks the rules reported on
the Queue while the rest keeps being scheduled, until it is fixed."""

from __future__ import annotations

from typing import Any

from batchsched.config import parse_config
from batchsched.live.runner import LiveScheduler
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API
from tests.live.conftest import STEADY_LEASE, Launcher, condition, node, node_of, pod
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer


def queue(name: str, parent: str = "", **cpu: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"cpu": cpu}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def queued(name: str, leaf: str, cpu: str = "1") -> dict[str, Any]:
    return pod(name, cpu=cpu, labels={QUEUE_LABEL: leaf})


def status(api: FakeApiServer, name: str) -> dict[str, Any]:
    return dict((api.get("queues", name) or {}).get("status") or {})


def valid(api: FakeApiServer, name: str) -> dict[str, Any]:
    """The Valid condition ({} before the first write)."""
    found = [c for c in status(api, name).get("conditions", []) if c["type"] == "Valid"]
    assert len(found) <= 1
    return dict(found[0]) if found else {}


def wait_passes(api: FakeApiServer, scheduler: LiveScheduler, count: int) -> None:
    """Until the loop has come round `count` more times."""
    target = scheduler.passes + count
    assert api.wait_for(lambda s: scheduler.passes >= target)


def status_writes(api: FakeApiServer, name: str) -> int:
    path = f"/apis/{QUEUE_API}/queues/{name}/status"
    return sum(1 for method, p in api.requests if (method, p) == ("PATCH", path))


def test_status_is_written_and_a_broken_subtree_waits_until_fixed(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1", cpu="8"))
    api.create("queues", queue("org", nominal="2"))
    api.create("queues", queue("a", "org", nominal="1"))
    api.create("queues", queue("lost", "nowhere"))
    api.create("queues", queue("x", "lost"))
    for name in ("a-1", "a-2"):
        api.create("pods", queued(name, "a"))
    api.create("pods", queued("x-1", "x"))
    api.create("pods", pod("free"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "a-2") == "n1" and node_of(s, "free") == "n1")
    assert api.wait_for(lambda s: condition(s, "x-1") is not None)
    cond = condition(api, "x-1")
    assert cond is not None and cond["message"] == (
        "queue 'x' (label batchsched.io/queue of the pod) is ignored while its tree breaks the "
        "rules: Queue lost: spec.parent: no Queue 'nowhere' (known: a, lost, org, x)"
    )
    # The binds land after the first look at the queues: the next look, a second later.
    assert api.wait_for(lambda s: valid(s, "a").get("status") == "True")
    run.scheduler.actuator.wait()
    launch.clock.advance(1.0)
    # Every queue's write of that look (the loop may still be handing them out).
    assert api.wait_for(
        lambda s: (
            status(s, "a").get("allocated") == {"cpu": "2"}
            and status(s, "org").get("allocated") == {"cpu": "2"}
            and status(s, "x").get("pendingPods") == 1
            and status(s, "lost").get("pendingPods") == 1
        )
    )
    assert status(api, "a")["borrowed"] == {"cpu": "1"}
    assert status(api, "a")["fairShare"] == {"cpu": "2"}  # what it asks, the node has room
    assert status(api, "org")["borrowed"] == {"cpu": "0"}
    lost = valid(api, "lost")
    assert (lost["status"], lost["reason"]) == ("False", "InvalidQueueTree")
    assert lost["message"] == "Queue lost: spec.parent: no Queue 'nowhere' (known: a, lost, org, x)"
    assert valid(api, "x")["message"] == lost["message"]  # it names the queue at fault
    run.scheduler.queue_status.wait()
    run.scheduler.events.flush()
    events = [e for e in api.objects("events") if e["regarding"]["kind"] == "Queue"]
    assert [(e["regarding"]["name"], e["reason"]) for e in events] == [("lost", "InvalidQueueTree")]
    assert events[0]["regarding"]["apiVersion"] == QUEUE_API
    assert events[0]["regarding"]["uid"] == api.get("queues", "lost")["metadata"]["uid"]

    metrics = run.scheduler.metrics.exposition().decode()
    assert 'batchsched_queue_allocated{queue="a",resource="cpu"} 2.0' in metrics
    assert 'batchsched_queue_nominal{queue="org",resource="cpu"} 2.0' in metrics
    assert 'batchsched_queue_pending_pods{queue="x"} 1.0' in metrics
    assert 'batchsched_queue_fair_share{queue="a",resource="cpu"} 2.0' in metrics
    assert 'batchsched_queue_limit{queue="a"' not in metrics  # it has none

    # Fixed: the missing parent appears; the pod goes and the conditions turn.
    api.create("queues", queue("nowhere"))
    assert api.wait_for(lambda s: node_of(s, "x-1") == "n1")
    launch.clock.advance(1.0)
    assert api.wait_for(lambda s: valid(s, "x").get("status") == "True")
    assert valid(api, "x")["lastTransitionTime"] >= lost["lastTransitionTime"]
    assert run.halt() == 0


def test_writes_only_what_changed_at_most_once_a_second(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1", cpu="8"))
    api.create("queues", queue("a", limit="8"))
    run = launch()
    assert api.wait_for(lambda s: "pendingPods" in status(s, "a"))
    run.scheduler.queue_status.wait()
    assert status_writes(api, "a") == 1
    api.create("pods", queued("p", "a"))
    assert api.wait_for(lambda s: node_of(s, "p") == "n1")
    wait_passes(api, run.scheduler, 3)
    assert status_writes(api, "a") == 1  # the clock has not moved: no new look
    for _ in range(3):  # three looks, one change
        launch.clock.advance(1.0)
        wait_passes(api, run.scheduler, 2)
    run.scheduler.queue_status.wait()
    assert status(api, "a")["allocated"] == {"cpu": "1"}
    assert status_writes(api, "a") == 2
    assert run.halt() == 0


def test_a_standby_writes_no_queue_status_and_a_new_leader_writes_only_what_changed(
    api: FakeApiServer, launch: Launcher
) -> None:
    cfg = parse_config({"leaderElection": STEADY_LEASE})
    api.create("nodes", node("n1", cpu="8"))
    api.create("queues", queue("a"))
    api.create("pods", queued("p", "a"))
    leader = launch(cfg, identity="first")
    assert api.wait_for(lambda s: node_of(s, "p") == "n1")
    leader.scheduler.actuator.wait()
    launch.clock.advance(1.0)
    assert api.wait_for(lambda s: status(s, "a").get("allocated") == {"cpu": "1"})
    standby = launch(cfg, identity="second")
    assert standby.scheduler.synced.wait(WAIT_SECONDS)
    launch.clock.advance(1.0)
    wait_passes(api, leader.scheduler, 2)
    writes = status_writes(api, "a")
    assert leader.halt() == 0  # releases the lease
    assert api.wait_for(lambda s: standby.scheduler.is_leading())
    api.create("pods", queued("q", "a"))
    assert api.wait_for(lambda s: node_of(s, "q") == "n1")
    standby.scheduler.actuator.wait()
    launch.clock.advance(1.0)
    assert api.wait_for(lambda s: status(s, "a").get("allocated") == {"cpu": "2"})
    standby.scheduler.queue_status.wait()
    # The new leader read what was written: its first write is the change, nothing more.
    assert status_writes(api, "a") == writes + 1
    assert standby.halt() == 0
