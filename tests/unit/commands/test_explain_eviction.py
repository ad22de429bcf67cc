"""`batchsched explain` on a pod the plan evicts: by whom, under which rule, and the
toleration or PodDisruptionBudget it did not have (docs/explain.md)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.commands.explain import explain_pod
from batchsched.commands.explain_eviction import (
    BROKEN_PROMISE,
    DAEMONSET,
    DEFAULT,
    GANG,
    RECLAIM,
    TOLERATION,
)
from batchsched.config import default_config, parse_config
from batchsched.objects.parse import parse_time
from tests.builders import node, pod, priority_class
from tests.conftest import NOW, objects_of
from tests.paths import ROOT
from tests.unit.commands.test_explain import PDB, ten_minutes

SCENARIOS = ROOT / "tests" / "scenarios"
AT = "2026-11-22T10:00:00Z"


def test_cli_says_a_gang_victim_is_evicted_by_the_preempting_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = SCENARIOS / "gang" / "gang-victims-whole.yaml"
    assert main(["explain", "ml/g-3", "-f", str(path), "--now", AT]) == 0
    out = capsys.readouterr().out
    assert "nothing to decide" not in out
    assert "  evicted in this plan from n3 by ml/b-0 (priority 1000)\n" in out
    assert "  rule: gang preemption (PreemptionToleration): PodGroup ml/big" in out
    assert "  its PodGroup ml/low is preempted as one: with it ml/g-1, ml/g-2\n" in out
    assert "  toleration: PriorityClass low (10) has no toleration policy\n" in out
    assert "  PodDisruptionBudget: none covers it\n" in out
    assert max(len(line) for line in out.splitlines()) <= 100


def test_cli_says_a_reclaimed_pod_was_taken_back_naming_both_queues(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = SCENARIOS / "queues" / "reclaim-three-teams.yaml"
    assert main(["explain", "default/b-4", "-f", str(path), "--now", AT]) == 0
    out = capsys.readouterr().out
    assert "  evicted in this plan from n2 by default/a-1 (priority 0)\n" in out
    assert (
        "  rule: reclaim (Queues): queue team-a was within its fair share and queue team-b" in out
    )
    assert "  protection: queue team-b sets no reclaimMinRuntime (it had run 30m); its" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    text = path.read_text()
    objects = objects_of(*(d for d in yaml.safe_load_all(text) if d["kind"] != "Scenario"))
    assert explained(objects, "default/b-2", now=parse_time(AT)).rule == RECLAIM


def test_cli_says_a_pod_past_its_stated_runtime_broke_its_promise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = SCENARIOS / "backfill" / "broken-promise-evicted.yaml"
    assert main(["explain", "default/run-a", "-f", str(path), "--now", AT]) == 0
    out = capsys.readouterr().out
    assert "  evicted in this plan from gpu-1 by ml/big-0 (priority 0)\n" in out
    assert (
        "  rule: broken promise (Backfill): the pod ran 30m past its stated runtime 1h; node "
        "gpu-1 was\n    reserved for PodGroup ml/big" in out
    )
    assert "  protection: none: a pod past its stated runtime yields to a reservation" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    text = path.read_text()
    objects = objects_of(*(d for d in yaml.safe_load_all(text) if d["kind"] != "Scenario"))
    assert explained(objects, "default/run-b", now=parse_time(AT)).rule == BROKEN_PROMISE


def explained(objects: Any, key: str, config: Any = None, now: Any = NOW) -> Any:
    e = explain_pod(objects, config or default_config(), now, key)
    assert e.status == "evicted" and e.eviction is not None
    return e.eviction


def test_a_gang_victim_names_its_group_and_the_members_going_with_it() -> None:
    text = (SCENARIOS / "gang" / "gang-victims-whole.yaml").read_text()
    objects = objects_of(*(d for d in yaml.safe_load_all(text) if d["kind"] != "Scenario"))
    story = explained(objects, "ml/g-1")
    assert (story.preemptor, story.rule, story.group) == ("ml/b-0", GANG, "ml/low")
    assert story.with_it == ["ml/g-2", "ml/g-3"]


def test_a_time_limited_toleration_that_ran_out_says_when() -> None:
    story = explained(ten_minutes(), "research/fresh", now=parse_time("2026-11-22T10:06:00Z"))
    assert (story.preemptor, story.rule, story.plugin) == (
        "ml/train",
        TOLERATION,
        "PreemptionToleration",
    )
    assert story.toleration == (
        "PriorityClass low-non-preempted-10min tolerates preemptors below priority 10000 for "
        "10m after the pod is scheduled, which ended at 2026-11-22T10:06:00Z"
    )


def test_a_victim_covered_by_a_budget_that_is_exceeded_says_so() -> None:
    objects = objects_of(
        PDB,
        priority_class("low", 100),
        priority_class("high", 1000),
        node("a", cpu="2"),
        pod("db", cpu="2", node_name="a", priority_class="low", labels={"app": "db"}),
        pod("vip", cpu="2", priority_class="high"),
    )
    story = explained(objects, "default/db")
    assert [b.to_json() for b in story.budgets] == [
        {"pdb": "default/keep", "disruptionsAllowed": 0, "evicted": 1, "violated": True}
    ]


def test_a_default_preemption_profile_reads_no_toleration() -> None:
    config = parse_config(
        {
            "profiles": [
                {
                    "plugins": {
                        "postFilter": {
                            "disabled": [{"name": "PreemptionToleration"}],
                            "enabled": [{"name": "DefaultPreemption"}],
                        }
                    }
                }
            ]
        }
    )
    objects = objects_of(
        priority_class("low", 100),
        priority_class("high", 1000),
        node("a", cpu="2"),
        pod("batch", cpu="2", node_name="a", priority_class="low"),
        pod("vip", cpu="2", priority_class="high"),
    )
    story = explained(objects, "default/batch", config)
    assert (story.rule, story.plugin) == (DEFAULT, "DefaultPreemption")
    assert (
        story.toleration
        == "the profile's DefaultPreemption reads no toleration policy (its priority: 100)"
    )


def test_a_daemonset_victim_names_the_rule_and_its_victim_class() -> None:
    text = (SCENARIOS / "daemonset" / "victim-classes.yaml").read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    header = next(d for d in docs if d["kind"] == "Scenario")
    objects = objects_of(*(d for d in docs if d["kind"] != "Scenario"))
    story = explained(objects, "default/driver", parse_config(header["config"]))
    assert (story.preemptor, story.rule) == ("logging/agent-node-a", DAEMONSET)
    assert story.why == "the DaemonSet pod may run only on node node-a, which had no room"
    assert story.toleration.endswith("it was an owner pod (other pods name it in an "
                                     "ownerReference), taken only after regular pods")  # fmt: skip


def test_a_running_pod_left_alone_has_its_class_priority() -> None:
    objects = objects_of(
        node("a"),
        pod("proxy", namespace="kube-system", node_name="a", priority_class="system-node-critical"),
    )
    e = explain_pod(objects, default_config(), NOW, "kube-system/proxy")
    assert (e.status, e.node, e.priority, e.eviction) == ("running", "a", 2_000_001_000, None)
