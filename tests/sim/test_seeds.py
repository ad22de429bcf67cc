"""Several seeds: means with 95% intervals, paired differences, parallel workers that give the
same numbers as one process, and a report that records what was run."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched import __version__
from batchsched.commands.cli import main
from batchsched.sim.stats import interval, paired_difference, t975
from tests.sim.test_runs import SCENARIO


def simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: dict[str, Any], *extra: str
) -> dict[str, Any]:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert main(["simulate", str(path), "--until", "3h", "-o", "json", *extra]) == 0
    data: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return data


def without_wall(data: dict[str, Any]) -> dict[str, Any]:
    for run in data["runs"]:
        run.pop("wall_seconds")
    return data


def test_interval_matches_the_t_table() -> None:
    found = interval([1.0, 2.0, 3.0])
    assert found is not None and found.mean == 2.0 and found.n == 3
    assert math.isclose(found.high - found.mean, 4.303 / math.sqrt(3), rel_tol=1e-9)
    one = interval([5.0, None])
    assert one is not None and (one.low, one.high, one.n) == (5.0, 5.0, 1)
    assert not one.excludes_zero  # one seed proves nothing
    assert interval([None]) is None
    assert t975(200) == 1.96 and t975(22) == t975(20)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=2, max_size=12))
def test_identical_variants_differ_by_an_interval_around_zero(values: list[float]) -> None:
    diff = paired_difference(values, list(values))
    assert diff is not None and diff.low <= 0.0 <= diff.high and not diff.excludes_zero


def test_identical_variants_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two variants that change nothing: every difference's interval includes zero."""
    scenario = copy.deepcopy(SCENARIO)
    scenario["variants"] = [{"name": "a"}, {"name": "b"}]
    data = simulate(tmp_path, capsys, scenario, "--seeds", "3", "--jobs", "1")
    metrics = data["comparison"]["metrics"]
    assert data["comparison"]["baseline"] == "a"
    for name, metric in metrics.items():
        diff = metric["difference"]["b"]
        if diff is not None:
            assert diff["low"] <= 0 <= diff["high"] and not diff["excludesZero"], name


def test_seeds_are_deterministic_and_workers_change_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parallel = without_wall(simulate(tmp_path, capsys, SCENARIO, "--seeds", "2", "--jobs", "2"))
    serial = without_wall(simulate(tmp_path, capsys, SCENARIO, "--seeds", "2", "--jobs", "1"))
    assert parallel == serial
    assert [(r["name"], r["seed"]) for r in serial["runs"]] == [
        ("plain", 3),
        ("plain", 4),
        ("tolerant", 3),
        ("tolerant", 4),
    ]
    # Seed 4 of the pair is seed 4 alone.
    alone = without_wall(simulate(tmp_path, capsys, SCENARIO, "--seed", "4"))
    assert alone["comparison"] is None
    assert serial["runs"][1] == alone["runs"][0]


def test_scenario_seeds_and_the_report_record_what_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = copy.deepcopy(SCENARIO)
    scenario["seeds"] = 2
    data = simulate(tmp_path, capsys, scenario, "--report", str(tmp_path / "r"), "--jobs", "1")
    meta = data["meta"]
    assert meta["version"] == __version__
    assert meta["scenarios"] == [str(tmp_path / "scenario.yaml")]
    assert [(r["name"], r["variant"], r["seeds"]) for r in meta["runs"]] == [
        ("plain", "plain", [3, 4]),
        ("tolerant", "tolerant", [3, 4]),
    ]
    summary = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    assert summary["meta"] == meta and summary["comparison"]["seeds"]["plain"] == [3, 4]
    page = (tmp_path / "r" / "report.html").read_text()
    assert "Over seeds" in page and __version__ in page and "scenario.yaml" in page
    header = (tmp_path / "r" / "jobs.csv").read_text().splitlines()[0]
    assert header.startswith("run,seed,job,")


def test_text_shows_means_intervals_and_marked_differences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    assert main(["simulate", str(path), "--until", "3h", "--seeds", "3", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("COMPARISON OVER 3 SEEDS")
    assert "TOLERANT - PLAIN" in out and " ± " in out
    assert "preemptor wait mean (min)" in out and "preemptors held by toleration" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    # Beyond two runs the columns are numbered, with the names listed above the table.
    scenario = copy.deepcopy(SCENARIO)
    scenario["variants"].append({"name": "third"})
    path.write_text(yaml.safe_dump(scenario))
    assert main(["simulate", str(path), "--until", "1h", "--seeds", "2", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "  (3) third" in out and "(3) - (1)" in out
    assert max(len(line) for line in out.splitlines()) <= 100
