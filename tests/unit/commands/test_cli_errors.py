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


BASIC = Path(__file__).resolve().parents[3] / "examples" / "basic" / "cluster.yaml"
AT = ["--now", "2026-11-22T10:00:00Z"]


def test_a_mistyped_command_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["schedul", "-f", str(BASIC)], capsys)
    assert code == 2 and out == ""
    assert "batchsched: error: unknown command 'schedul'; did you mean 'schedule'?" in err
    code, _, err = run(["frobnicate"], capsys)
    assert code == 2
    assert (
        "unknown command 'frobnicate' (one of: schedule, explain, policy, queues, run, ui, "
        "simulate)" in err
    )


def test_an_unknown_flag_prints_its_commands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["schedule", "-f", str(BASIC), "--stirct"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("usage: batchsched schedule [-h] [--strict]")
    assert "batchsched schedule: error: unrecognized arguments: --stirct; did you mean " in err
    code, _, err = run(["explain", "ml/x", "--colour"], capsys)
    assert code == 2 and err.startswith("usage: batchsched explain ")
    assert "unrecognized arguments: --colour (one of: " in err


@pytest.mark.parametrize(
    "argv",
    [
        ["explain", "-n", "research", "huge-job"],
        ["explain", "huge-job", "--namespace", "research"],
        ["explain", "research/huge-job"],
        ["explain", "research/huge-job", "-n", "research"],
    ],
)
def test_explain_takes_the_namespace_as_kubectl_does(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run([*argv, "-f", str(BASIC), *AT], capsys)
    assert code == 0, err
    assert out.startswith("POD research/huge-job (priority 8000)")


def test_explain_refuses_two_namespaces_and_defaults_to_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(["explain", "-n", "ml", "research/huge-job", "-f", str(BASIC), *AT], capsys)
    assert code == 2
    assert "explain: research/huge-job is in namespace 'research', but -n says 'ml'" in err
    code, _, err = run(["explain", "other-scheduler", "-f", str(BASIC), *AT], capsys)
    assert code == 2 and "explain: pod default/other-scheduler has schedulerName" in err


def test_a_pod_not_found_lists_some_pods_says_how_many_more_and_the_likely_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    pods = [pod(f"p{i:02}") for i in range(25)]
    pods.append(pod("train", namespace="ml"))
    path.write_text(yaml.safe_dump_all([node("a"), *pods]))
    code, _, err = run(["explain", "-n", "research", "train", "-f", str(path), *AT], capsys)
    assert code == 2
    shown = ", ".join(f"default/p{i:02}" for i in range(10))
    assert (
        f"explain: pod research/train not found; did you mean ml/train? (pods: {shown} and 16 more)"
    ) in err
