"""What Backfill keeps for the pass (plugins/backfill/room.py) answers per request: a pod is
never told another's answer because a reserved node's room was judged for another size
(docs/backfill.md#cost)."""

from __future__ import annotations

from typing import Any

from tests.builders import node, pod
from tests.conftest import schedule


def _pod(name: str, gpus: int, runtime: str | None, created: str, **more: Any) -> Any:
    notes = {"batchsched.io/max-runtime": runtime} if runtime else {}
    extra = {"nvidia.com/gpu": str(gpus)}
    return pod(name, annotations=notes, created=created, extra_requests=extra, **more)


def _running(name: str, gpus: int, runtime: str | None) -> Any:
    notes = {"batchsched.io/max-runtime": runtime} if runtime else {}
    extra = {"nvidia.com/gpu": str(gpus)}
    return pod(
        name,
        node_name="n1",
        phase="Running",
        annotations=notes,
        scheduled_at="2026-11-22T09:30:00Z",
        extra_requests=extra,
    )


def test_the_room_a_reservation_keeps_is_judged_per_request() -> None:
    # n1: `a` (3 GPUs) ends at 10:30, `c` (1 GPU) states no runtime: 4 GPUs free now. `big`
    # (6 GPUs) reserves n1 from 10:30. `narrow` (1 GPU, selecting a zone no node is in)
    # fails first; with it placed n1 would keep big's 6 GPUs. `long` (4 GPUs, 2 h) would not,
    # so it is kept off n1 and fails; `short` (4 GPUs, ends by 10:30) backfills. Had the
    # reserved node been judged once for narrow's request, long's failure would be
    # remembered as if n1 let it in, and short, alike but for its runtime, told it.
    result = schedule(
        node("n1", cpu="64", nvidia_com__gpu="8"),
        _running("a", 3, "1h"),
        _running("c", 1, None),
        _pod("big", 6, None, "2026-11-22T09:00:00Z"),
        _pod("narrow", 1, "2h", "2026-11-22T09:05:00Z", node_selector={"zone": "none"}),
        _pod("long", 4, "2h", "2026-11-22T09:10:00Z"),
        _pod("short", 4, "20m", "2026-11-22T09:20:00Z"),
    )
    assert {b["pod"]: b["node"] for b in result.to_json()["bindings"]} == {"default/short": "n1"}
    assert "would run past that start" in result.unschedulable["default/long"]
