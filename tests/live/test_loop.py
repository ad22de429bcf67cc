"""The full live loop against the fake API server: facts in, writes out."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime

import pytest

from batchsched.decisions import Bind, Decision
from batchsched.live import runner
from batchsched.scheduling.scheduler import Scheduler
from tests.faults import exploding_for
from tests.live.conftest import Launcher, Running, condition, config, node, node_of, pod
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer


def test_pending_pods_are_bound_and_reported(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1", cpu="2"))
    api.create("nodes", node("n2", cpu="2"))
    for i in range(3):
        api.create("pods", pod(f"p{i}", cpu="1"))
    run = launch()
    assert api.wait_for(lambda s: all(node_of(s, f"p{i}") for i in range(3)))
    # A pod created while running is bound too; one that cannot fit gets the condition.
    api.create("pods", pod("p3", cpu="1"))
    api.create("pods", pod("huge", cpu="64"))
    assert api.wait_for(lambda s: node_of(s, "p3") != "")
    assert api.wait_for(lambda s: condition(s, "huge") is not None)
    cond = condition(api, "huge")
    assert cond is not None
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert "0/2 nodes are available" in cond["message"]
    run.scheduler.actuator.wait()
    reasons = sorted(e["reason"] for e in api.objects("events"))
    assert reasons.count("Scheduled") == 4
    assert reasons.count("FailedScheduling") == 1
    # Never over-committed: 2 CPUs per node, 1 CPU per pod.
    placed = [node_of(api, f"p{i}") for i in range(4)]
    assert sorted(placed) == ["n1", "n1", "n2", "n2"]
    assert run.halt() == 0


def test_dry_run_decides_but_writes_nothing(
    api: FakeApiServer, launch: Launcher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="batchsched.live")
    api.create("nodes", node("n1", cpu="1"))
    api.create("pods", pod("fits", cpu="1"))
    api.create("pods", pod("too-big", cpu="8"))
    run = launch(dry_run=True)
    assert run.scheduler.elector is None  # a dry run never takes the lease from the real one
    assert api.wait_for(lambda s: "dry-run: default/too-big is unschedulable" in caplog.text)
    assert "dry-run: would bind default/fits to n1" in caplog.text
    assert run.halt() == 0
    assert [r for r in api.requests if r[0] != "GET"] == []
    assert node_of(api, "fits") == ""


def test_pods_of_other_schedulers_are_left_alone_but_count(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1", cpu="2"))
    api.create("pods", pod("theirs-bound", cpu="1", node_name="n1", scheduler="default-scheduler"))
    api.create("pods", pod("theirs-pending", cpu="1", scheduler="default-scheduler"))
    api.create("pods", pod("ours", cpu="1"))
    api.create("pods", pod("ours-too", cpu="1"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "ours") != "" or node_of(s, "ours-too") != "")
    assert api.wait_for(lambda s: condition(s, "ours-too") is not None or condition(s, "ours"))
    run.scheduler.actuator.wait()
    assert node_of(api, "theirs-pending") == ""
    assert condition(api, "theirs-pending") is None
    assert sorted([node_of(api, "ours"), node_of(api, "ours-too")]) == ["", "n1"]


def test_a_deleted_pod_frees_its_room_for_a_waiting_one(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1", cpu="1"))
    api.create("pods", pod("first", cpu="1"))
    run = launch(config(podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.1))
    assert api.wait_for(lambda s: node_of(s, "first") == "n1")
    api.create("pods", pod("second", cpu="1"))
    assert api.wait_for(lambda s: condition(s, "second") is not None)
    api.delete("pods", "first")
    assert api.wait_for(lambda s: node_of(s, "second") == "n1")
    metrics = run.scheduler.metrics.registry
    assert (
        metrics.get_sample_value("batchsched_schedule_attempts_total", {"result": "scheduled"}) == 2
    )
    # The deletion freed room where the waiting pod fits: its hint woke it, counted as such.
    assert metrics.get_sample_value("batchsched_queue_incoming_pods_total", {"event": "NodeRoom"})
    assert (
        metrics.get_sample_value("batchsched_queue_incoming_pods_total", {"event": "PodAdd"}) == 2
    )


def test_a_node_deleted_and_re_created_still_holds_its_running_pod(
    api: FakeApiServer, launch: Launcher
) -> None:
    """Its pods stay bound to its name until they are reported gone (as kube-scheduler's
    cache keeps them): the node back, it is not taken for empty and over-committed."""
    api.create("nodes", node("n1", cpu="4"))
    busy = pod("busy", cpu="3", node_name="n1")
    busy["status"] = {"phase": "Running", "startTime": "2026-11-22T09:00:00Z"}
    api.create("pods", busy)
    run = launch(config(podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.1))
    assert run.scheduler.synced.wait(WAIT_SECONDS)
    api.delete("nodes", "n1")
    assert api.wait_for(lambda s: "n1" not in run.scheduler.state.nodes.row_of)
    api.create("pods", pod("big", cpu="2"))  # fits only if n1 were empty
    assert api.wait_for(lambda s: condition(s, "big") is not None)
    api.create("nodes", node("n1", cpu="4"))
    api.create("pods", pod("small", cpu="1"))  # after big in the queue: n1 is seen by then
    assert api.wait_for(lambda s: node_of(s, "small") == "n1")
    run.scheduler.actuator.wait()
    assert node_of(api, "big") == ""
    assert "default/busy" in run.scheduler.state.pods.bound
    assert run.halt() == 0


def test_the_loop_survives_an_api_server_outage(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1"))
    run = launch()
    assert run.scheduler.synced.wait(WAIT_SECONDS)
    # Every request fails for a while and every watch drops: informers back off and resume.
    api.inject(503, count=20)
    api.drop_watches()
    api.create("pods", pod("after-outage"))
    assert api.wait_for(lambda s: node_of(s, "after-outage") == "n1")
    assert run.halt() == 0


def test_the_loop_survives_an_api_server_restart(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1", cpu="1"))
    api.create("nodes", node("n2", cpu="1"))
    api.create("pods", pod("before"))
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "before") != "")
    free = "n2" if node_of(api, "before") == "n1" else "n1"

    def meanwhile(server: FakeApiServer) -> None:
        server.delete("nodes", free)  # its DELETED event is lost with the watch cache
        server.create("nodes", node("n3", cpu="2"))
        server.create("pods", pod("after", cpu="2"))  # fits only the new node

    api.restart(0.3, meanwhile)
    assert api.wait_for(lambda s: node_of(s, "after") == "n3")
    assert api.wait_for(lambda s: free not in run.scheduler.state.nodes.row_of)
    assert run.halt() == 0


def test_a_new_node_takes_pods_only_once_its_kubelet_says_ready(launch: Launcher) -> None:
    # As kube-apiserver does, the fake taints every new node not-ready; here no kubelet lifts it.
    with FakeApiServer(bookmark_interval=0.2, kubelet=False) as api:
        launch.api = api
        api.create("nodes", node("n1", cpu="2"))
        api.create("pods", pod("p", cpu="1"))
        launch()
        assert api.wait_for(lambda s: condition(s, "p") is not None)
        message = (condition(api, "p") or {})["message"]
        assert "node.kubernetes.io/not-ready" in message
        assert node_of(api, "p") == ""
        with api.lock:
            api._node_ready("n1")  # the kubelet reports Ready, the taint goes
        assert api.wait_for(lambda s: node_of(s, "p") == "n1")


def test_an_attempt_that_raises_fails_that_pod_alone(
    api: FakeApiServer,
    launch: Launcher,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.ERROR, logger="batchsched.live")
    api.create("nodes", node("n1", cpu="4"))
    for name in ("a", "bad", "z"):
        api.create("pods", pod(name, cpu="1"))
    leader_off = {"leaderElect": False}
    fast = {"podInitialBackoffSeconds": 0.05, "podMaxBackoffSeconds": 0.1}
    run = launch(exploding_for(monkeypatch, "bad", leaderElection=leader_off, **fast))
    assert api.wait_for(lambda s: node_of(s, "a") == "n1" and node_of(s, "z") == "n1")
    assert api.wait_for(lambda s: condition(s, "bad") is not None)
    cond = condition(api, "bad")
    assert cond is not None and cond["status"] == "False"
    assert cond["message"] == "internal error: RuntimeError: boom for bad"
    # The loop goes on: a pod created afterwards is bound, and the faulty one is retried
    # after its backoff (counted again) although nothing changed for it.
    api.create("pods", pod("later", cpu="1"))
    assert api.wait_for(lambda s: node_of(s, "later") == "n1")
    registry = run.scheduler.metrics.registry
    errors = "batchsched_internal_errors_total"
    assert api.wait_for(lambda s: (registry.get_sample_value(errors) or 0) >= 2)
    assert "internal error while scheduling default/bad: Traceback" in caplog.text
    assert "RuntimeError: boom for bad" in caplog.text
    assert node_of(api, "bad") == ""
    assert run.halt() == 0


def test_a_long_pass_keeps_the_loop_healthy(
    api: FakeApiServer, launch: Launcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pod decided is a heartbeat: a pass longer than /healthz's limit does not fail
    the probe while it makes progress. Time is the launcher's clock, moved by each pod."""
    api.create("nodes", node("n1", cpu="8"))
    names = [f"p{i}" for i in range(5)]
    for name in names:
        api.create("pods", pod(name, cpu="1"))  # all pending at start: one pass for them
    launched = threading.Event()
    runs: list[Running] = []
    healthy: list[tuple[int, bool]] = []  # (passes done before, healthy) after each pod
    original = Scheduler.pass_steps

    def slow_steps(self: Scheduler, now: datetime) -> Iterator[list[Decision]]:
        for step in original(self, now):
            if any(isinstance(d, Bind) for d in step):
                # A slow pod: two in one pass outlast the limit.
                launch.clock.advance(runner._HEALTHY_WITHIN * 0.6)
                assert launched.wait(WAIT_SECONDS)
                live = runs[0].scheduler
                healthy.append((live.passes, live.healthy()))
            yield step

    monkeypatch.setattr(Scheduler, "pass_steps", slow_steps)
    runs.append(launch())
    launched.set()
    assert api.wait_for(lambda s: all(node_of(s, n) for n in names))
    # All five in the first pass, three limits' worth of clock: healthy after each pod.
    assert healthy == [(0, True)] * len(names)
    # The probe does fail when the loop stops coming round.
    runs[0].halt()
    launch.clock.advance(runner._HEALTHY_WITHIN)
    assert not runs[0].scheduler.healthy()


