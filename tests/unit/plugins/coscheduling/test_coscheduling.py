"""Coscheduling rules, one by one, through the scheduler (pass by pass) or the one-shot run."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from batchsched.commands.cli import main
from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.decisions import Bind, Unschedulable, Warn
from batchsched.objects.podgroup import GROUP_ANNOTATION, GROUP_LABEL, group_key_of
from batchsched.objects.records import Pod
from batchsched.plugins.args import ConfigError
from batchsched.plugins.coscheduling import Coscheduling
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod
from tests.builders import pod_group as group
from tests.conftest import NOW, least_allocated, objects_of, schedule
from tests.paths import ROOT

EXAMPLES = ROOT / "examples" / "gang"


def member(name: str, grp: str, cpu: str = "4", **kw: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, memory=None, namespace="ml", labels={GROUP_LABEL: grp}, **kw)


def scheduler_for(*manifests: dict[str, Any], config: Any = None) -> Scheduler:
    state = build_state(objects_of(*manifests))
    return Scheduler(state, config or default_config())


# ---- membership ------------------------------------------------------------------------


def test_membership_by_annotation_or_label_in_the_pods_namespace() -> None:
    assert group_key_of(Pod("ns", "a", annotations={GROUP_ANNOTATION: "g"})) == "ns/g"
    assert group_key_of(Pod("ns", "b", labels={GROUP_LABEL: "g"})) == "ns/g"
    both = Pod("ns", "c", annotations={GROUP_ANNOTATION: "x"}, labels={GROUP_LABEL: "y"})
    assert group_key_of(both) == "ns/x"
    assert group_key_of(Pod("ns", "d")) is None


def test_state_indexes_members_and_follows_relabelling() -> None:
    sched = scheduler_for(group("g", 1), member("a", "g"), member("b", "g"))
    state = sched.state
    assert state.groups.members["ml/g"] == {"ml/a", "ml/b"}
    moved = state.pods.by_key["ml/b"]
    moved.labels = {GROUP_LABEL: "h"}
    state.upsert_pod(moved)
    assert state.groups.members == {"ml/g": {"ml/a"}, "ml/h": {"ml/b"}}
    state.remove_pod("ml/a")
    assert "ml/g" not in state.groups.members


# ---- queue order -----------------------------------------------------------------------


def test_members_sort_with_their_groups_time() -> None:
    sched = scheduler_for(
        {
            **group("old", 2),
            "metadata": {
                "name": "old",
                "namespace": "ml",
                "creationTimestamp": "2026-11-22T08:00:00Z",
            },
        },
    )
    plugin = sched.default_framework.queue_sort
    late_member = Pod("ml", "z", priority=0, labels={GROUP_LABEL: "old"})
    early_loner = Pod("ml", "a", priority=0)
    stamp = NOW.timestamp()
    assert plugin.sort_key(late_member, stamp) < plugin.sort_key(early_loner, stamp - 60)
    high = Pod("ml", "h", priority=10)
    assert plugin.sort_key(high, stamp) < plugin.sort_key(late_member, stamp)


# ---- all or nothing, pass by pass --------------------------------------------------------


def test_nothing_is_held_when_a_group_fails() -> None:
    """A failed group leaves the room it tried to use to the next pod, in the same pass."""
    sched = scheduler_for(
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        group("big", 3),
        member("big-0", "big", created="2026-11-22T08:00:00Z"),
        member("big-1", "big", created="2026-11-22T08:00:00Z"),
        member("big-2", "big", created="2026-11-22T08:00:00Z"),
        pod("small", cpu="4", memory=None, namespace="ml", created="2026-11-22T09:00:00Z"),
    )
    decisions = sched.schedule_pass(NOW)
    binds = [d for d in decisions if isinstance(d, Bind)]
    assert [b.pod for b in binds] == ["ml/small"]
    assert sched.state.nodes.free[sched.state.nodes.row_of["n2"], 0] == 4000
    assert sched.state.pods.bound == {"ml/small": sched.state.nodes.row_of["n1"]}


def test_group_binds_once_its_last_member_arrives() -> None:
    sched = scheduler_for(node("n1", cpu="8"), group("g", 2), member("a", "g"))
    assert not any(isinstance(d, Bind) for d in sched.schedule_pass(NOW))
    assert sched.messages["ml/a"] == "PodGroup ml/g: 1/2 members exist"
    sched.state.upsert_pod(objects_of(member("b", "g")).pods[0])
    later = NOW + timedelta(seconds=1)
    binds = {d.pod for d in sched.schedule_pass(later) if isinstance(d, Bind)}
    assert binds == {"ml/a", "ml/b"}


def test_group_waits_and_says_so_on_the_group_once() -> None:
    sched = scheduler_for(node("n1"), group("g", 3), member("a", "g"), member("b", "g"))
    first = [d for d in sched.schedule_pass(NOW) if isinstance(d, Warn)]
    assert first == [Warn("PodGroup ml/g", "2/3 members exist")]
    sched.queue.flush()
    again = [d for d in sched.schedule_pass(NOW) if isinstance(d, Warn)]
    assert again == []


def test_backoff_keeps_a_failed_group_out_until_it_is_over() -> None:
    config = parse_config(
        {
            "profiles": [
                {"pluginConfig": [{"name": "Coscheduling", "args": {"podGroupBackoffSeconds": 30}}]}
            ]
        }
    )
    sched = scheduler_for(
        node("n1", cpu="4"), group("g", 2), member("a", "g"), member("b", "g"), config=config
    )
    sched.schedule_pass(NOW)
    assert "1/2 members can run" in sched.messages["ml/a"]
    sched.state.upsert_node(objects_of(node("n2", cpu="4")).nodes[0])  # room appears
    soon = NOW + timedelta(seconds=10)
    assert not any(isinstance(d, Bind) for d in sched.schedule_pass(soon))
    assert sched.queue.entry("ml/a") is not None
    sched.queue.flush()  # even when forced, the plugin keeps the group out
    assert not any(isinstance(d, Bind) for d in sched.schedule_pass(soon))
    assert sched.messages["ml/a"] == "PodGroup ml/g: backing off for 30s after a failed attempt"
    later = NOW + timedelta(seconds=31)
    binds = {d.pod for d in sched.schedule_pass(later) if isinstance(d, Bind)}
    assert binds == {"ml/a", "ml/b"}


def test_a_failed_group_does_not_block_the_groups_behind_it() -> None:
    result = schedule(
        node("n1", cpu="4"),
        group("first", 2),
        member("f-0", "first", created="2026-11-22T08:00:00Z"),
        member("f-1", "first", created="2026-11-22T08:00:00Z"),
        group("second", 1),
        member("s-0", "second", created="2026-11-22T09:00:00Z"),
    )
    assert {b.pod: b.node for b in result.bindings} == {"ml/s-0": "n1"}


# ---- group events (the status: tests/unit/controllers/test_podgroups.py) -------------


def test_unschedulable_event_when_running_members_cannot_reach_min_member() -> None:
    sched = scheduler_for(
        node("n1", cpu="8"),
        group("g", 3),
        member("a", "g", node_name="n1", phase="Running"),
        member("b", "g", node_name="n1", phase="Running"),
        member("c", "g", node_name="n1", phase="Running"),
    )
    assert not [d for d in sched.schedule_pass(NOW) if isinstance(d, Warn)]
    sched.state.remove_pod("ml/c")
    warns = [d for d in sched.schedule_pass(NOW) if isinstance(d, Warn)]
    assert warns == [
        Warn(
            "PodGroup ml/g",
            "Unschedulable: 2 running, 0 succeeded and 0 pending members, fewer than minMember 3",
        )
    ]


# ---- configuration and the CLI ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"podGroupBackoffSeconds": -1}, "podGroupBackoffSeconds: must be at least 0"),
        (
            {"podGroupBackoffSeconds": "10s"},
            "podGroupBackoffSeconds: must be an integer of at least 0, got '10s'",
        ),
        ({"permitWaitingTimeSeconds": 10}, "unknown argument \\(known: podGroupBackoffSeconds\\)"),
    ],
)
def test_bad_args_say_what_is_allowed(args: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Coscheduling(args)


def test_prioritysort_instead_needs_coscheduling_disabled() -> None:
    with pytest.raises(ConfigError, match="exactly one plugin"):
        parse_config(
            {"profiles": [{"plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}}}]}
        )
    config = parse_config(
        {
            "profiles": [
                {
                    "plugins": {
                        "queueSort": {
                            "enabled": [{"name": "PrioritySort"}],
                            "disabled": [{"name": "Coscheduling"}],
                        }
                    }
                }
            ]
        }
    )
    assert config.profiles[0].plugins["queueSort"] == [("PrioritySort", 0)]


def test_deadlock_example_runs_one_gang_whole(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "schedule",
                str(EXAMPLES / "deadlock.yaml"),
                "--now",
                "2026-11-22T10:00:00Z",
                "-o",
                "json",
            ]
        )
        == 0
    )
    out = orjson.loads(capsys.readouterr().out)
    bound = sorted(b["pod"] for b in out["bindings"])
    assert bound == [f"ml/job-a-worker-{i}" for i in range(4)]
    groups = {g["name"]: (g["phase"], g["running"]) for g in out["podGroups"]}
    assert groups == {"ml/job-a": ("Running", 4), "ml/job-b": ("Scheduling", 0)}


def test_training_example_starts_whole_and_second_job_waits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [
        "schedule",
        str(EXAMPLES / "training.yaml"),
        "--now",
        "2026-11-22T10:00:00Z",
        "-o",
        "json",
    ]
    assert main([*args, "--config", str(EXAMPLES / "binpack-config.yaml")]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert {b["pod"]: b["node"] for b in out["bindings"]} == {
        "ml/resnet-master-0": "gpu-a",
        "ml/resnet-worker-0": "gpu-a",
        "ml/resnet-worker-1": "gpu-b",
        "ml/resnet-worker-2": "gpu-b",
    }
    waiting = {u["pod"]: u["message"] for u in out["unschedulable"]}
    assert set(waiting) == {"ml/bert-worker-0", "ml/bert-worker-1"}
    assert waiting["ml/bert-worker-0"].startswith("PodGroup ml/bert: 1/2 members can run")
    resnet = next(g for g in out["podGroups"] if g["name"] == "ml/resnet")
    assert (resnet["phase"], resnet["running"], resnet["occupiedBy"]) == (
        "Running",
        4,
        "ml/resnet",
    )


def test_crd_matches_what_the_reader_accepts() -> None:
    import yaml

    crd = yaml.safe_load(
        (
            EXAMPLES.parents[1] / "deploy" / "components" / "podgroup-crd" / "crd-podgroup.yaml"
        ).read_text()
    )
    assert crd["spec"]["group"] == "scheduling.x-k8s.io"
    assert crd["spec"]["names"]["shortNames"] == ["pg"]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = [c["jsonPath"] for c in version["additionalPrinterColumns"]]
    assert columns == [
        ".status.phase",
        ".spec.minMember",
        ".status.running",
        ".metadata.creationTimestamp",
    ]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["minMember"]["minimum"] == 1
    phases = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["phase"]
    assert phases["enum"] == ["Pending", "Scheduling", "Running", "Finished", "Failed"]
    with pytest.raises(Exception, match="spec.minMember: must be at least 1"):
        objects_of(group("bad", 0))


def test_a_member_of_another_scheduler_counts_but_is_not_placed() -> None:
    result = schedule(
        node("n1", cpu="8"),
        group("g", 3),
        member("a", "g"),
        member("b", "g"),
        member("c", "g", scheduler="default-scheduler"),
    )
    assert result.bindings == []
    assert result.unschedulable["ml/a"] == (
        "PodGroup ml/g: 2/3 members can run (0 bound or succeeded, 2 fit); "
        "only 2 pending member(s) are this scheduler's to place"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{minMember: 0}", "PodGroup ml/bad: spec.minMember: must be at least 1, got 0"),
        ("{minMember: 2, minResources: {cpu: lots}}", "spec.minResources.cpu: 'lots' is not"),
        ("{}", "PodGroup ml/bad: spec.minMember: is required"),
    ],
)
def test_bad_podgroup_is_a_clear_cli_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    manifest = tmp_path / "pg.yaml"
    manifest.write_text(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
        f"metadata: {{name: bad, namespace: ml}}\nspec: {spec}\n"
    )
    assert main(["schedule", str(manifest)]) == 2
    assert message in capsys.readouterr().err


def test_members_of_a_group_that_cannot_be_read_are_told_why_until_it_is_gone() -> None:
    """Live mode leaves out a PodGroup it cannot read (docs/input-limits.md#live-mode): its
    members wait naming the field, not for a PodGroup to be created; a good version or its
    deletion ends that."""
    sched = scheduler_for(node("n1", cpu="8"), member("a", "g"), member("b", "g"))
    state = sched.state

    passes = iter(NOW + timedelta(minutes=n) for n in range(10))  # each past its backoff

    def told() -> dict[str, str]:
        decisions = sched.schedule_pass(next(passes))
        return {d.pod: d.message for d in decisions if isinstance(d, Unschedulable)}

    assert told()["ml/a"] == "PodGroup ml/g: does not exist: waiting for it to be created"
    state.pod_group_unreadable("ml/g", "spec.minMember: must be at least 1, got -1")
    assert told()["ml/a"] == (
        "PodGroup ml/g: cannot be read: spec.minMember: must be at least 1, got -1; "
        "waiting for it to be fixed"
    )
    state.remove_pod_group("ml/g")
    assert told()["ml/b"] == "PodGroup ml/g: does not exist: waiting for it to be created"
    state.pod_group_unreadable("ml/g", "spec.minMember: must be at least 1, got -1")
    state.upsert_pod_group(build_state(objects_of(group("g", 2))).groups.by_key["ml/g"])
    binds = sched.schedule_pass(next(passes))
    assert {d.pod for d in binds if isinstance(d, Bind)} == {"ml/a", "ml/b"}


def test_prefilter_alone_admits_pod_by_pod_when_the_group_hook_is_off() -> None:
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
    manifests = [node("n1", cpu="4"), member("a", "g"), member("b", "g")]
    waiting = schedule(*manifests, config=config)
    assert waiting.unschedulable["ml/a"] == (
        "PodGroup ml/g: does not exist: waiting for it to be created"
    )
    # Admitted, but without the hook nothing keeps the group whole: one member binds alone.
    alone = schedule(*manifests, group("g", 2), config=config)
    assert [b.pod for b in alone.bindings] == ["ml/a"]


# ---- tentative placement and the non-zero defaults -------------------------------------


def test_request_less_members_are_placed_as_the_same_pods_one_by_one() -> None:
    # Scoring counts 100m / 200Mi for a pod that requests nothing; upstream assumes each member
    # in its cache, so the next member's LeastAllocated score sees it. Placed tentatively,
    # the members must see each other's defaults too, and spread as lone pods would.
    # LeastAllocated (upstream's default) makes it show: packing would put all on n0 anyway.
    nodes = [node(f"n{i}") for i in range(3)]
    lone = [pod(f"m{i}", cpu=None, memory=None, namespace="ml") for i in range(3)]
    gang = [{**p, "metadata": {**p["metadata"], "labels": {GROUP_LABEL: "g"}}} for p in lone]
    expected = {"ml/m0": "n0", "ml/m1": "n1", "ml/m2": "n2"}
    spread = least_allocated()
    assert {b.pod: b.node for b in schedule(*nodes, *lone, config=spread).bindings} == expected
    placed = schedule(*nodes, group("g", 3), *gang, config=spread)
    assert {b.pod: b.node for b in placed.bindings} == expected


def test_a_tentative_placement_leaves_the_non_zero_defaults_as_they_were() -> None:
    # A gang that cannot reach minMember places some members tentatively and undoes it.
    state = build_state(
        objects_of(
            node("n0", cpu="1"),
            group("g", 3),
            *[member(f"m{i}", "g", cpu="500m") for i in range(3)],
            pod("idle", cpu=None, memory=None, node_name="n0"),
        )
    )
    before = state.nodes.nonzero_gap.copy()
    Scheduler(state, default_config()).schedule_pass(NOW)
    assert state.pods.bound.keys() == {"default/idle"}
    assert (state.nodes.nonzero_gap == before).all()
