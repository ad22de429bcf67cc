"""DRA readers, CEL selectors and the allocator, rule by rule (scenarios: tests/scenarios/dra)."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.live.snapshot import merge_objects
from batchsched.objects.cel_values import quantity_value
from batchsched.objects.dra import (
    milli_quantity,
    read_resource_claim,
    read_resource_claim_template,
    read_resource_slice,
)
from batchsched.objects.errors import ManifestError
from batchsched.objects.load import Objects
from batchsched.objects.parse import read_pod
from batchsched.objects.records import DeviceClass
from batchsched.plugins.dynamicresources.allocator import ClaimError, Matcher, allocate
from batchsched.plugins.dynamicresources.selectors import CelError, compile_selector
from batchsched.state.devices import DeviceState
from tests.builders import pod


def slice_(name: str, node: str, *devices: dict[str, Any], **pool: Any) -> dict[str, Any]:
    return {
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": pool.get("pool", node), "generation": pool.get("generation", 1)}
            | {"resourceSliceCount": pool.get("count", 1)},
            "devices": list(devices),
        },
    }


def claim(name: str, *requests: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": list(requests), **spec}},
    }


def exactly(name: str, count: int = 1, *selectors: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {
            "deviceClassName": "gpu",
            "count": count,
            "selectors": [{"cel": {"expression": s}} for s in selectors],
            **more,
        },
    }


CLASSES = {"gpu": DeviceClass("gpu", selectors=("device.driver == 'gpu.example.com'",))}


def test_device_attributes_and_capacity_are_read_by_domain() -> None:
    record = read_resource_slice(
        slice_(
            "s",
            "n1",
            {
                "name": "g0",
                "attributes": {
                    "model": {"string": "H100"},
                    "other.example.com/index": {"int": 3},
                },
                "capacity": {"memory": {"value": "80Gi"}},
            },
        )
    )
    view = record.devices[0].view
    assert view["attributes"] == {
        "gpu.example.com": {"model": "H100"},
        "other.example.com": {"index": 3},
    }
    assert view["capacity"] == {"gpu.example.com": {"memory": quantity_value(80 * 2**30 * 1000)}}


@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        (
            slice_("s", "", {"name": "g"}, pool="p"),
            "spec: needs exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection",
        ),
        (
            slice_("s", "n", {"name": "g", "attributes": {"v": {"version": "v1.0"}}}),
            "spec.devices[0].attributes.v.version: 'v1.0' is not a semantic version",
        ),
        (
            claim(
                "c",
                exactly("r"),
                constraints=[{"distinctAttribute": "d/a", "matchAttribute": "d/b"}],
            ),
            "spec.devices.constraints[0]: needs exactly one of matchAttribute, distinctAttribute",
        ),
        (slice_("s", "n", {"name": "g", "attributes": {"a": {}}}), "spec.devices[0].attributes.a"),
        (claim("c", {"name": "r"}), "spec.devices.requests[0]"),
        (claim("c", exactly("r", 0)), "spec.devices.requests[0].exactly.count"),
        (
            claim("c", exactly("r", allocationMode="Some")),
            "spec.devices.requests[0].exactly.allocationMode: 'Some' is not one of ExactCount, All",
        ),
        (
            claim("c", exactly("r"), constraints=[{"matchAttribute": "plain"}]),
            "spec.devices.constraints[0].matchAttribute",
        ),
        (
            claim("c", exactly("r"), constraints=[{"requests": ["x"], "matchAttribute": "d/a"}]),
            "spec.devices.constraints[0].requests",
        ),
    ],
)
def test_bad_dra_objects_name_the_field(manifest: dict[str, Any], field: str) -> None:
    reader = read_resource_slice if manifest["kind"] == "ResourceSlice" else read_resource_claim
    with pytest.raises(ManifestError) as err:
        reader(manifest)
    assert field in str(err.value)


def test_pod_claims_need_exactly_one_source() -> None:
    manifest = pod("p")
    manifest["spec"]["resourceClaims"] = [{"name": "gpu"}]
    with pytest.raises(ManifestError, match=r"spec.resourceClaims\[0\]"):
        read_pod(manifest)
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    manifest["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-x"}]}
    assert read_pod(manifest).resource_claims[0].generated == "p-x"


def test_template_reads_its_claim_spec() -> None:
    template = read_resource_claim_template(
        {
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [exactly("r", 2)]}}},
        }
    )
    assert template.requests[0].alternatives[0].count == 2


def test_quantities_compare_in_cel() -> None:
    mem = quantity_value(milli_quantity("1Gi"))
    device = {"driver": "d", "attributes": {}, "capacity": {"d": {"mem": mem}}}
    assert compile_selector('device.capacity["d"].mem == quantity("1024Mi")').matches(device)
    assert compile_selector('device.capacity["d"].mem.isLessThan(quantity("2G"))').matches(device)
    assert not compile_selector(
        'device.capacity["d"].mem.compareTo(quantity("1.5Gi")) >= 0'
    ).matches(device)


@pytest.mark.parametrize("expression", ["device.(", "1 + 1", 'device.attributes["x"].y'])
def test_bad_selectors_are_errors(expression: str) -> None:
    with pytest.raises(CelError):
        compile_selector(expression).matches({"driver": "d", "attributes": {}, "capacity": {}})


def _state(*slices: dict[str, Any]) -> DeviceState:
    state = DeviceState()
    for s in slices:
        state.upsert_slice(read_resource_slice(s))
    return state


def test_a_failing_selector_is_a_claim_error_naming_request_and_expression() -> None:
    state = _state(slice_("s", "n1", {"name": "g0"}))
    bad = read_resource_claim(claim("c", exactly("r", 1, 'device.attributes["x"].y == 1')))
    with pytest.raises(ClaimError, match="request r: selector"):
        allocate([bad], state.on_node("n1"), set(), Matcher(CLASSES))


def test_devices_in_use_and_taken_by_an_earlier_claim_are_skipped() -> None:
    state = _state(slice_("s", "n1", {"name": "g0"}, {"name": "g1"}, {"name": "g2"}))
    first = read_resource_claim(claim("a", exactly("r", 1)))
    second = read_resource_claim(claim("b", exactly("r", 1)))
    found = allocate(
        [first, second], state.on_node("n1"), {"gpu.example.com/n1/g0"}, Matcher(CLASSES)
    )
    assert found is not None
    assert [d.device for d in found["ml/a"].devices] == ["g1"]
    assert [d.device for d in found["ml/b"].devices] == ["g2"]
    assert allocate([first], state.on_node("n2"), set(), Matcher(CLASSES)) is None


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    state = _state(
        slice_("old", "n1", {"name": "g-old"}, pool="p", generation=1),
        slice_("new", "n1", {"name": "g-new"}, pool="p", generation=2, count=2),
    )
    node = state.on_node("n1")
    assert [d.name for d in node.devices] == ["g-new"]
    assert node.incomplete_pools == ("gpu.example.com/p",)


def test_dra_objects_from_files_survive_the_merge_with_a_cluster() -> None:
    files = Objects()
    files.add("ResourceSlice", slice_("s", "n1", {"name": "g0"}))
    files.add("ResourceClaim", claim("c", exactly("r")))
    merged = merge_objects(Objects(), files)
    assert [s.name for s in merged.resource_slices] == ["s"]
    assert [c.key for c in merged.resource_claims] == ["ml/c"]
