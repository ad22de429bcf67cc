"""`simulate --ray`: the same runs as Ray tasks give the same numbers as local ones; without
Ray installed, `--ray` says how to install it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchsched.commands.cli import main
from tests.sim.test_queues_in_sim import teams


def _numbers(out: str) -> list[dict[str, Any]]:
    """Every run on every seed, but for how long it took."""
    runs: list[dict[str, Any]] = orjson.loads(out)["runs"]
    for run in runs:
        run.pop("wall_seconds")
    return runs


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra")
def test_a_sweep_on_a_local_ray_instance_gives_the_local_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "teams.yaml"
    scenario.write_text(yaml.safe_dump(teams()))
    args = ["simulate", str(scenario), "--seeds", "2", "-o", "json", "--jobs", "2"]
    assert main(args) == 0
    local = _numbers(capsys.readouterr().out)
    assert main([*args, "--ray", "local"]) == 0
    on_ray = _numbers(capsys.readouterr().out)
    assert len(on_ray) == 4  # 2 variants x 2 seeds, in the same order
    assert on_ray == local


def test_without_ray_the_flag_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: importing fails
    scenario = tmp_path / "teams.yaml"
    scenario.write_text(yaml.safe_dump(teams()))
    assert main(["simulate", str(scenario), "--ray"]) == 2
    err = capsys.readouterr().err
    assert "--ray needs Ray, which is not installed: pip install 'batchsched[ray]'" in err
