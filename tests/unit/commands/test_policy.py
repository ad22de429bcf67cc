"""`batchsched policy`: the preemption matrix, warnings and protected pods."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from batchsched.commands.cli import main
from batchsched.commands.policy import build_report, human_duration, policy_warnings
from batchsched.objects.load import Objects
from batchsched.preemption.toleration_policy import parse_policy
from tests.paths import ROOT
from tests.preemption_world import NOW, SIGS, X_K8S, pod, priority_class

EXAMPLES = ROOT / "examples" / "preemption-toleration"


def seeds() -> Objects:
    return Objects(
        priority_classes=[
            priority_class("low", 8000),
            priority_class("system-critical", 10000),
            priority_class("high", 9000),
            priority_class("low-non-preempted", 8000, "10000", "-1"),
            priority_class("low-non-preempted-10min", 8000, "10000", "600"),
        ]
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45, "45s"), (600, "10m"), (5400, "1h30m"), (90061, "1d1h1m1s")],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_matrix_of_the_seed_classes() -> None:
    report = build_report(seeds(), NOW)
    assert [pc.name for pc in report.classes] == [
        "system-critical",
        "high",
        "low",
        "low-non-preempted",
        "low-non-preempted-10min",
    ]
    assert report.matrix() == [
        ["no", "no", "no", "no", "no"],
        ["immediately", "no", "no", "no", "no"],
        ["immediately", "immediately", "no", "no", "no"],
        ["immediately", "never", "no", "no", "no"],
        ["immediately", "after 10m of run time", "no", "no", "no"],
    ]
    assert report.warnings == []


def test_never_preemptors_never_preempt() -> None:
    objects = Objects(
        priority_classes=[priority_class("polite", 9000, policy="Never"), priority_class("low", 1)]
    )
    assert build_report(objects, NOW).matrix()[1] == ["never", "no"]


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        ({X_K8S + "toleration-second": "60"}, "unknown key"),
        ({X_K8S + "toleration-seconds": "60", SIGS + "toleration-seconds": "30"}, "disagree"),
        (
            {X_K8S + "minimum-preemptable-priority": "100", X_K8S + "toleration-seconds": "-1"},
            "is not above the class's value 8000 + 1",
        ),
        ({X_K8S + "minimum-preemptable-priority": "10000"}, "toleration-seconds is 0"),
        ({X_K8S + "toleration-seconds": "1h"}, "is not a base-10 integer"),
        ({X_K8S + "minimum-preemptable-priority": "99999999999"}, "32-bit"),
    ],
)
def test_warnings(annotations: dict[str, str], fragment: str) -> None:
    pc = priority_class("c", 8000)
    pc.annotations = annotations
    warnings = policy_warnings(pc, parse_policy(pc))
    assert any(fragment in w for w in warnings), warnings


def test_well_formed_classes_raise_no_warning() -> None:
    for pc in seeds().priority_classes:
        assert policy_warnings(pc, parse_policy(pc)) == []


def test_protected_pods_at_now() -> None:
    objects = seeds()
    objects.pods = [
        pod("fresh", 1, on="n1", klass="low-non-preempted-10min", scheduled=timedelta(minutes=4)),
        pod("old", 1, on="n1", klass="low-non-preempted-10min", scheduled=timedelta(minutes=10)),
        pod("solver", 1, on="n1", klass="low-non-preempted"),
        pod("plain", 1, on="n1", klass="low"),
        pod("waiting", 1, klass="low-non-preempted"),
    ]
    pods = {p.pod: p for p in build_report(objects, NOW).pods}
    assert set(pods) == {"default/fresh", "default/old", "default/solver"}
    assert pods["default/fresh"].protected and not pods["default/old"].protected
    assert pods["default/fresh"].until == NOW + timedelta(minutes=6)
    assert pods["default/solver"].until is None and pods["default/solver"].protected


def test_cli_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    classes = str(EXAMPLES / "priority-classes.yaml")
    assert main(["policy", classes, "--now", "2026-11-22T10:00:00Z"]) == 0
    text = capsys.readouterr().out
    assert "(5) low-non-preempted-10min (8000)  immediately  after 10m of run time  no" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    assert main(["policy", classes, "-o", "json", "--now", "2026-11-22T10:00:00Z"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["matrix"]["low-non-preempted"] == {
        "system-critical": "immediately",
        "high": "never",
        "low": "no",
        "low-non-preempted": "no",
        "low-non-preempted-10min": "no",
    }


def test_cli_without_priority_classes_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("kind: List\nitems: []\n")
    assert main(["policy", str(empty)]) == 2
    assert "no PriorityClass found" in capsys.readouterr().err
