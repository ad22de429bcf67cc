"""Seeing Backfill's reservations (docs/backfill.md#what-you-see): each one's planned end
(its expected start plus its holder's stated runtime, or open) and, per node, which room it
holds and when, in `explain` and `schedule` (text and JSON)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from batchsched.commands.cli import main
from tests.paths import ROOT

# One node of 8 GPUs shared in time: `short` (4 GPUs, 1 h) and `longer` (4 GPUs, 2 h) from
# 10:30, `whole` (8 GPUs, no runtime) from 12:30 for good.
SHARED = str(ROOT / "tests" / "scenarios" / "backfill" / "reservations-share-a-node-in-time.yaml")
AT = "2026-11-22T10:00:00Z"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main([*argv, "--now", AT]) == 0
    return capsys.readouterr().out


def _explained(capsys: pytest.CaptureFixture[str], pod: str) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(_run(capsys, "explain", pod, SHARED, "-o", "json"))
    return data


def test_explain_json_gives_the_planned_end_and_the_room_per_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    backfill = _explained(capsys, "default/short")["backfill"]
    assert backfill["statedRuntimeSeconds"] == 3600
    assert backfill["reservation"] == {
        "holder": "Pod default/short",
        "nodes": ["gpu-1"],
        "expectedStart": "2026-11-22T10:30:00Z",
        "plannedEnd": "2026-11-22T11:30:00Z",
        "waitsFor": ["default/running"],
        "room": [
            {
                "node": "gpu-1",
                "resources": {"nvidia.com/gpu": "4", "pods": "1"},
                "from": "2026-11-22T10:30:00Z",
                "until": "2026-11-22T11:30:00Z",
            }
        ],
    }
    # A holder stating no runtime holds its room for good: no planned end.
    whole = _explained(capsys, "default/whole")["backfill"]["reservation"]
    assert (whole["expectedStart"], whole["plannedEnd"]) == ("2026-11-22T12:30:00Z", None)
    assert whole["room"][0]["until"] is None


def test_explain_text_says_when_the_room_is_held_and_which(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _run(capsys, "explain", "default/longer", SHARED)
    assert "  room held from 2026-11-22T10:30:00Z until 2026-11-22T12:30:00Z:\n" in out
    assert "    gpu-1: nvidia.com/gpu 4, pods 1\n" in out
    out = _run(capsys, "explain", "default/whole", SHARED)
    assert "room held from 2026-11-22T12:30:00Z on, open (its holder states no runtime):" in out


def test_schedule_text_lists_the_room_each_reservation_holds_per_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _run(capsys, "schedule", SHARED)
    reservations = out.split("RESERVATIONS (3)\n")[1].split("\n\n")[0].splitlines()
    assert reservations[0].split() == ["KIND", "HOLDER", "NODES", "FROM", "UNTIL"]
    assert reservations[2].split() == [
        "Backfill", "Pod", "default/short", "gpu-1", "2026-11-22T10:30:00Z", "2026-11-22T11:30:00Z"
    ]  # fmt: skip
    room = out.split("RESERVED ROOM (3)\n")[1].split("\n\n")[0].splitlines()
    assert [line.split() for line in room[1:]] == [
        ["gpu-1", "Pod", "default/longer", "nvidia.com/gpu", "4,", "pods", "1",
         "2026-11-22T10:30:00Z", "2026-11-22T12:30:00Z"],
        ["gpu-1", "Pod", "default/short", "nvidia.com/gpu", "4,", "pods", "1",
         "2026-11-22T10:30:00Z", "2026-11-22T11:30:00Z"],
        ["gpu-1", "Pod", "default/whole", "nvidia.com/gpu", "8,", "pods", "1",
         "2026-11-22T12:30:00Z", "open"],
    ]  # fmt: skip
