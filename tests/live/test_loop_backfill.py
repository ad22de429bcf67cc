"""The loop's reservations (docs/backfill.md): the expected start in the pending pod's
PodScheduled message, Events when a reservation is made and started, and the
`batchsched_reservations` gauge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from batchsched.objects.parse import format_time
from tests.live.conftest import Launcher, condition, config, node, node_of, pod
from tests.live.fake_apiserver import FakeApiServer
from tests.live.test_loop_queues import wait_passes


def _bounded(name: str, cpu: str, runtime: str, **meta: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, annotations={"batchsched.io/max-runtime": runtime}, **meta)


def _group(runtime: str) -> dict[str, Any]:
    """PodGroup g (one member) stating `runtime` for its members that state none."""
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "annotations": {"batchsched.io/max-runtime": runtime}},
        "spec": {"minMember": 1},
    }


def _restate(api: FakeApiServer, runtime: str) -> None:
    """The group's annotation edited (kubectl annotate --overwrite)."""
    stored = api.get("podgroups", "g")
    assert stored is not None
    stored["metadata"]["annotations"]["batchsched.io/max-runtime"] = runtime
    api.update("podgroups", stored)


def _reasons(api: FakeApiServer, name: str) -> list[str]:
    return [e["reason"] for e in api.objects("events") if e["regarding"]["name"] == name]


def test_a_long_waiting_pod_reserves_is_told_its_start_and_starts(
    api: FakeApiServer, launch: Launcher
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    started = now - timedelta(minutes=10)
    api.create("nodes", node("n1", cpu="4"))
    running = _bounded("run", "2", "1h", node_name="n1")
    running["status"] = {"phase": "Running", "startTime": format_time(started)}
    api.create("pods", running)
    api.create("pods", pod("big", cpu="4"))
    # The API server stamps creation itself: reserving at once, not after 10 minutes.
    args = {"reserveAfterSeconds": 0}
    run = launch(config(profiles=[{"pluginConfig": [{"name": "Backfill", "args": args}]}]))
    expected = format_time(started + timedelta(hours=1))
    told = f"reserved n1; expected start {expected}."
    assert api.wait_for(lambda s: told in (condition(s, "big") or {}).get("message", ""))
    # A pod running past that start is kept off the reserved node, and told whose it is.
    api.create("pods", _bounded("long", "2", "2h"))
    assert api.wait_for(
        lambda s: "reserved for Pod default/big" in (condition(s, "long") or {}).get("message", "")
    )
    assert node_of(api, "long") == ""
    gauge = run.scheduler.metrics.registry.get_sample_value
    assert gauge("batchsched_reservations") == 1
    assert api.wait_for(lambda s: "Reserved" in _reasons(s, "big"))
    # The running pod ends: the reservation starts.
    api.delete("pods", "run")
    assert api.wait_for(lambda s: node_of(s, "big") == "n1")
    assert api.wait_for(lambda s: "ReservationStarted" in _reasons(s, "big"))


def test_a_podgroups_new_runtime_moves_the_reservation_waiting_for_its_member(
    api: FakeApiServer, launch: Launcher
) -> None:
    """The group's `batchsched.io/max-runtime` edited while its member runs: the member's
    expected end moves, and the reservation waiting for it with it (docs/backfill.md#live-mode)."""
    now = datetime.now(UTC).replace(microsecond=0)
    started = now - timedelta(minutes=10)
    api.create("nodes", node("n1", cpu="4"))
    api.create("podgroups", _group("2h"))
    member = pod("run", cpu="4", node_name="n1", labels={"scheduling.x-k8s.io/pod-group": "g"})
    member["status"] = {"phase": "Running", "startTime": format_time(started)}
    api.create("pods", member)
    api.create("pods", pod("big", cpu="4"))
    args = {"reserveAfterSeconds": 0}
    run = launch(config(profiles=[{"pluginConfig": [{"name": "Backfill", "args": args}]}]))
    told = f"reserved n1; expected start {format_time(started + timedelta(hours=2))}."
    assert api.wait_for(lambda s: told in (condition(s, "big") or {}).get("message", ""))
    wait_passes(api, run.scheduler, 2)  # planned again as of then: nothing changed since
    _restate(api, "1h")
    sooner = f"reserved n1; expected start {format_time(started + timedelta(hours=1))}."
    assert api.wait_for(lambda s: "ReservationMoved" in _reasons(s, "big"))
    assert api.wait_for(lambda s: sooner in (condition(s, "big") or {}).get("message", ""))


def test_a_podgroups_shorter_runtime_lets_its_waiting_member_backfill(
    api: FakeApiServer, launch: Launcher
) -> None:
    """The group's `batchsched.io/max-runtime` edited while its member waits: the member is
    judged again by the new runtime (docs/backfill.md#live-mode)."""
    now = datetime.now(UTC).replace(microsecond=0)
    api.create("nodes", node("n1", cpu="4"))
    running = _bounded("run", "2", "1h", node_name="n1")
    running["status"] = {"phase": "Running", "startTime": format_time(now - timedelta(minutes=10))}
    api.create("pods", running)
    api.create("pods", pod("big", cpu="4"))
    api.create("podgroups", _group("2h"))
    api.create("pods", pod("w", cpu="2", labels={"scheduling.x-k8s.io/pod-group": "g"}))
    args = {"reserveAfterSeconds": 0}
    run = launch(config(profiles=[{"pluginConfig": [{"name": "Backfill", "args": args}]}]))
    # `big` holds n1 from when `run` ends (in 50 minutes); `w`, of a 2-hour group, would run
    # past that start on n1's 2 free CPUs: kept off.
    assert api.wait_for(
        lambda s: "reserved for Pod default/big" in (condition(s, "w") or {}).get("message", "")
    )
    wait_passes(api, run.scheduler, 2)
    _restate(api, "20m")
    assert api.wait_for(lambda s: node_of(s, "w") == "n1")
