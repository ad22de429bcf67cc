"""Decayed usage in the live loop (docs/queues.md#fairness-over-time): written to each Queue's
status.usage at most once per 10 s, read back when a replica takes the lead (at start and
from another replica), garbage there ignored with a Warning event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from batchsched.config import parse_config
from batchsched.live.events import micro_time
from batchsched.objects.parse import parse_time
from tests.live.conftest import STEADY_LEASE, Launcher, node, node_of
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer
from tests.live.test_loop_queues import queue, queued, status, status_writes, wait_passes

DECAY = {"name": "Queues", "args": {"usageHalfLife": "1h"}}


def decay_config(**top: Any) -> Any:
    return parse_config(
        {"leaderElection": {"leaderElect": False}, "profiles": [{"pluginConfig": [DECAY]}], **top}
    )


def stored(api: FakeApiServer, name: str) -> dict[str, Any]:
    usage = status(api, name).get("usage")
    return dict(usage) if isinstance(usage, dict) else {}


def readable(usage: dict[str, Any]) -> bool:
    try:
        parse_time(usage.get("lastUpdateTime"))  # type: ignore[arg-type]
        return float(usage["cpu"]) >= 0
    except (TypeError, ValueError, KeyError):
        return False


def with_usage(name: str, usage: dict[str, Any]) -> dict[str, Any]:
    obj = queue(name)
    obj["status"] = {"usage": usage}
    return obj


def test_usage_is_written_at_most_every_ten_seconds(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1", cpu="8"))
    api.create("queues", queue("a"))
    api.create("pods", queued("p", "a", cpu="2"))
    run = launch(decay_config())
    assert api.wait_for(lambda s: node_of(s, "p") == "n1")
    assert api.wait_for(lambda s: "lastUpdateTime" in stored(s, "a"))
    first = stored(api, "a")
    parse_time(first["lastUpdateTime"])
    assert float(first["cpu"]) >= 0
    assert status(api, "a")["effectiveWeight"] == {"cpu": "1"}  # alone among its siblings
    for _ in range(3):  # three looks within ten seconds: the usage is not written again
        run.scheduler.actuator.wait()
        launch.clock.advance(3.0)
        wait_passes(api, run.scheduler, 2)
    run.scheduler.queue_status.wait()
    assert stored(api, "a") == first
    launch.clock.advance(1.0)  # ten seconds since
    assert api.wait_for(lambda s: stored(s, "a") != first)
    later = stored(api, "a")
    assert parse_time(later["lastUpdateTime"]) > parse_time(first["lastUpdateTime"])
    assert float(later["cpu"]) > float(first["cpu"])  # 2 cores ran in between
    assert run.halt() == 0


def test_the_stored_usage_is_read_back_at_start(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1", cpu="8"))
    written = datetime.now(UTC) - timedelta(minutes=60)  # one half-life ago
    api.create("queues", with_usage("a", {"cpu": "7200", "lastUpdateTime": micro_time(written)}))
    run = launch(decay_config())
    assert run.scheduler.synced.wait(WAIT_SECONDS)
    wait_passes(api, run.scheduler, 1)
    decayed = run.scheduler.state.queues.decayed
    assert decayed is not None
    # 7,200 core-seconds an hour ago: half of it now, in millicore-seconds.
    assert decayed.usage["a"]["cpu"] == pytest.approx(3_600_000, rel=0.01)
    assert api.wait_for(lambda s: float(stored(s, "a").get("cpu", 0)) > 0)
    assert float(stored(api, "a")["cpu"]) == pytest.approx(3600, rel=0.01)
    assert run.halt() == 0


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"cpu": "lots", "lastUpdateTime": "2026-11-27T10:00:00Z"}, "status.usage.cpu"),
        ({"cpu": "-5", "lastUpdateTime": "2026-11-27T10:00:00Z"}, "status.usage.cpu"),
        ({"cpu": "5", "lastUpdateTime": "yesterday"}, "status.usage.lastUpdateTime"),
        ({"cpu": "5"}, "status.usage.lastUpdateTime"),
        ("a lot", "status.usage"),
    ],
)
def test_garbage_in_the_stored_usage_is_ignored_with_a_warning(
    api: FakeApiServer, launch: Launcher, usage: Any, field: str
) -> None:
    api.create("nodes", node("n1", cpu="8"))
    obj = queue("a")
    obj["status"] = {"usage": usage}
    api.create("queues", obj)
    api.create("pods", queued("p", "a"))
    run = launch(decay_config())
    assert api.wait_for(lambda s: node_of(s, "p") == "n1")  # scheduling goes on
    decayed = run.scheduler.state.queues.decayed
    assert decayed is not None and decayed.usage.get("a", {}).get("cpu", 0) < 1000
    run.scheduler.events.flush()
    [event] = [e for e in api.objects("events") if e["reason"] == "InvalidStatusUsage"]
    assert event["regarding"]["name"] == "a" and event["type"] == "Warning"
    assert event["note"].startswith(f"Queue a: {field}: ")
    assert event["note"].endswith("; ignored: its decayed usage starts from 0")
    # Overwritten with what batchsched keeps.
    assert api.wait_for(lambda s: readable(stored(s, "a")))
    assert run.halt() == 0


def test_a_new_leader_continues_from_the_stored_usage_and_a_standby_writes_none(
    api: FakeApiServer, launch: Launcher
) -> None:
    cfg = parse_config({"leaderElection": STEADY_LEASE, "profiles": [{"pluginConfig": [DECAY]}]})
    api.create("nodes", node("n1", cpu="8"))
    written = datetime.now(UTC)
    api.create("queues", with_usage("a", {"cpu": "1000", "lastUpdateTime": micro_time(written)}))
    api.create("pods", queued("p", "a"))
    leader = launch(cfg, identity="first")
    assert api.wait_for(lambda s: node_of(s, "p") == "n1")
    assert api.wait_for(lambda s: stored(s, "a").get("lastUpdateTime") != micro_time(written))
    standby = launch(cfg, identity="second")
    assert standby.scheduler.synced.wait(WAIT_SECONDS)
    writes = status_writes(api, "a")
    launch.clock.advance(10.0)
    wait_passes(api, leader.scheduler, 2)
    leader.scheduler.queue_status.wait()
    assert status_writes(api, "a") == writes + 1  # the leader's; the standby wrote none
    handed_over = float(stored(api, "a")["cpu"])
    assert handed_over >= 999
    assert leader.halt() == 0  # releases the lease
    assert api.wait_for(lambda s: standby.scheduler.is_leading())
    wait_passes(api, standby.scheduler, 1)
    decayed = standby.scheduler.state.queues.decayed
    assert decayed is not None
    assert decayed.usage["a"]["cpu"] == pytest.approx(handed_over * 1000, rel=0.01)
    assert standby.halt() == 0
