"""Bad input: exit 2, a message naming the problem, never a traceback."""

from pathlib import Path

import pytest
import yaml

from batchsched.commands.cli import main
from tests.builders import node, pod


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_malformed_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = pod("p")
    bad["spec"]["containers"][0]["resources"]["requests"]["memory"] = "lots"
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump_all([node("a"), bad]))
    code, out, err = run(["schedule", str(path)], capsys)
    assert code == 2 and out == ""
    assert f"{path}: Pod default/p: spec.containers[0].resources.requests.memory" in err
    assert "Traceback" not in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["schedule", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2 and "nope.yaml: cannot read" in err


def test_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifests = tmp_path / "m.yaml"
    manifests.write_text(yaml.safe_dump(node("a")))
    config = tmp_path / "c.yaml"
    config.write_text("profiles: [{plugins: {filter: {enabled: [{name: Bogus}]}}}]\n")
    code, _, err = run(["schedule", str(manifests), "--config", str(config)], capsys)
    assert code == 2 and "unknown plugin 'Bogus'" in err


def test_bad_now(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifests = tmp_path / "m.yaml"
    manifests.write_text(yaml.safe_dump(node("a")))
    code, _, err = run(["schedule", str(manifests), "--now", "yesterday"], capsys)
    assert code == 2 and "is not an RFC 3339 time" in err


def test_text_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifests = tmp_path / "m.yaml"
    manifests.write_text(yaml.safe_dump_all([node("a"), pod("p"), pod("big", cpu="64")]))
    code, out, _ = run(["schedule", str(manifests), "-o", "text"], capsys)
    assert code == 0
    assert "BINDINGS (1)" in out and "default/p  a" in out
    assert "default/big  0/1 nodes are available: 1 Insufficient cpu." in out
