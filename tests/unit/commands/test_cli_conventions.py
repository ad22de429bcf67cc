"""kubectl habits on every command: -f (repeatable, -, directories, -R), --version, -o text|json|
yaml with text the default, help for every argument, an example per command, 100 columns."""

from __future__ import annotations

import argparse
import io
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchsched import __version__
from batchsched.commands.cli import _parser, main
from batchsched.plugins.registry import DEFAULT_PLUGINS
from batchsched.sim.command import summarise_warnings
from tests.builders import node, pod, priority_class
from tests.paths import ROOT

EXAMPLES = ROOT / "examples"
BASIC = EXAMPLES / "basic" / "cluster.yaml"
CLASSES = EXAMPLES / "preemption-toleration" / "priority-classes.yaml"
AT = ["--now", "2026-11-22T10:00:00Z"]
GANG_EXAMPLES = ("deadlock.yaml", "preemption.yaml", "training.yaml")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # --version, --help and usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def as_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    code, out, _ = run([*argv, "-o", "json"], capsys)
    assert code == 0
    return orjson.loads(out)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"batchsched {__version__}"


def test_every_argument_has_help_and_every_command_an_example() -> None:
    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == {
        "schedule",
        "explain",
        "policy",
        "queues",
        "run",
        "ui",
        "simulate",
    }
    for name, sub in commands.choices.items():
        assert "example:\n  batchsched " + name in (sub.epilog or ""), name
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}"


@pytest.mark.parametrize("command", ["schedule", "explain", "policy", "simulate"])
def test_text_is_the_default_and_json_yaml_agree(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {
        "schedule": ["schedule", "-f", str(BASIC), *AT],
        "explain": ["explain", "research/huge-job", "-f", str(BASIC), *AT],
        "policy": ["policy", "-f", str(CLASSES), *AT],
        "simulate": ["simulate", str(_small_scenario(tmp_path)), "--until", "1h"],
    }[command]
    code, text, _ = run(argv, capsys)
    assert code == 0 and not text.lstrip().startswith("{")
    as_json_data = as_json(argv, capsys)
    code, out, _ = run([*argv, "-o", "yaml"], capsys)
    assert code == 0
    if command == "simulate":  # wall time differs from run to run
        for data in (as_json_data, yaml.safe_load(out)):
            for r in data["runs"]:
                r.pop("wall_seconds")
        assert yaml.safe_load(out)["runs"][0]["name"] == as_json_data["runs"][0]["name"]
    else:
        assert yaml.safe_load(out) == as_json_data


def test_f_is_repeatable_and_equals_positional_files(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = EXAMPLES / "preemption-toleration"
    positional = as_json(
        ["schedule", str(files / "priority-classes.yaml"), str(files / "ten-minutes.yaml"), *AT],
        capsys,
    )
    flags = ["-f", str(files / "priority-classes.yaml"), "-f", str(files / "ten-minutes.yaml")]
    assert as_json(["schedule", *flags, *AT], capsys) == positional


def test_f_dash_reads_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(BASIC.read_text()))
    from_stdin = as_json(["schedule", "-f", "-", *AT], capsys)
    assert from_stdin == as_json(["schedule", "-f", str(BASIC), *AT], capsys)
    code, _, err = run(["schedule", "-f", "-", "-f", "-"], capsys)
    assert code == 2 and "can be given only once" in err


def test_directories_and_recursive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "a.yaml").write_text(yaml.safe_dump(node("a")))
    (tmp_path / "p.json").write_text(orjson.dumps(pod("p")).decode())
    (tmp_path / "notes.txt").write_text("not a manifest")
    flat = as_json(["schedule", "-f", str(tmp_path), *AT], capsys)
    assert flat["bindings"] == [] and flat["unschedulable"][0]["pod"] == "default/p"
    deep = as_json(["schedule", "-f", str(tmp_path), "-R", *AT], capsys)
    assert deep["bindings"] == [{"pod": "default/p", "node": "a"}]


