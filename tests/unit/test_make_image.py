"""`make image` builds the Dockerfile with the first container tool whose engine answers, and
says what to do where none does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make not on PATH")


def _tool(folder: Path, name: str, engine_up: bool) -> Path:
    """A stand-in for docker or podman that logs its arguments; `info` fails without engine."""
    log = folder / f"{name}.log"
    script = folder / name
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {log}\n[ "$1" = info ] && exit {0 if engine_up else 1}\nexit 0\n'
    )
    script.chmod(0o755)
    return log


def _make(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}
    return subprocess.run(
        ["make", "-s", "image", *args], cwd=REPO, env=env, capture_output=True, text=True
    )


def test_builds_with_the_first_tool_whose_engine_answers(tmp_path: Path) -> None:
    down = _tool(tmp_path, "fake-docker", engine_up=False)
    up = _tool(tmp_path, "fake-podman", engine_up=True)
    done = _make(tmp_path, "CONTAINER_TOOLS=fake-docker fake-podman", "IMAGE=reg.example/bs:1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert down.read_text().split("\n")[0] == "info"
    assert "build" not in down.read_text()
    assert up.read_text().splitlines() == ["info", "build -t reg.example/bs:1 ."]
    assert "fake-docker is on PATH but its engine does not answer" in done.stdout


def test_the_image_is_named_after_the_package_version(tmp_path: Path) -> None:
    log = _tool(tmp_path, "fake-docker", engine_up=True)
    assert _make(tmp_path, "CONTAINER_TOOLS=fake-docker").returncode == 0
    version = next(
        line.split('"')[1]
        for line in (REPO / "pyproject.toml").read_text().splitlines()
        if line.startswith("version = ")
    )
    assert log.read_text().splitlines()[-1] == f"build -t batchsched:{version} ."


def test_without_a_tool_it_fails_saying_what_is_needed(tmp_path: Path) -> None:
    done = _make(tmp_path, "CONTAINER_TOOLS=no-such-docker")
    assert done.returncode != 0
    assert "needs docker or podman with a running engine (tried: no-such-docker)" in done.stdout
    assert "docker build -t batchsched:" in done.stdout
