"""Admission (scheduling/admission.py): the refusal guard, gates and deleting pods, one rule
per test."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.objects.parse import read_pod
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.records import DeviceClass
from batchsched.objects.support import REFUSED, refused_field
from batchsched.scheduling.admission import (
    Admission,
    allocates_claims,
    not_ready,
    pod_refusal,
)
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod
from tests.conftest import NOW, objects_of, schedule
from tests.paths import ROOT

DOCS = ROOT / "docs" / "support.md"
README = ROOT / "README.md"

# One pod spec fragment per row of REFUSED, and the path the message must name.
USES: dict[str, tuple[dict[str, Any], str]] = {
    "spec.workloadRef": (
        {"workloadRef": {"name": "w", "podGroup": "g"}},
        "spec.workloadRef",
    ),
}


def test_every_row_has_a_case_here() -> None:
    assert {row.field for row in REFUSED} == set(USES)


@pytest.mark.parametrize("field", sorted(USES))
def test_each_refused_field_is_found_and_named(field: str) -> None:
    fragment, path = USES[field]
    manifest = pod("p")
    manifest["spec"].update(fragment)
    record = read_pod(manifest)
    assert record.refused == path
    assert pod_refusal(record, {}) == f"pod uses {path}, which batchsched does not support yet"


def test_a_plain_pod_uses_nothing_refused() -> None:
    manifest = pod("p", affinity={"nodeAffinity": {}})
    manifest["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "x"}}]
    manifest["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    manifest["spec"]["topologySpreadConstraints"] = []
    manifest["spec"]["resourceClaims"] = []
    assert read_pod(manifest).refused == ""


def test_malformed_fields_do_not_crash_the_guard() -> None:
    assert refused_field({"volumes": "x", "containers": [3, {"ports": "y"}], "affinity": 1}) == ""


def test_device_class_mapping_refuses_the_resource_where_claims_cannot_be_allocated() -> None:
    record = read_pod(pod("p", extra_requests={"example.com/gpu": "1"}))
    assert pod_refusal(record, {}) is None
    mapped = {"example.com/gpu": "gpu.example.com"}
    message = pod_refusal(record, mapped)  # a profile without DynamicResources
    assert message is not None and "extended resource example.com/gpu" in message
    assert "DeviceClass gpu.example.com" in message
    assert pod_refusal(record, mapped, claims_allowed=True) is None
    implicit = read_pod(
        pod("q", extra_requests={"deviceclass.resource.kubernetes.io/gpu.example.com": "1"})
    )
    assert implicit.refused == ""


def test_claims_are_refused_where_they_cannot_be_allocated() -> None:
    manifest = pod("p")
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    record = read_pod(manifest)
    assert record.refused == ""
    assert pod_refusal(record, {}, claims_allowed=True) is None
    message = pod_refusal(record, {})  # a profile without DynamicResources
    assert message is not None and "spec.resourceClaims" in message
    manifest["metadata"]["labels"] = {GROUP_LABEL: "g"}
    assert pod_refusal(read_pod(manifest), {}, claims_allowed=True) is None  # gangs allocate too


def test_device_classes_in_the_state_map_their_resources() -> None:
    state = build_state(objects_of())
    state.upsert_device_class(DeviceClass("b", "example.com/gpu"))
    state.upsert_device_class(DeviceClass("a", "example.com/gpu"))
    state.upsert_device_class(DeviceClass("c"))
    implicit = "deviceclass.resource.kubernetes.io/"
    assert state.device_class_resources == {
        "example.com/gpu": "a",
        **{f"{implicit}{name}": name for name in ("a", "b", "c")},
    }
    state.remove_device_class("a")
    assert state.device_class_resources["example.com/gpu"] == "b"
    assert f"{implicit}a" not in state.device_class_resources


def test_a_refused_pod_never_preempts() -> None:
    result = schedule(
        node("n1", cpu="2"),
        pod("low", cpu="2", node_name="n1", priority=0),
        pod("high", cpu="2", priority=1000, workloadRef={"name": "w", "podGroup": "g"}),
    )
    assert result.evictions == [] and result.bindings == []
    assert "spec.workloadRef" in result.unschedulable["default/high"]


def test_a_pod_whose_claims_cannot_be_allocated_never_preempts() -> None:
    claims = [{"name": "gpu", "resourceClaimName": "gpu"}]
    result = schedule(
        node("n1", cpu="2"),
        pod("low", cpu="2", node_name="n1", priority=0),
        pod("high", cpu="2", priority=1000, resourceClaims=claims),
    )
    assert result.evictions == [] and result.bindings == []
    assert "resourceclaim default/gpu does not exist" in result.unschedulable["default/high"]


def test_not_ready_names_gates_and_deletion() -> None:
    gated = read_pod(pod("p", schedulingGates=[{"name": "a"}, {"name": "b"}]))
    assert not_ready(gated) == "waiting for its scheduling gates: a, b"
    leaving = pod("q")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-22T09:00:00Z"
    assert "being deleted" in (not_ready(read_pod(leaving)) or "")
    assert not_ready(read_pod(pod("r"))) is None


def test_a_gated_pod_is_queued_once_its_gates_are_removed() -> None:
    state = build_state(objects_of(node("n1")))
    scheduler = Scheduler(state, default_config())
    state.upsert_pod(read_pod(pod("p", schedulingGates=[{"name": "quota"}])))
    assert scheduler.schedule_pass(NOW) == []
    assert scheduler.messages["default/p"] == "waiting for its scheduling gates: quota"
    state.upsert_pod(read_pod(pod("p")))
    assert [type(d).__name__ for d in scheduler.schedule_pass(NOW)] == ["Bind"]


def test_docs_list_every_refused_row() -> None:
    text = DOCS.read_text()
    for row in REFUSED:
        assert f"`{row.field}`" in text, row.field
    assert "docs/support.md" in README.read_text()


def test_a_refused_pod_gives_up_a_nomination_it_carries() -> None:
    manifest = pod("p", cpu="1", resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu"}])
    manifest["status"]["nominatedNodeName"] = "n1"
    state = build_state(objects_of(node("n1"), manifest))
    assert "default/p" in state.nominations
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    assert [type(d).__name__ for d in decisions] == ["Nominate", "Unschedulable"]
    assert "default/p" not in state.nominations


def test_admission_judges_claims_by_the_pod_s_own_profile() -> None:
    config = default_config()
    plain = replace(
        config.profiles[0],
        scheduler_name="plain",
        plugins={
            point: [(n, w) for n, w in entries if n != "DynamicResources"]
            for point, entries in config.profiles[0].plugins.items()
        },
    )
    assert allocates_claims(config.profiles[0]) and not allocates_claims(plain)
    manifest = pod("p", resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu"}])
    ours, theirs = read_pod(manifest), read_pod({**manifest, "spec": {**manifest["spec"]}})
    theirs.scheduler_name = "plain"
    state = build_state(objects_of())
    profiles = {p.scheduler_name: p for p in (config.profiles[0], plain)}
    admission = Admission(state, lambda p: profiles.get(p.scheduler_name, config.profiles[0]))
    assert admission.refusal(ours) is None
    message = admission.refusal(theirs)
    assert message is not None and "the profile lacks it at Filter or Reserve" in message


def test_every_refusal_is_worded_alike() -> None:
    refused = read_pod(pod("p", workloadRef={"name": "w", "podGroup": "g"}))
    claims = read_pod(pod("q", resourceClaims=[{"name": "gpu", "resourceClaimName": "g"}]))
    mapped = read_pod(pod("r", extra_requests={"example.com/gpu": "1"}))
    messages = [
        pod_refusal(refused, {}),
        pod_refusal(claims, {}),
        pod_refusal(mapped, {"example.com/gpu": "gpu.example.com"}),
    ]
    for message in messages:
        assert message is not None and message.startswith("pod uses ")
        assert message.endswith(", which batchsched does not support yet")
