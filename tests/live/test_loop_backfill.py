"""The loop's reservations (docs/backfill.md): the expected start in the pending pod's
PodScheduled message, Events when a reservation is made and started, and the
`batchsched_reservations` gauge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from batchsched.objects.parse import format_time
from tests.live.conftest import Launcher, condition, config, node, node_of, pod
from tests.live.fake_apiserver import FakeApiServer


def _bounded(name: str, cpu: str, runtime: str, **meta: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, annotations={"batchsched.io/max-runtime": runtime}, **meta)


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
