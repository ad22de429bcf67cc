"""How a gang asks for topology: upstream's schedulingConstraints and batchsched's annotations
read into the PodGroup record, and bad requests refused naming the object and the field."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import read_pod_group
from batchsched.objects.records import TopologyRequest
from batchsched.objects.schema import unknown_fields
from batchsched.objects.topology import (
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    label_key_problem,
)
from batchsched.objects.workload_api import read_upstream_pod_group
from tests.builders import pod_group, upstream_group

RACK = "example.com/rack"
BLOCK = "example.com/block"


def annotated(manifest: dict[str, Any], **annotations: str) -> dict[str, Any]:
    manifest["metadata"]["annotations"] = annotations
    return manifest


def constrained(version: str, *keys: Any) -> dict[str, Any]:
    return upstream_group(
        "train", 4, version, schedulingConstraints={"topology": [{"key": k} for k in keys]}
    )


@pytest.mark.parametrize("version", ["v1alpha2", "v1beta1"])
def test_upstream_topology_constraint_is_a_required_key(version: str) -> None:
    group = read_upstream_pod_group(constrained(version, RACK))
    assert group.topology == TopologyRequest(required=RACK)
    assert unknown_fields("PodGroup", constrained(version, RACK)) == []


def test_a_group_without_a_request_asks_for_nothing() -> None:
    assert not read_pod_group(pod_group("g", 2)).topology
    assert not read_upstream_pod_group(upstream_group("g", 2)).topology


def test_a_misspelled_constraint_field_is_an_unknown_field() -> None:
    manifest = upstream_group("g", 2, schedulingConstraints={"topology": [{"kye": RACK}]})
    assert unknown_fields("PodGroup", manifest) == ["spec.schedulingConstraints.topology[0].kye"]


def test_crd_annotations_required_and_preferred() -> None:
    required = read_pod_group(annotated(pod_group("g", 2), **{REQUIRED_ANNOTATION: RACK}))
    assert required.topology == TopologyRequest(required=RACK)
    preferred = annotated(pod_group("g", 2), **{PREFERRED_ANNOTATION: f"{RACK}, {BLOCK}"})
    assert read_pod_group(preferred).topology == TopologyRequest(preferred=(RACK, BLOCK))


def test_upstream_group_takes_the_preferred_annotation() -> None:
    manifest = annotated(upstream_group("g", 2), **{PREFERRED_ANNOTATION: RACK})
    assert read_upstream_pod_group(manifest).topology == TopologyRequest(preferred=(RACK,))


@pytest.mark.parametrize(
    ("manifest", "field", "says"),
    [
        (
            constrained("v1beta1", RACK, BLOCK),
            "spec.schedulingConstraints.topology",
            "has 2 entries: at most 1 is allowed",
        ),
        (constrained("v1alpha2", ""), "spec.schedulingConstraints.topology[0].key", "required"),
        (
            constrained("v1beta1", "bad key!"),
            "spec.schedulingConstraints.topology[0].key",
            "is not a label key",
        ),
        (
            annotated(pod_group("g", 2), **{REQUIRED_ANNOTATION: ""}),
            f"metadata.annotations.{REQUIRED_ANNOTATION}",
            "is not a label key",
        ),
        (
            annotated(pod_group("g", 2), **{PREFERRED_ANNOTATION: f"{RACK},,{BLOCK}"}),
            f"metadata.annotations.{PREFERRED_ANNOTATION}",
            "'' is not a label key",
        ),
        (
            annotated(pod_group("g", 2), **{PREFERRED_ANNOTATION: f"{RACK},{RACK}"}),
            f"metadata.annotations.{PREFERRED_ANNOTATION}",
            "names a key twice",
        ),
        (
            annotated(
                pod_group("g", 2), **{REQUIRED_ANNOTATION: BLOCK, PREFERRED_ANNOTATION: RACK}
            ),
            f"metadata.annotations.{PREFERRED_ANNOTATION}",
            "one of required and preferred",
        ),
        (
            annotated(constrained("v1beta1", RACK), **{REQUIRED_ANNOTATION: BLOCK}),
            f"metadata.annotations.{REQUIRED_ANNOTATION}",
            "set one of them",
        ),
    ],
)
def test_bad_requests_are_refused_naming_the_field(
    manifest: dict[str, Any], field: str, says: str
) -> None:
    reader = (
        read_upstream_pod_group
        if manifest["apiVersion"].startswith("scheduling.k8s.io/")
        else read_pod_group
    )
    with pytest.raises(ManifestError) as err:
        reader(manifest)
    assert err.value.field == field
    assert says in str(err.value)
    assert "PodGroup ml/" in str(err.value)


def test_the_same_key_in_constraint_and_annotation_is_accepted() -> None:
    manifest = annotated(constrained("v1beta1", RACK), **{REQUIRED_ANNOTATION: RACK})
    assert read_upstream_pod_group(manifest).topology.required == RACK


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("rack", True),
        ("topology.kubernetes.io/zone", True),
        ("a_b.c-d", True),
        ("/rack", False),
        ("Example.com/rack", False),
        ("rack-", False),
        ("x" * 64, False),
        ("a/b/c", False),
    ],
)
def test_label_keys(key: str, valid: bool) -> None:
    assert (label_key_problem(key) == "") is valid
