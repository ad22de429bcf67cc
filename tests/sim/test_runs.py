"""End to end through the CLI: determinism, reports, and the comparison of variants."""

from __future__ import annotations

import base64
import csv
import io
from pathlib import Path

import orjson
import pytest
import yaml

from batchsched.commands.cli import main

TOLERATION = "preemption-toleration.scheduling.x-k8s.io"
SCENARIO = {
    "name": "small",
    "start": "2026-11-22T00:00:00Z",
    "seed": 3,
    "cluster": {
        "pools": [
            {
                "name": "gpu",
                "count": 2,
                "allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
            }
        ]
    },
    "priorityClasses": [
        {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 9000},
        {"kind": "PriorityClass", "metadata": {"name": "low"}, "value": 8000},
        {
            "kind": "PriorityClass",
            "metadata": {
                "name": "low-10min",
                "annotations": {
                    f"{TOLERATION}/minimum-preemptable-priority": "10000",
                    f"{TOLERATION}/toleration-seconds": "600",
                },
            },
            "value": 8000,
        },
    ],
    "work": {
        "generators": [
            {
                "name": "train",
                "arrivalsPerHour": 4,
                "to": "6h",
                "class": "low",
                "requests": {"nvidia.com/gpu": {"choice": [4, 8]}},
                "duration": {"exponential": "1h"},
                "checkpointInterval": "10m",
                "restartDelay": "1m",
            },
            {
                "name": "urgent",
                "arrivalsPerHour": 3,
                "to": "6h",
                "class": "high",
                "requests": {"nvidia.com/gpu": 4},
                "duration": "20m",
            },
            {
                "name": "gang",
                "arrivalsPerHour": 1,
                "to": "6h",
                "class": "low",
                "pods": 2,
                "gang": True,
                "requests": {"nvidia.com/gpu": 8},
                "duration": "30m",
            },
        ]
    },
    "variants": [{"name": "plain"}, {"name": "tolerant", "classes": {"low": "low-10min"}}],
}


def run_cli(tmp_path: Path, report: str, *extra: str) -> int:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    return main(["simulate", str(scenario), "--report", str(tmp_path / report), *extra])


def test_same_seed_same_results(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "a") == 0
    assert run_cli(tmp_path, "b") == 0
    assert (tmp_path / "a" / "jobs.csv").read_bytes() == (tmp_path / "b" / "jobs.csv").read_bytes()
    first = orjson.loads((tmp_path / "a" / "summary.json").read_bytes())
    second = orjson.loads((tmp_path / "b" / "summary.json").read_bytes())
    for run in (*first["runs"], *second["runs"]):
        run.pop("wall_seconds")
    assert first == second


def test_another_seed_another_workload(tmp_path: Path) -> None:
    run_cli(tmp_path, "a")
    run_cli(tmp_path, "c", "--seed", "4")
    assert (tmp_path / "a" / "jobs.csv").read_bytes() != (tmp_path / "c" / "jobs.csv").read_bytes()


def test_reports_hold_every_run_and_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(tmp_path, "r") == 0
    out = capsys.readouterr().out
    assert "plain" in out and "tolerant" in out and "PER PRIORITY CLASS" in out
    summary = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    names = [r["name"] for r in summary["runs"]]
    assert names == ["plain", "tolerant"]
    plain = summary["runs"][0]
    assert set(plain["classes"]) == {"high", "low"}
    tolerant = summary["runs"][1]["classes"]
    assert set(tolerant) == {"high", "low"}  # compared by the workload's class
    assert tolerant["low"]["priority_classes"] == ["low-10min"]
    assert 0 < plain["jobs"]["finished"] <= plain["jobs"]["total"]
    assert plain["cluster"]["gang_jobs"] > 0
    assert 0 < plain["cluster"]["utilisation"]["nvidia.com/gpu"] <= 1
    with (tmp_path / "r" / "jobs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * plain["jobs"]["total"]
    assert {r["run"] for r in rows} == {"plain", "tolerant"}
    page = (tmp_path / "r" / "report.html").read_text()
    images = page.split('src="data:image/png;base64,')[1:]
    assert len(images) == 4
    for image in images:
        assert base64.b64decode(image.split('"', 1)[0]).startswith(b"\x89PNG")
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")


def test_until_and_configs_side_by_side(tmp_path: Path) -> None:
    most = tmp_path / "most.yaml"
    most.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "batchsched",
                        "pluginConfig": [
                            {
                                "name": "NodeResourcesFit",
                                "args": {
                                    "scoringStrategy": {
                                        "type": "MostAllocated",
                                        "resources": [{"name": "nvidia.com/gpu", "weight": 1}],
                                    }
                                },
                            }
                        ],
                    }
                ],
            }
        )
    )
    least = tmp_path / "least.yaml"
    least.write_text(
        yaml.safe_dump(
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
        )
    )
    assert (
        run_cli(tmp_path, "r", "--config", str(most), "--config", str(least), "--until", "2h") == 0
    )
    summary = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    assert [r["name"] for r in summary["runs"]] == [
        "plain/most",
        "plain/least",
        "tolerant/most",
        "tolerant/least",
    ]
    assert all(r["simulated_seconds"] <= 7200 for r in summary["runs"])


def test_bad_config_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: 3\n")
    assert run_cli(tmp_path, "r", "--config", str(bad)) == 2
    assert "profiles: must be a non-empty list" in capsys.readouterr().err


def test_several_scenarios_side_by_side_are_named_by_scenario(tmp_path: Path) -> None:
    paths = []
    for name in ("first", "second"):
        scenario = {**SCENARIO, "name": name}
        scenario.pop("variants")
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(scenario))
        paths.append(str(path))
    assert main(["simulate", *paths, "--until", "1h", "--report", str(tmp_path / "r")]) == 0
    summary = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    assert [r["name"] for r in summary["runs"]] == ["first", "second"]


def test_progress_bar_on_a_terminal_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from batchsched.sim import command

    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    (run, *_) = command.plan([scenario], [])
    monkeypatch.setattr(command, "PROGRESS_AFTER_SECONDS", 0.0)
    terminal = io.StringIO()
    command.simulate(run, None, None, Console(file=terminal, force_terminal=True, width=100))
    assert "simulated" in terminal.getvalue()
    piped = io.StringIO()
    command.simulate(run, None, None, Console(file=piped, force_terminal=False))
    assert piped.getvalue() == ""
