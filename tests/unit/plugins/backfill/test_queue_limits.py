"""Reservations count against queue limits (docs/backfill.md#queue-limits), as Backfill
itself checks them (the Queues PreFilter's side: tests/scenarios/backfill)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod
from tests.conftest import NOW, objects_of, schedule

GPU = "nvidia.com/gpu"


def _research(limit: int) -> dict[str, Any]:
    return {
        "apiVersion": "batchsched.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"resources": {GPU: {"limit": limit}}},
    }


def _pod(name: str, gpus: int, created: str, **extra: Any) -> dict[str, Any]:
    labels = {"batchsched.io/queue": "research"}
    return pod(name, labels=labels, created=created, extra_requests={GPU: str(gpus)}, **extra)


def _busy(name: str) -> dict[str, Any]:
    """A pod of no queue filling node `name` till 10:30."""
    return pod(
        f"on-{name}",
        node_name=name,
        phase="Running",
        annotations={"batchsched.io/max-runtime": "1h"},
        scheduled_at="2026-11-22T09:30:00Z",
        extra_requests={GPU: "8"},
    )


def test_a_profile_ignoring_quotas_still_reserves_within_them() -> None:
    config = parse_config(
        {"profiles": [{"plugins": {"preFilter": {"disabled": [{"name": "Queues"}]}}}]}
    )
    result = schedule(
        _research(12),
        node("n1", nvidia_com__gpu="8"),
        node("n2", nvidia_com__gpu="8"),
        _busy("n1"),
        _busy("n2"),
        _pod("big", 8, "2026-11-22T09:00:00Z"),
        _pod("wide", 8, "2026-11-22T09:01:00Z"),
        config=config,
    )
    held = [r["holder"] for r in result.to_json()["reservations"] if r["kind"] == "Backfill"]
    assert held == ["Pod default/big"]
    assert result.unschedulable["default/wide"].endswith(
        "reserves nothing: queue research: nvidia.com/gpu limit 12, in use 0, reserved 8, asks 8."
    )


def test_a_holder_its_queue_no_longer_has_room_for_gives_its_reservation_back() -> None:
    """Reserved at 10:00; at 10:01 the limit is lowered below what it holds: at the next
    planning (a pod left a reserved node) it holds nothing."""
    state = build_state(
        objects_of(
            _research(16),
            node("n1", nvidia_com__gpu="8"),
            _busy("n1"),
            pod("side", node_name="n1", phase="Running", scheduled_at="2026-11-22T09:30:00Z"),
            _pod("big", 8, "2026-11-22T09:00:00Z"),
        )
    )
    scheduler = Scheduler(state, default_config())
    scheduler.schedule_pass(NOW)
    assert list(state.start_reservations.by_holder) == ["Pod default/big"]
    state.apply("Queue", objects_of(_research(4)).queues[0])
    state.remove_pod("default/side")
    scheduler.schedule_pass(NOW + timedelta(minutes=1))
    assert not state.start_reservations.by_holder