def test_initial_lists_are_applied_kind_by_kind_as_they_arrive(api: FakeApiServer) -> None:
    """Pods wait for every kind before them to be listed whole (their classes, nodes and
    groups), then go into the state while their own list is still coming; the first pass
    waits for all lists."""
    from batchsched.live.client import KubeClient
    from batchsched.live.credentials import Credentials
    from batchsched.live.facts import Upsert
    from batchsched.live.kinds import KINDS
    from batchsched.live.runner import LiveScheduler
    from batchsched.objects.parse import read_node, read_pod, read_priority_class

    scheduler = LiveScheduler(KubeClient(Credentials(api.url)), config())
    informers = {i.kind.name: i for i in scheduler.informers}
    stop = threading.Event()
    done = threading.Thread(target=scheduler._sync, args=(stop,), daemon=True)
    for informer in scheduler.informers[2:-1]:  # all but PriorityClass, Node and Pod
        informer.synced.set()
    kinds = {k.name: k for k in KINDS}
    scheduler.facts.put(Upsert(kinds["Node"], read_node(node("n1"))))
    waiting = pod("p1")
    waiting["spec"]["priorityClassName"] = "high"
    scheduler.facts.put(Upsert(kinds["Pod"], read_pod(waiting)))
    informers["Node"].synced.set()
    done.start()

    def settled() -> None:
        assert _eventually(scheduler.facts.empty)
        time.sleep(0.1)  # a loop round after the queue was taken

    settled()
    # PriorityClasses are not listed yet: nodes (listed) and pods wait for them.
    assert scheduler.state.nodes.count == 0
    assert not scheduler.state.pods.by_key
    high = {"metadata": {"name": "high"}, "value": 1000}
    scheduler.facts.put(Upsert(kinds["PriorityClass"], read_priority_class(high)))
    informers["PriorityClass"].synced.set()
    assert _eventually(lambda: "default/p1" in scheduler.state.pods.by_key)
    assert scheduler.state.nodes.count == 1
    assert not scheduler.synced.is_set()  # pods applied while their list is not finished
    informers["Pod"].synced.set()
    done.join(WAIT_SECONDS)
    assert scheduler.synced.is_set()
    assert scheduler.state.pods.by_key["default/p1"].priority == 1000
    stop.set()


def _eventually(check: Callable[[], bool], timeout: float = WAIT_SECONDS) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