def test_text_tables_fit_100_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every example through every command that reads manifests, as text."""
    runs = [
        ["schedule", "-f", str(BASIC), *AT],
        *(["schedule", "-f", str(EXAMPLES / "gang" / f), *AT] for f in GANG_EXAMPLES),
        ["schedule", "-f", str(EXAMPLES / "daemonset" / "cluster.yaml"), *AT],
        ["explain", "research/huge-job", "-f", str(BASIC), *AT],
        ["explain", "ml/b-1", "-f", str(EXAMPLES / "gang" / "preemption.yaml"), *AT],
        ["policy", "-f", str(CLASSES), *AT],
        ["simulate", str(_small_scenario(tmp_path)), "--until", "1h"],
    ]
    for argv in runs:
        _fits(argv, capsys)


def _fits(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(argv, capsys)
    assert code == 0, argv
    widest = max(out.splitlines(), key=len)
    assert len(widest) <= 100, (argv, widest)


def test_long_messages_wrap_and_names_are_never_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "a-pod-with-a-rather-long-name-that-identifies-it-" + "x" * 20
    manifests = [node(f"node-{i}", cpu="1") for i in range(12)]
    manifests += [pod(name, cpu="2", node_selector={"zone": "nowhere"}, tolerations=[])]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    code, out, _ = run(["schedule", "-f", str(path), *AT], capsys)
    assert code == 0
    assert f"default/{name}" in out  # whole, on one line
    assert max(len(line) for line in out.splitlines()) <= 100


@pytest.mark.parametrize("columns", [72, 160])
def test_text_follows_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """COLUMNS (a terminal's width) sets where text wraps; 100 is only the default."""
    monkeypatch.setenv("COLUMNS", str(columns))
    for argv in (
        ["schedule", "-f", str(BASIC), *AT],
        ["explain", "research/huge-job", "-f", str(BASIC), *AT],
    ):
        code, out, _ = run(argv, capsys)
        assert code == 0
        widest = max(len(line) for line in out.splitlines())
        assert widest <= columns
        assert widest > 100 if columns > 100 else True  # the long messages take the room


def test_explain_never_cuts_a_plugin_name_inside_a_word(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(["explain", "ml/trainer-0", "-f", str(BASIC), *AT], capsys)
    assert code == 0
    table = out[out.index("NODES") :].splitlines()[1:]
    header = table[: next(i for i, line in enumerate(table) if line.startswith("  gpu-a"))]
    words = {w for line in header for w in line.split()}
    whole = {"NODE", "TOTAL"}
    for name in DEFAULT_PLUGINS["score"]:
        parts = re.findall(r"[A-Z][a-z]*", name[0])
        whole |= {"".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, 9)}
    assert words <= whole, words - whole
    assert "Resources" in words  # the table did have to wrap its names


def test_warnings_print_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = priority_class(
        "odd",
        100,
        annotations={"preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "x"},
    )
    manifests = [
        bad,
        priority_class("high", 1000),
        node("a", cpu="1"),
        pod("low", cpu="1", node_name="a", priority_class="odd"),
        pod("p", cpu="1", priority_class="high"),
    ]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    code, out, err = run(["schedule", "-f", str(path), *AT], capsys)
    assert code == 0 and err == ""
    assert out.count("PriorityClass odd") == 1
    code, out, err = run(["schedule", "-f", str(path), *AT, "-o", "json"], capsys)
    assert err.count("warning: PriorityClass odd") == 1
    assert len(orjson.loads(out)["warnings"]) == 1


def test_gang_warnings_that_no_longer_hold_are_dropped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # ml/big waited ("0/2 members can run") until its preemption made room; it runs now.
    running = as_json(["schedule", "-f", str(EXAMPLES / "gang" / "preemption.yaml"), *AT], capsys)
    assert running["warnings"] == []
    # ml/job-b still waits: its warning stands.
    waiting = as_json(["schedule", "-f", str(EXAMPLES / "gang" / "deadlock.yaml"), *AT], capsys)
    assert [w["object"] for w in waiting["warnings"]] == ["PodGroup ml/job-b"]


def test_repeated_simulation_warnings_are_summarised() -> None:
    warnings = [
        f"PodGroup t/g{i}: Unschedulable: 1 running, 0 succeeded and {i} pending members, "
        "fewer than minMember 4"
        for i in range(5)
    ] + ["PriorityClass x: bad annotation"]
    summary = summarise_warnings(warnings)
    assert summary == [
        "5 objects (PodGroup t/g0, PodGroup t/g1, PodGroup t/g2 and 2 more), e.g.: "
        "Unschedulable: 1 running, 0 succeeded and 0 pending members, fewer than minMember 4",
        "PriorityClass x: bad annotation",
    ]


def _small_scenario(tmp_path: Path) -> Path:
    source = EXAMPLES / "ml-cluster" / "scenario.yaml"
    target = tmp_path / "scenario.yaml"
    shutil.copy(source, target)
    return target
