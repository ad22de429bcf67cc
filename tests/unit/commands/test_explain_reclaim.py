"""`batchsched explain` for a pending pod that reclaim did not help (docs/queues.md#reclaim):
each other queue, the levels compared and the rule that kept its pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.commands.explain import explain_pod
from batchsched.config import default_config, parse_config
from batchsched.objects.parse import parse_time
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API
from tests.builders import node, pod
from tests.conftest import objects_of
from tests.paths import ROOT
from tests.unit.plugins.queues.test_reclaim_plugin import GANG

QUEUES = ROOT / "tests" / "scenarios" / "queues"
AT = "2026-11-22T10:00:00Z"
GPU = "nvidia.com/gpu"


def explained(name: str, pod: str, config: object = None) -> object:
    text = (QUEUES / name).read_text()
    objects = objects_of(*(d for d in yaml.safe_load_all(text) if d["kind"] != "Scenario"))
    return explain_pod(objects, config or default_config(), parse_time(AT), pod)  # type: ignore[arg-type]


def test_young_victims_are_named_by_their_rule(capsys: pytest.CaptureFixture[str]) -> None:
    path = QUEUES / "reclaim-min-runtime.yaml"
    assert main(["explain", "default/a-1", "-f", str(path), "--now", AT]) == 0
    out = capsys.readouterr().out
    assert "RECLAIM for queue team-a: every other queue's pods are kept (1 queue(s))\n" in out
    row = next(line for line in out.splitlines() if line.startswith("  team-b "))
    assert row.split()[:8] == ["team-b", "team-b", "1.33", "vs", "team-a", "1.00", "4", "0"]
    assert "too young: team-b's pods are younger than its" in row
    assert max(len(line) for line in out.splitlines()) <= 100


def test_each_queue_says_the_rule_that_kept_it() -> None:
    # a1 borrows within a, but taking a gang of it would leave a below its guaranteed 6;
    # b borrows at the root, but would fall below a's share.
    story = explained("reclaim-guaranteed-parent.yaml", "default/wait-1").reclaim  # type: ignore[attr-defined]
    kept = {s.side.leaf: (s.rule, s.why, s.pods, s.takeable) for s in story.standings}
    assert kept == {
        "a1": ("below guaranteed", "a would fall below its guaranteed nvidia.com/gpu", 4, 0),
        "b1": ("ping-pong", "b would fall below a's share", 2, 0),
    }
    assert [s.side.leaf for s in story.standings] == ["b1", "a1"]  # victim order


def test_json_lists_each_queue_against_the_pods_level() -> None:
    # After a-1 and a-2 reclaimed, team-a holds 8 nominated of its share 8: a-3 would take
    # it to 1.5, whatever the others have.
    story = explained("reclaim-three-teams.yaml", "default/a-3").reclaim  # type: ignore[attr-defined]
    data = story.to_json()
    assert data["queue"] == "team-a"
    assert [(q["queue"], q["rule"]) for q in data["queues"]] == [
        ("team-b", "preemptor over fair share"),
        ("team-c", "preemptor over fair share"),
    ]
    assert data["queues"][0]["againstRatio"] == 1.5


def test_no_section_outside_a_queue_or_without_the_queues_post_filter() -> None:
    assert explained("reclaim-guaranteed-parent.yaml", "default/wait-1").reclaim is not None  # type: ignore[attr-defined]
    off = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "plugins": {"postFilter": {"disabled": [{"name": "Queues"}]}},
                }
            ],
        }
    )
    assert explained("reclaim-guaranteed-parent.yaml", "default/wait-1", off).reclaim is None  # type: ignore[attr-defined]


def test_pods_the_rules_let_go_that_make_no_room_are_counted() -> None:
    # team-b borrows 12 GPUs of team-a's 12; team-a's pod asks for 12 GPUs, more than any
    # node has: the rules let three of team-b's pods go (rule 3 keeps its fourth), but no
    # node could host the pod.
    queues = [
        {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"resources": {GPU: {"nominal": nominal}}},
        }
        for name, nominal in (("team-a", 12), ("team-b", 4))
    ]
    nodes = [node(f"n{i}", cpu="32", nvidia_com__gpu="8") for i in range(2)]
    running = [
        pod(
            f"b-{i}",
            node_name=f"n{i // 2}",
            phase="Running",
            labels={QUEUE_LABEL: "team-b"},
            scheduled_at="2026-11-22T09:00:00Z",
            extra_requests={GPU: "4"},
        )
        for i in range(4)
    ]
    big = pod("big", labels={QUEUE_LABEL: "team-a"}, extra_requests={GPU: "12"})
    objects = objects_of(*queues, *nodes, *running, big)
    story = explain_pod(objects, default_config(), parse_time(AT), "default/big").reclaim
    assert story is not None
    [standing] = story.standings
    assert (standing.side.leaf, standing.pods, standing.takeable, standing.rule) == (
        "team-b",
        4,
        3,
        "",
    )
    assert story.summary == (
        "the rules let it take 3 pod(s) of other queues; they do not make room for it (see "
        "pending above)"
    )


def test_a_gang_members_table_is_its_groups_and_counts_the_protected_pods(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # team-b's pods come of age at 10:02, 10:04, ...: at 10:02 one may go, too few for the
    # gang's two members of 4 GPUs; the other three are too young.
    young = (QUEUES / "reclaim-min-runtime.yaml").read_text()
    text = young.split("\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a-1")[0]
    path = tmp_path / "gang.yaml"
    path.write_text(text + GANG)
    at = "2026-11-22T10:02:00Z"
    assert main(["explain", "default/train-0", "-f", str(path), "--now", at]) == 0
    out = capsys.readouterr().out
    assert "RECLAIM for queue team-a: the rules let it take 1 pod(s) of other queues;" in out
    row = next(line for line in out.splitlines() if line.startswith("  team-b "))
    assert row.split()[6:] == ["4", "1", "3", "too", "young"]
    assert main(["explain", "default/train-0", "-f", str(path), "--now", at, "-o", "json"]) == 0
    [queue] = json.loads(capsys.readouterr().out)["reclaim"]["queues"]
    assert (queue["takeable"], queue["tooYoung"], queue["inTolerationWindow"]) == (1, 3, 0)
