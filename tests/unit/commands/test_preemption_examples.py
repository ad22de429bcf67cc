"""The seeds' two use cases, shipped in examples/preemption-toleration, end to end."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from batchsched.commands.cli import main
from tests.paths import ROOT

EXAMPLES = ROOT / "examples" / "preemption-toleration"


def schedule(example: str, now: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    files = [str(EXAMPLES / "priority-classes.yaml"), str(EXAMPLES / example)]
    assert main(["schedule", *files, "--now", now, "-o", "json"]) == 0
    out: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return out


def test_low_non_preempted(capsys: pytest.CaptureFixture[str]) -> None:
    out = schedule("non-preempted.yaml", "2026-11-22T10:00:00Z", capsys)
    assert {e["pod"]: e["preemptor"] for e in out["evictions"]} == {
        "research/sweep": "ml/train",
        "research/solver": "kube-system/node-repair",
    }
    assert {b["pod"]: b["node"] for b in out["bindings"]} == {
        "ml/train": "gpu-2",
        "kube-system/node-repair": "gpu-1",
    }
    (pending,) = out["unschedulable"]
    assert pending["pod"] == "ml/train-2"
    assert "1 victims tolerate preemption (low-non-preempted)," in pending["message"]


def test_low_non_preempted_10min(capsys: pytest.CaptureFixture[str]) -> None:
    out = schedule("ten-minutes.yaml", "2026-11-22T10:00:00Z", capsys)
    assert [(e["pod"], e["preemptor"]) for e in out["evictions"]] == [
        ("research/seasoned", "ml/train")
    ]
    (pending,) = out["unschedulable"]
    assert pending["message"].endswith(
        "victims tolerate preemption (low-non-preempted-10min, until 2026-11-22T10:06:00Z)."
    )
    later = schedule("ten-minutes.yaml", "2026-11-22T10:06:00Z", capsys)
    assert {e["pod"] for e in later["evictions"]} == {"research/seasoned", "research/fresh"}
    assert later["unschedulable"] == []
