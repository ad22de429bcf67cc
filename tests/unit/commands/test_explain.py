"""`batchsched explain NS/POD`: per-node verdicts, scores, preemption candidates, the gang."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.commands.explain import explain_pod
from batchsched.config import default_config
from batchsched.objects.errors import InputError
from batchsched.objects.load import Objects
from batchsched.objects.podgroup import GROUP_LABEL
from tests.builders import node, pod, pod_group, priority_class
from tests.conftest import NOW, objects_of
from tests.paths import ROOT

EXAMPLES = ROOT / "examples"
AT = "2026-11-22T10:00:00Z"


def explain_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["explain", *argv, "--now", AT, "-o", "json"]) == 0
    data: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return data


def test_pending_pod_gets_every_nodes_first_failing_filter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = explain_cli(capsys, "research/huge-job", "-f", str(EXAMPLES / "basic" / "cluster.yaml"))
    assert data["status"] == "pending"
    assert data["message"].startswith("0/4 nodes are available")
    verdicts = {n["node"]: (n["filter"], n["reason"]) for n in data["nodes"]}
    assert verdicts == {
        "cpu-1": ("NodeResourcesFit", "Insufficient nvidia.com/gpu"),
        "cpu-2": ("NodeUnschedulable", "node(s) were unschedulable"),
        "gpu-a": ("NodeResourcesFit", "Insufficient nvidia.com/gpu"),
        "gpu-b": ("NodeResourcesFit", "Insufficient nvidia.com/gpu"),
    }
    # The unschedulable node is no preemption candidate; the others cannot make room.
    candidates = data["preemption"]["candidates"]
    assert [c["node"] for c in candidates] == ["cpu-1", "gpu-a", "gpu-b"]
    assert not any(c["works"] for c in candidates)
    assert data["preemption"]["node"] == ""


def test_bound_pod_shows_scores_and_why_its_node_won(capsys: pytest.CaptureFixture[str]) -> None:
    data = explain_cli(capsys, "ml/trainer-1", "-f", str(EXAMPLES / "basic" / "cluster.yaml"))
    assert data["status"] == "bound" and data["node"] == "gpu-a"  # packed beside trainer-0
    feasible = [n for n in data["nodes"] if "total" in n]
    assert [n["node"] for n in feasible] == ["gpu-a", "gpu-b"]  # highest total first
    assert feasible[0]["total"] > feasible[1]["total"]
    assert data["chosen"]["node"] == "gpu-a"
    assert "highest total score" in data["chosen"]["why"]


def ten_minutes() -> Objects:
    files = EXAMPLES / "preemption-toleration"
    return objects_of(
        *yaml.safe_load_all((files / "priority-classes.yaml").read_text()),
        *yaml.safe_load((files / "ten-minutes.yaml").read_text())["items"],
    )


def test_protected_victims_are_named_with_their_class_and_end() -> None:
    e = explain_pod(ten_minutes(), default_config(), NOW, "ml/train-2")
    assert e.status == "pending" and e.preemption_node == ""
    by_node = {c.node: c for c in e.candidates}
    fresh = by_node["gpu-1"]
    assert not fresh.works and fresh.victims == []
    assert [(p.pod, p.klass) for p in fresh.protected] == [
        ("research/fresh", "low-non-preempted-10min")
    ]
    assert fresh.protected[0].until is not None
    assert fresh.protected[0].until.isoformat() == "2026-11-22T10:06:00+00:00"
    assert "protected pods" in fresh.why
    # The first preemptor took gpu-2: its own explanation names the victim.
    first = explain_pod(ten_minutes(), default_config(), NOW, "ml/train")
    assert first.status == "bound" and first.evicted_for_it == ["research/seasoned"]
    assert first.preemption_node == "gpu-2"
    assert {c.node: c.victims for c in first.candidates} == {
        "gpu-1": [],
        "gpu-2": ["research/seasoned"],
    }


PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "keep", "namespace": "default"},
    "spec": {"selector": {"matchLabels": {"app": "db"}}},
    "status": {"disruptionsAllowed": 0},
}


def test_a_preemptor_is_explained_with_its_victims_back() -> None:
    objects = objects_of(
        PDB,
        priority_class("low", 100),
        priority_class("high", 1000),
        node("a", cpu="2"),
        node("b", cpu="2"),
        pod("db", cpu="2", node_name="a", priority_class="low", labels={"app": "db"}),
        pod("batch", cpu="2", node_name="b", priority_class="low"),
        pod("vip", cpu="2", priority_class="high"),
    )
    e = explain_pod(objects, default_config(), NOW, "default/vip")
    assert e.status == "bound" and e.node == "b" and e.evicted_for_it == ["default/batch"]
    assert e.preemption_node == "b"
    by_node = {c.node: c for c in e.candidates}
    assert by_node["a"].victims == ["default/db"]
    assert by_node["a"].pdb_violations == ["default/db"]  # so b, without a violation, won
    assert by_node["b"].victims == ["default/batch"] and by_node["b"].pdb_violations == []


def test_a_pod_that_may_not_preempt_says_so() -> None:
    objects = objects_of(
        priority_class("low", 100),
        priority_class("high", 1000),
        node("a", cpu="2"),
        pod("batch", cpu="2", node_name="a", priority_class="low"),
        pod("polite", cpu="2", priority_class="high", preemptionPolicy="Never"),
    )
    e = explain_pod(objects, default_config(), NOW, "default/polite")
    assert e.status == "pending"
    assert e.preemption == "not eligible: preemptionPolicy is Never"
    assert e.candidates == []


def test_gang_member_tells_the_groups_story(capsys: pytest.CaptureFixture[str]) -> None:
    data = explain_cli(capsys, "ml/b-1", "-f", str(EXAMPLES / "gang" / "preemption.yaml"))
    assert data["gang"] == {
        "group": "ml/big",
        "minMember": 2,
        "phase": "Running",
        "members": [{"pod": "ml/b-0", "node": "n4"}, {"pod": "ml/b-1", "node": "n5"}],
    }
    assert data["preemption"]["evictedForIt"] == ["ml/s-4", "ml/s-5"]


def test_waiting_gang_member(capsys: pytest.CaptureFixture[str]) -> None:
    data = explain_cli(capsys, "ml/job-b-worker-0", "-f", str(EXAMPLES / "gang" / "deadlock.yaml"))
    assert data["status"] == "pending"
    assert data["message"].startswith("PodGroup ml/job-b: 0/4 members can run")
    assert data["gang"]["phase"] == "Scheduling"
    assert all(m["node"] == "" for m in data["gang"]["members"])


def test_a_pending_member_that_fits_alone_is_given_the_groups_story_not_a_node() -> None:
    # Each member fits alone, three do not fit together: the group decided, so no node is
    # "chosen" for the member; its preemption standing is the group's attempt's.
    trio = [pod(f"t-{i}", cpu="3", namespace="ml", labels={GROUP_LABEL: "trio"}) for i in range(3)]
    objects = objects_of(node("a"), node("b"), pod_group("trio", 3), *trio)
    e = explain_pod(objects, default_config(), NOW, "ml/t-0")
    assert e.status == "pending" and [n.node for n in e.nodes if n.total is not None] == ["a", "b"]
    assert (e.chosen, e.chosen_why, e.candidates) == ("", "", [])
    assert e.preemption == (
        "decided for PodGroup ml/trio as one (room for minMember members at once, or none): "
        "preemption: 0 pod(s) may be preempted, not enough for minMember."
    )


def test_unknown_pod_and_running_pod(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = str(EXAMPLES / "basic" / "cluster.yaml")
    assert main(["explain", "ml/nope", "-f", cluster]) == 2
    assert "pod ml/nope not found (pods: " in capsys.readouterr().err
    objects = objects_of(node("a"), pod("p", node_name="a"))
    e = explain_pod(objects, default_config(), NOW, "default/p")
    assert e.status == "running" and e.node == "a"


def test_foreign_pod_is_refused() -> None:
    objects = objects_of(node("a"), pod("p", scheduler="default-scheduler"))
    with pytest.raises(InputError, match="schedulerName 'default-scheduler'"):
        explain_pod(objects, default_config(), NOW, "default/p")


def test_text_fits_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    files = EXAMPLES / "preemption-toleration"
    argv = ["-f", str(files / "priority-classes.yaml"), "-f", str(files / "ten-minutes.yaml")]
    assert main(["explain", "ml/train-2", *argv, "--now", AT]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "PREEMPTION: none of 2 candidate node(s) can make room" in out
    assert "until 2026-11-22T10:06:00Z" in out
