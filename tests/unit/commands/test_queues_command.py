"""`batchsched queues` prints the queue tree; `schedule -o json` carries it under `queues`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.builders import node, pod
from tests.paths import ROOT
from tests.unit.commands.test_cli_errors import run

EXAMPLE = str(ROOT / "examples" / "queues" / "three-teams.yaml")


def test_the_tree_is_printed_parents_first_with_quotas_usage_and_pending(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["queues", EXAMPLE], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "QUEUES (4)"
    assert lines[1].split() == [
        "QUEUE", "RESOURCE", "GUARANTEED", "NOMINAL", "LIMIT", "IN", "USE", "FAIR", "SHARE",
        "BORROWED", "PENDING",
    ]  # fmt: skip
    # research's fair share is its guarantee (ops, priority 1, takes its own 8 of the 32);
    # within it vision gets its nominal 16 and nlp 8 (docs/queues.md#fair-share).
    assert lines[4].split() == ["research", "nvidia.com/gpu", "24", "24", "32", "0", "24", "0", "6"]
    assert lines[5].split()[-3:] == ["8", "0", "3"] and lines[5].startswith("    nlp ")
    assert lines[6].split()[-3:] == ["16", "0", "3"]
    assert all(len(line) <= 100 for line in lines)


def test_json_and_schedule_json_carry_usage_and_borrowing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["queues", EXAMPLE, "-o", "json"], capsys)
    assert code == 0
    before = {q["name"]: q for q in json.loads(out)["queues"]}
    assert before["nlp"]["parent"] == "research" and before["nlp"]["pendingPods"] == 3
    code, out, _ = run(["schedule", EXAMPLE, "-o", "json"], capsys)
    after = {q["name"]: q for q in json.loads(out)["queues"]}
    assert after["vision"]["resources"]["nvidia.com/gpu"] == {
        "guaranteed": "8",
        "nominal": "16",
        "limit": "24",
        "inUse": "16",
        "fairShare": "16",
        "borrowed": "0",
    }
    assert after["research"]["resources"]["nvidia.com/gpu"]["inUse"] == "24"
    assert after["nlp"]["pendingPods"] == 2


def test_no_queue_section_without_queues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([node("n1"), pod("p")]))
    code, out, _ = run(["schedule", str(path), "-o", "json"], capsys)
    assert code == 0 and "queues" not in json.loads(out)
    code, out, _ = run(["queues", str(path)], capsys)
    assert code == 0 and out == "no Queue found\n"


def _with_stored_usage(tmp_path: Path, usage: dict[str, object]) -> str:
    docs = [d for d in yaml.safe_load_all(Path(EXAMPLE).read_text()) if d]
    for doc in docs:
        if doc["kind"] == "Queue" and doc["metadata"]["name"] == "nlp":
            doc["status"] = {"usage": usage}
    path = tmp_path / "queues.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def _decay_config(tmp_path: Path) -> str:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"pluginConfig": [{"name": "Queues", "args": {"usageHalfLife": "1h"}}]}],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_with_decay_the_stored_usage_and_effective_weights_are_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = {"nvidia.com/gpu": "7200", "lastUpdateTime": "2026-11-27T09:00:00Z"}
    source = _with_stored_usage(tmp_path, usage)
    args = ["queues", source, "--config", _decay_config(tmp_path), "--now", "2026-11-27T10:00:00Z"]
    code, out, _ = run([*args, "-o", "json"], capsys)
    assert code == 0
    queues = {q["name"]: q["resources"]["nvidia.com/gpu"] for q in json.loads(out)["queues"]}
    assert queues["nlp"]["decayedUsage"] == "3600.000"  # halved over one half-life
    assert queues["vision"]["decayedUsage"] == "0.000"
    # nlp used it all: its weight share goes to vision (weights renormalised to their sum).
    assert (queues["nlp"]["effectiveWeight"], queues["vision"]["effectiveWeight"]) == ("0", "3")
    code, out, _ = run(args, capsys)
    lines = out.splitlines()
    below = lines[lines.index("FAIRNESS OVER TIME") + 1 :]
    assert below[0] == "  QUEUE     RESOURCE        DECAYED USAGE (H)  EFFECTIVE WEIGHT  WEIGHT"
    assert [line.split() for line in below if line.strip().startswith("nlp")] == [
        ["nlp", "nvidia.com/gpu", "1.0", "0", "1"]
    ]
    assert all(len(line) <= 100 for line in lines)
    # Without decay neither is there.
    code, out, _ = run(["queues", source, "-o", "json"], capsys)
    assert "decayedUsage" not in out
    code, out, _ = run(["queues", source], capsys)
    assert "FAIRNESS OVER TIME" not in out


def test_garbage_in_the_stored_usage_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _with_stored_usage(tmp_path, {"nvidia.com/gpu": "lots", "lastUpdateTime": "x"})
    code, out, err = run(["queues", source, "--config", _decay_config(tmp_path)], capsys)
    assert code == 0 and "QUEUES (4)" in out
    assert err == (
        "warning: Queue nlp: status.usage.lastUpdateTime: 'x' is not an RFC 3339 time; "
        "ignored: its decayed usage starts from 0\n"
    )


def test_schedule_reads_the_stored_usage_and_warns_of_garbage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = {"nvidia.com/gpu": "7200", "lastUpdateTime": "2026-11-27T09:00:00Z"}
    config = ["--config", _decay_config(tmp_path), "--now", "2026-11-27T10:00:00Z"]
    source = _with_stored_usage(tmp_path, usage)
    code, out, _ = run(["schedule", source, *config, "-o", "json"], capsys)
    assert code == 0
    queues = {q["name"]: q["resources"]["nvidia.com/gpu"] for q in json.loads(out)["queues"]}
    assert queues["nlp"]["decayedUsage"] == "3600.000"
    garbage = _with_stored_usage(tmp_path, {"nvidia.com/gpu": "-1", "lastUpdateTime": "x"})
    code, out, _ = run(["schedule", garbage, *config, "-o", "json"], capsys)
    assert code == 0
    warnings = [w for w in json.loads(out)["warnings"] if w["object"] == "Queue nlp"]
    assert [w["message"] for w in warnings] == [
        "Queue nlp: status.usage.lastUpdateTime: 'x' is not an RFC 3339 time; ignored: its "
        "decayed usage starts from 0"
    ]
