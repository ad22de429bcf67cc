"""Upstream's Workload API (scheduling.k8s.io v1alpha2 and v1beta1): reading, validation,
membership, and the rules that differ from the CRD (conditions, disruption mode)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from batchsched.commands.cli import main
from batchsched.decisions import PodGroupUpdate
from batchsched.live.actuator import describe
from batchsched.live.kinds import KINDS
from batchsched.objects.errors import ManifestError
from batchsched.objects.records import PodGroupStatus
from batchsched.objects.workload_api import read_upstream_pod_group, read_workload
from batchsched.plugins.coscheduling.conditions import set_condition
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, pod_group, priority_class, upstream_group
from tests.conftest import NOW, objects_of, schedule
from tests.paths import ROOT

SCENARIOS = ROOT / "tests" / "scenarios" / "workload"


def member(name: str, group: str, **kw: Any) -> dict[str, Any]:
    return pod(name, namespace="ml", schedulingGroup={"podGroupName": group}, **kw)


@pytest.mark.parametrize(
    ("version", "mode", "whole"),
    [
        ("v1alpha2", None, False),
        ("v1alpha2", "Pod", False),
        ("v1alpha2", "PodGroup", True),
        ("v1beta1", None, False),
        ("v1beta1", {"single": {}}, False),
        ("v1beta1", {"all": {}}, True),
    ],
)
def test_disruption_mode_in_both_spellings(version: str, mode: Any, whole: bool) -> None:
    extra = {} if mode is None else {"disruptionMode": mode}
    group = read_upstream_pod_group(upstream_group("g", 3, version, **extra))
    assert (group.disrupt_whole, group.gang, group.min_member) == (whole, True, 3)
    assert group.upstream and group.api_version == f"scheduling.k8s.io/{version}"


@pytest.mark.parametrize(
    ("version", "mode", "message"),
    [
        ("v1alpha2", {"all": {}}, "disruptionMode: {'all': {}} is not one of Pod, PodGroup"),
        ("v1beta1", "PodGroup", "disruptionMode: must be exactly one of {single: {}} and"),
        ("v1beta1", {"all": {}, "single": {}}, "must be exactly one of"),
        # A member is an object: anything else is refused as the API server's decoder does.
        ("v1beta1", {"all": "yes"}, "spec.disruptionMode.all: must be a mapping, got 'yes'"),
        ("v1beta1", {"single": True}, "spec.disruptionMode.single: must be a mapping, got True"),
    ],
)
def test_a_disruption_mode_of_the_other_version_is_refused(
    version: str, mode: Any, message: str
) -> None:
    with pytest.raises(ManifestError, match="PodGroup ml/g: spec.") as err:
        read_upstream_pod_group(upstream_group("g", 2, version, disruptionMode=mode))
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({}, "spec.schedulingPolicy: must set exactly one of basic"),
        ({"basic": {}, "gang": {"minCount": 2}}, "must set exactly one of basic"),
        ({"gang": {}}, "spec.schedulingPolicy.gang.minCount: is required"),
        ({"gang": {"minCount": 0}}, "minCount: must be at least 1, got 0"),
        ({"basic": "x"}, "spec.schedulingPolicy.basic: must be a mapping, got 'x'"),
        ({"basic": None, "gang": {"minCount": 2}}, None),  # null: not set, as the API reads it
    ],
)
def test_the_scheduling_policy_is_exactly_one_of_basic_and_gang(
    policy: dict[str, Any], message: str | None
) -> None:
    manifest = upstream_group("g", 2)
    manifest["spec"]["schedulingPolicy"] = policy
    if message is None:
        assert read_upstream_pod_group(manifest).min_member == 2
        return
    with pytest.raises(ManifestError, match="PodGroup ml/g") as err:
        read_upstream_pod_group(manifest)
    assert message in str(err.value)


def test_both_template_references_and_the_group_priority_are_read() -> None:
    alpha = upstream_group(
        "g",
        None,
        "v1alpha2",
        podGroupTemplateRef={"workload": {"workloadName": "job", "podGroupTemplateName": "w"}},
        priority=500,
    )
    beta = upstream_group(
        "g", None, workloadRef={"workloadName": "job", "templateName": "w"}, priorityClassName="hi"
    )
    a, b = read_upstream_pod_group(alpha), read_upstream_pod_group(beta)
    assert (a.workload, a.gang, a.min_member, a.priority) == ("job/w", False, 1, 500)
    assert (b.workload, b.priority, b.priority_class_name) == ("job/w", None, "hi")


def test_an_unknown_version_of_scheduling_k8s_io_is_refused() -> None:
    with pytest.raises(
        ManifestError,
        match="apiVersion: 'scheduling.k8s.io/v1' is not a version batchsched reads; PodGroup is "
        "read as .*scheduling.k8s.io/v1alpha2, scheduling.k8s.io/v1beta1",
    ):
        objects_of(upstream_group("g", 2, "v1"))


def test_workloads_are_read_and_other_apis_workloads_ignored() -> None:
    templates = [
        {"name": "driver", "schedulingPolicy": {"basic": {}}},
        {
            "name": "workers",
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "disruptionMode": "PodGroup",
        },
    ]
    upstream = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": "ml"},
        "spec": {"controllerRef": {"kind": "Job", "name": "job"}, "podGroupTemplates": templates},
    }
    kueue = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "x"}}
    [workload] = objects_of(upstream, kueue).workloads
    assert workload.controller == "Job/job"
    assert [(t.name, t.gang, t.min_member, t.disrupt_whole) for t in workload.templates] == [
        ("driver", False, 1, False),
        ("workers", True, 4, True),
    ]
    templates.append({"name": "driver", "schedulingPolicy": {"basic": {}}})
    with pytest.raises(ManifestError, match=r"spec.podGroupTemplates\[2\].name: 'driver' is used"):
        read_workload(upstream)


def test_a_pod_naming_groups_two_ways_is_an_error_naming_both() -> None:
    bad = member("p", "a", labels={"scheduling.x-k8s.io/pod-group": "b"})
    with pytest.raises(ManifestError) as err:
        objects_of(bad)
    text = str(err.value)
    assert "Pod ml/p: spec.schedulingGroup.podGroupName" in text
    assert (
        "'a' (scheduling.k8s.io)" in text
        and "label scheduling.x-k8s.io/pod-group names 'b'" in text
    )


def test_a_pod_naming_the_wrong_kind_of_group_waits() -> None:
    labelled = pod("p", namespace="ml", labels={"scheduling.x-k8s.io/pod-group": "g"})
    result = schedule(node("n1"), upstream_group("g", 1), labelled)
    assert result.bindings == []
    assert (
        "names a scheduling.x-k8s.io PodGroup, but ml/g is a scheduling.k8s.io/v1beta1"
        in (result.unschedulable["ml/p"])
    )
    crd = schedule(node("n1"), pod_group("g", 1), member("q", "g"))
    assert crd.bindings == [] and "names a scheduling.k8s.io PodGroup" in crd.unschedulable["ml/q"]


def test_a_stray_of_the_other_kind_neither_joins_nor_blocks_the_group() -> None:
    # Whichever of them sorts first, the member of the named kind binds alone (minCount 1)
    # and the pod naming the CRD kind waits with its own reason.
    for stray_name, member_name in (("a", "b"), ("b", "a")):
        stray = pod(stray_name, namespace="ml", labels={"scheduling.x-k8s.io/pod-group": "g"})
        result = schedule(node("n1"), upstream_group("g", 1), member(member_name, "g"), stray)
        assert [(b.pod, b.node) for b in result.bindings] == [(f"ml/{member_name}", "n1")]
        assert "names a scheduling.x-k8s.io PodGroup" in result.unschedulable[f"ml/{stray_name}"]


def test_strays_do_not_make_up_a_gang_short_of_its_min_count() -> None:
    # One member of a minCount-2 gang and two pods naming the CRD kind: nothing binds (the
    # strays once counted as members, and the gang bound below its minimum).
    strays = [
        pod(f"s{i}", namespace="ml", labels={"scheduling.x-k8s.io/pod-group": "g"})
        for i in range(2)
    ]
    result = schedule(node("n1"), upstream_group("g", 2), member("m", "g"), *strays)
    assert result.bindings == []
    assert result.unschedulable["ml/m"] == "PodGroup ml/g: 1/2 members exist"


def test_a_scheduled_condition_never_goes_back_to_false() -> None:
    done = {
        "conditions": [
            {
                "type": "PodGroupInitiallyScheduled",
                "status": "True",
                "reason": "Scheduled",
                "lastTransitionTime": "2026-11-22T09:00:00Z",
            }
        ]
    }
    group = upstream_group("g", 2) | {"status": done}
    members = [member(f"m{i}", "g", cpu="8") for i in range(2)]  # cannot fit on n1
    result = schedule(node("n1"), group, *members)
    assert result.bindings == []
    [out] = result.to_json()["podGroups"]
    assert [(c["type"], c["status"]) for c in out["conditions"]] == [
        ("PodGroupInitiallyScheduled", "True")
    ]


def test_a_condition_keeps_its_transition_time_while_its_status_stays() -> None:
    status = set_condition(PodGroupStatus(), "T", False, "Unschedulable", "a", NOW)
    later = set_condition(status, "T", False, "Unschedulable", "b", NOW + timedelta(hours=1))
    flipped = set_condition(later, "T", True, "Scheduled", "", NOW + timedelta(hours=2))
    assert later.conditions[0].last_transition_time == NOW
    assert later.conditions[0].message == "b"
    assert flipped.conditions[0].last_transition_time == NOW + timedelta(hours=2)
    assert set_condition(flipped, "T", True, "Scheduled", "", NOW) is flipped


def test_deleting_one_api_s_group_leaves_the_other_s_of_that_name() -> None:
    state = ClusterState()
    state.upsert_pod_group(read_upstream_pod_group(upstream_group("g", 2)))
    crd, upstream = (k for k in KINDS if k.manifest_kind == "PodGroup")
    crd.remove(state, "ml/g")  # a CRD PodGroup ml/g was deleted
    assert "ml/g" in state.groups.by_key
    upstream.remove(state, "ml/g")
    assert "ml/g" not in state.groups.by_key


@pytest.mark.parametrize(
    ("version", "mode", "victims"),
    [
        ("v1alpha2", "PodGroup", []),
        ("v1beta1", {"all": {}}, []),
        ("v1alpha2", "Pod", ["ml/m-0"]),
        ("v1beta1", {"single": {}}, ["ml/m-0"]),
    ],
)
def test_toleration_protects_a_whole_group_but_not_a_pod_by_pod_one(
    version: str, mode: Any, victims: list[str]
) -> None:
    tolerate = {
        "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "10000",
        "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "-1",
    }
    result = schedule(
        priority_class("low", 10),
        priority_class("low-protected", 10, annotations=tolerate),
        priority_class("high", 1000),
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        upstream_group("g", 2, version, disruptionMode=mode),
        member("m-0", "g", cpu="3", node_name="n1", priority_class="low"),
        member("m-1", "g", cpu="3", node_name="n2", priority_class="low-protected"),
        pod("p", cpu="3", namespace="ml", priority_class="high"),
    )
    assert sorted(e.pod for e in result.evictions) == victims
    if victims:
        assert [(b.pod, b.node) for b in result.bindings] == [("ml/p", "n1")]
    else:
        assert result.bindings == []
        assert (
            "preemption: 0/2 nodes are available: 2 No preemption victims found."
            in (result.unschedulable["ml/p"])
        )


def test_schedule_reports_upstream_groups_with_their_kind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario = SCENARIOS / "v1beta1" / "does-not-fit.yaml"
    assert main(["schedule", str(scenario), "-o", "json"]) == 0
    [group] = orjson.loads(capsys.readouterr().out)["podGroups"]
    assert (group["name"], group["apiVersion"], group["kind"]) == (
        "ml/train",
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
    )
    [cond] = group["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupInitiallyScheduled",
        "False",
        "Unschedulable",
    )
    assert cond["message"].startswith("2/3 members can run")
    assert main(["schedule", str(scenario), "-o", "text"]) == 0
    assert "PodGroupInitiallyScheduled=False (Unschedulable)" in capsys.readouterr().out


def test_an_upstream_gang_split_between_schedulers_waits() -> None:
    members = [member("a", "g"), member("b", "g", scheduler="default-scheduler")]
    result = schedule(node("n1", cpu="8"), upstream_group("g", 2), *members)
    assert result.bindings == []
    assert result.unschedulable["ml/a"] == (
        "PodGroup ml/g: members name different schedulers (batchsched, default-scheduler): "
        "every member must name the same one"
    )


def test_a_dry_run_describes_an_upstream_group_by_its_conditions() -> None:
    status = set_condition(PodGroupStatus(), "PodGroupScheduled", False, "Unschedulable", "x", NOW)
    assert describe(PodGroupUpdate("ml/g", status)) == (
        "would set PodGroup ml/g conditions: PodGroupScheduled=False (Unschedulable)"
    )


def test_the_workload_api_example_preempts_one_trial_per_node_then_binds_the_gang(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = ROOT / "examples" / "gang" / "workload-api.yaml"
    assert main(["schedule", str(example), "--now", "2026-11-22T10:00:00Z", "-o", "json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    # The sweep is disrupted trial by trial: the youngest trial on each node goes, no more.
    assert sorted(e["pod"] for e in out["evictions"]) == [f"ml/sweep-{i}" for i in range(4, 8)]
    assert {b["pod"]: b["node"] for b in out["bindings"]} == {
        f"ml/resnet-worker-{i}": f"gpu-{i + 1}" for i in range(4)
    }
    groups = {g["name"]: g for g in out["podGroups"]}
    assert [c["status"] for c in groups["ml/resnet-workers"]["conditions"]] == ["True"]
    assert "DisruptionTarget" not in {c["type"] for c in groups["ml/sweep"]["conditions"]}


def test_unknown_fields_of_upstream_objects_are_reported_by_their_own_schema() -> None:
    group = upstream_group("g", 2, priorityClassName="x")
    group["spec"]["schedulingPolicy"]["gang"]["minCuont"] = 2
    group["spec"]["workloadRef"] = {"workloadName": "w", "templateName": "t"}
    crd = pod_group("c", 1)
    assert objects_of(group, crd).warnings == [
        "test: PodGroup ml/g: unknown field 'spec.schedulingPolicy.gang.minCuont'"
    ]


def test_an_upstream_group_naming_a_missing_priority_class_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "g.json"
    manifest.write_bytes(orjson.dumps(upstream_group("g", 2, priorityClassName="nope")))
    assert main(["schedule", str(manifest)]) == 2
    assert "PodGroup ml/g: spec.priorityClassName: no PriorityClass 'nope'" in (
        capsys.readouterr().err
    )
