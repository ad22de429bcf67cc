"""A gang's minResources is a filter on what could be freed (docs/gang.md): free room plus
what the group's preemption may take, and pods already terminating."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from batchsched.commands.cli import main
from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.decisions import Bind, Evict
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod, priority_class
from tests.builders import pod_group as group
from tests.conftest import NOW, objects_of, schedule
from tests.paths import ROOT

GANG = ROOT / "tests" / "scenarios" / "gang"
AT = "2026-11-22T10:00:00Z"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--now", AT, "-o", "json"]) == 0
    data: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return data


def test_a_gang_whose_min_resources_preemption_can_free_preempts_end_to_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = run_cli(capsys, "schedule", str(GANG / "min-resources-preempts.yaml"))
    by_group = [e["pod"] for e in plan["evictions"] if e["preemptor"] == "ml/w-0"]
    assert by_group == ["research/low-1", "research/low-2"]
    assert all("PodGroup ml/big" in e["reason"] for e in plan["evictions"][:2])
    assert not plan["unschedulable"] and not plan["warnings"]  # Running: nothing to warn of


def test_a_group_retried_as_the_cluster_changed_gets_one_warning_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The group is attempted three times (before and after the mid pod's preemption, whose
    # victim changes the room): one row, the last attempt's, not one per attempt.
    plan = run_cli(capsys, "schedule", str(GANG / "min-resources-protected.yaml"))
    assert plan["warnings"] == [
        {
            "object": "PodGroup ml/big",
            "message": "the cluster cannot hold its minResources even with preemption: needs "
            "nvidia.com/gpu 16 (free: 2, preemption could free 8 more)",
        }
    ]


def test_explain_tells_the_groups_refusal_not_one_members_candidates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = run_cli(capsys, "explain", "ml/w-0", "-f", str(GANG / "min-resources-protected.yaml"))
    assert data["status"] == "pending"
    assert "even with preemption" in data["message"]
    standing = data["preemption"]
    assert standing["summary"].startswith("not tried: the group was refused or waits")
    assert standing["candidates"] == [] and standing["node"] == ""


def test_explain_tells_the_groups_preemption_when_it_falls_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Enough could be freed for minResources, but both members may only run on gpu-1: the
    # group's search finds no way, and explain says what the group said.
    text = (GANG / "min-resources-preempts.yaml").read_text()
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(
        text.replace("spec: {priorityClassName: high,", "spec: {nodeName: '', "
                     "nodeSelector: {kubernetes.io/hostname: gpu-1}, priorityClassName: high,")
    )  # fmt: skip
    data = run_cli(capsys, "explain", "ml/w-0", "-f", str(pinned))
    assert data["message"].startswith("PodGroup ml/big: 0/2 members can run")
    assert data["preemption"]["summary"] == (
        "decided for PodGroup ml/big as one (room for minMember members at once, or none): "
        "preemption: 3 pod(s) may be preempted, not enough for minMember."
    )
    assert data["preemption"]["candidates"] == []


def members(cpu: str = "4", **spec: Any) -> list[dict[str, Any]]:
    return [
        pod(f"b-{i}", cpu=cpu, namespace="ml", labels={GROUP_LABEL: "big"},
            priority_class="high", **spec)
        for i in range(2)
    ]  # fmt: skip


def cluster(**min_resources: str) -> list[dict[str, Any]]:
    return [
        priority_class("low", 10),
        priority_class("high", 1000),
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        pod("l-1", cpu="3", namespace="ml", node_name="n1", priority_class="low"),
        pod("l-2", cpu="3", namespace="ml", node_name="n2", priority_class="low"),
        group("big", 2, minResources=min_resources),
    ]


def test_the_room_of_terminating_victims_counts_while_the_group_waits_for_them() -> None:
    sched = Scheduler(build_state(objects_of(*cluster(cpu="8"), *members())), default_config())
    first = sched.schedule_pass(NOW)
    assert sorted(d.pod for d in first if isinstance(d, Evict)) == ["ml/l-1", "ml/l-2"]
    # The victims still terminate (they hold their room): the group waits for them, and is
    # not refused for minResources, which their room will cover.
    sched.queue.flush()
    second = sched.schedule_pass(NOW)
    assert not [d for d in second if isinstance(d, Evict | Bind)]
    message = sched.messages["ml/b-0"]
    assert "preemption: waiting for the victims of an earlier preemption to go." in message
    # It has waited (docs/backfill.md): it holds the nodes its victims leave, 30 s from now.
    assert message.endswith("reserved n1, n2; expected start 2026-11-22T10:00:30Z.")


def test_a_group_that_may_not_preempt_is_refused_on_the_free_room_alone() -> None:
    result = schedule(*cluster(cpu="8"), *members(preemptionPolicy="Never"))
    assert not result.evictions
    assert result.unschedulable["ml/b-0"] == (
        "PodGroup ml/big: the cluster cannot hold its minResources: needs cpu 8 (free: 2)"
    )


def test_the_pre_filter_alone_admits_on_what_could_be_freed_too() -> None:
    # A profile without the Permit group hook admits members one by one at PreFilter: the
    # same filter, so each member may preempt for itself.
    config = parse_config(
        {
            "profiles": [
                {
                    "plugins": {
                        "permit": {"disabled": [{"name": "Coscheduling"}]},
                        "preFilter": {"enabled": [{"name": "Coscheduling"}]},
                    }
                }
            ]
        }
    )
    result = schedule(*cluster(cpu="8"), *members(), config=config)
    assert sorted(e.pod for e in result.evictions) == ["ml/l-1", "ml/l-2"]
    protected = schedule(*cluster(cpu="9"), *members(), config=config)  # 8 cpu in all
    assert not protected.evictions
    assert (
        "needs cpu 9 (free: 2, preemption could free 6 more)" in protected.unschedulable["ml/b-0"]
    )
