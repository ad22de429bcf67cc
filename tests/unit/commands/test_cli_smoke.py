import orjson
import pytest

from batchsched.commands.cli import main
from tests.paths import ROOT

EXAMPLE = ROOT / "examples" / "basic" / "cluster.yaml"


def test_basic_example_binds_and_explains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedule", str(EXAMPLE), "--now", "2026-11-22T10:00:00Z", "-o", "json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert {b["pod"]: b["node"] for b in out["bindings"]} == {
        "ml/trainer-0": "gpu-a",
        "ml/trainer-1": "gpu-a",
        "research/notebook": "cpu-1",
    }
    assert out["unschedulable"] == [
        {
            "pod": "research/huge-job",
            "message": "0/4 nodes are available: 1 node(s) were unschedulable, "
            "3 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
            "1 Preemption is not helpful for scheduling, 3 No preemption victims found.",
        }
    ]
