"""DRA fields batchsched does not implement (partitionable devices, device taints, binding
conditions, consumable capacity; request tolerations and capacity): a device using one is
never allocated, a request using one is refused by name (scenario:
tests/scenarios/dra/unsupported-device-fields.yaml)."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.dra import read_resource_claim, read_resource_slice
from batchsched.plugins.dynamicresources.allocator import (
    ClaimError,
    Matcher,
    allocate,
    blocking_device,
)
from tests.unit.plugins.dynamicresources.test_allocator import (
    CLASSES,
    _state,
    claim,
    exactly,
    slice_,
)
from tests.unit.plugins.dynamicresources.test_rules import picked

# Each field, in the shape the API gives it, and the name a refusal uses.
DEVICE_FIELDS: list[tuple[dict[str, Any], str]] = [
    (
        {"consumesCounters": [{"counterSet": "gpu-0", "counters": {"mem": {"value": "8Gi"}}}]},
        "devices[].consumesCounters",
    ),
    (
        {"taints": [{"key": "broken", "effect": "NoSchedule"}]},
        "devices[].taints",
    ),
    ({"bindingConditions": ["attached"]}, "devices[].bindingConditions"),
    ({"bindingFailureConditions": ["failed"]}, "devices[].bindingFailureConditions"),
    ({"bindsToNode": True}, "devices[].bindsToNode"),
    ({"allowMultipleAllocations": True}, "devices[].allowMultipleAllocations"),
    (
        {"capacity": {"mem": {"value": "8Gi", "requestPolicy": {"default": "1Gi"}}}},
        "devices[].capacity.requestPolicy",
    ),
]


@pytest.mark.parametrize(("fields", "name"), DEVICE_FIELDS)
def test_a_device_using_an_unsupported_field_is_never_allocated(
    fields: dict[str, Any], name: str
) -> None:
    record = read_resource_slice(slice_("s", "n1", {"name": "odd", **fields}, {"name": "g1"}))
    assert [d.unsupported for d in record.devices] == [name, ""]
    node = _state(slice_("s", "n1", {"name": "odd", **fields}, {"name": "g1"})).on_node("n1")
    assert picked([claim("c", exactly("r"))], node) == {"ml/c": ["g1"]}
    # Two are wanted, only one may be handed out: the odd one is what stands in the way.
    two = [read_resource_claim(claim("c", exactly("r", 2)))]
    assert allocate(two, node, set(), Matcher(CLASSES)) is None
    blocker = blocking_device(two, node, set(), Matcher(CLASSES))
    assert blocker is not None and (blocker.name, blocker.unsupported) == ("odd", name)


def test_empty_or_false_fields_are_not_a_use() -> None:
    unused = {"taints": [], "bindsToNode": False, "allowMultipleAllocations": False}
    record = read_resource_slice(slice_("s", "n1", {"name": "g0", **unused}))
    assert record.devices[0].unsupported == ""


def test_a_slice_declaring_shared_counters_takes_its_devices_out() -> None:
    manifest = slice_("s", "n1", {"name": "g0"})
    manifest["spec"]["sharedCounters"] = [{"name": "gpu-0", "counters": {"mem": {"value": "8"}}}]
    assert read_resource_slice(manifest).devices[0].unsupported == "spec.sharedCounters"
    assert picked([claim("c", exactly("r"))], _state(manifest).on_node("n1")) is None


def test_no_blocker_when_the_claims_fail_without_those_devices_too() -> None:
    node = _state(slice_("s", "n1", {"name": "odd", "bindsToNode": True}, {"name": "g1"})).on_node(
        "n1"
    )
    three = [read_resource_claim(claim("c", exactly("r", 3)))]
    assert blocking_device(three, node, set(), Matcher(CLASSES)) is None


@pytest.mark.parametrize(
    ("more", "name"),
    [
        ({"tolerations": [{"key": "broken", "operator": "Exists"}]}, "tolerations"),
        ({"capacity": {"requests": {"mem": "1Gi"}}}, "capacity.requests"),
    ],
)
def test_a_request_using_an_unsupported_field_is_refused_by_name(
    more: dict[str, Any], name: str
) -> None:
    node = _state(slice_("s", "n1", {"name": "g0"})).on_node("n1")
    used = read_resource_claim(claim("c", exactly("plain"), exactly("r", **more)))
    message = f"resourceclaim ml/c, request r uses {name}, which batchsched does not support yet"
    with pytest.raises(ClaimError, match=message.replace(".", r"\.")):
        allocate([used], node, set(), Matcher(CLASSES))
    # A firstAvailable entry too, even when an earlier one would do.
    entry = {"name": "b", "deviceClassName": "gpu", **more}
    first = claim(
        "d", {"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}, entry]}
    )
    with pytest.raises(ClaimError, match=f"request r/b uses {name}"):
        allocate([read_resource_claim(first)], node, set(), Matcher(CLASSES))
