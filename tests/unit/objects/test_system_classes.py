"""The API server's built-in PriorityClasses exist without their objects in the input
(docs/preemption-toleration.md#built-in-classes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import read_priority_class
from batchsched.objects.records import Pod
from batchsched.sim.scenario import load_scenario
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, priority_class

AT = "2026-11-22T10:00:00Z"


def snapshot(tmp_path: Path, *manifests: dict[str, Any]) -> str:
    """A `kubectl get pods,nodes -o yaml` snapshot: no PriorityClass objects in it."""
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump({"kind": "List", "items": list(manifests)}))
    return str(path)


def cluster(tmp_path: Path) -> str:
    return snapshot(
        tmp_path,
        node("n1", cpu="2"),
        pod("kube-proxy", namespace="kube-system", node_name="n1", phase="Running",
            priority_class="system-node-critical"),
        pod("coredns", namespace="kube-system", priority_class="system-cluster-critical"),
        pod("app"),
    )  # fmt: skip


def test_schedule_reads_a_snapshot_naming_the_built_in_classes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schedule", cluster(tmp_path), "--now", AT, "-o", "json"]) == 0
    plan = orjson.loads(capsys.readouterr().out)
    # coredns (2000000000) goes before app (no class: 0) and takes the last cpu.
    assert plan["bindings"] == [{"pod": "kube-system/coredns", "node": "n1"}]
    assert [u["pod"] for u in plan["unschedulable"]] == ["default/app"]


def test_explain_gives_a_built_in_class_its_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster(tmp_path)
    assert main(["explain", "kube-system/coredns", "-f", path, "--now", AT, "-o", "json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["priority"] == 2_000_000_000


def test_policy_lists_the_built_in_classes_the_pods_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = snapshot(
        tmp_path,
        priority_class("low", 10),
        pod("kube-proxy", namespace="kube-system", node_name="n1", phase="Running",
            priority_class="system-node-critical"),
    )  # fmt: skip
    assert main(["policy", path, "--now", AT, "-o", "json"]) == 0
    matrix = orjson.loads(capsys.readouterr().out)["matrix"]
    assert set(matrix) == {"low", "system-node-critical"}  # not system-cluster-critical
    assert matrix["low"]["system-node-critical"] == "immediately"


def test_a_file_may_define_a_built_in_class_only_as_the_api_server_has_it() -> None:
    same = priority_class("system-cluster-critical", 2_000_000_000)
    assert read_priority_class(same).value == 2_000_000_000
    with pytest.raises(ManifestError, match=r"value: must be 2000001000"):
        read_priority_class(priority_class("system-node-critical", 1000))
    with pytest.raises(ManifestError, match=r"globalDefault: must be false"):
        read_priority_class(priority_class("system-cluster-critical", 2_000_000_000, True))


def test_the_state_keeps_the_built_in_classes_when_told_they_were_deleted() -> None:
    state = ClusterState()
    critical = Pod(namespace="kube-system", name="p", priority_class_name="system-node-critical")
    assert state.policy.priority_of(critical) == 2_000_001_000
    assert state.policy.preemption_policy_of(critical) == "PreemptLowerPriority"
    state.remove_priority_class("system-node-critical")  # the API server refuses this
    assert state.policy.priority_of(critical) == 2_000_001_000
    assert not any(pc.global_default for pc in state.policy.priority_classes.values())


def test_a_simulated_job_may_name_a_built_in_class(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "s",
                "start": "2026-11-22T00:00:00Z",
                "cluster": {"pools": [{"name": "n", "count": 1, "allocatable": {"cpu": "4"}}]},
                "priorityClasses": [],
                "work": {
                    "jobs": [
                        {"name": "dns", "submit": "1m", "requests": {"cpu": "1"},
                         "duration": "1h", "class": "system-cluster-critical"},
                    ]
                },
            }
        )
    )  # fmt: skip
    jobs = load_scenario(path).jobs(seed=1)
    assert [j.priority_class for j in jobs] == ["system-cluster-critical"]
