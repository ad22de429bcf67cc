"""DRA rules beyond the basics of test_dynamic_resources.py: distinctAttribute and typed
attribute comparison, pools not bound to one node and the node selector an allocation
records, and Kubernetes' semver and quantity helpers in CEL (scenarios: tests/scenarios/dra)."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.dra import read_resource_claim, read_resource_slice
from batchsched.objects.errors import ManifestError
from batchsched.objects.records import NodeSelectorTerm, Requirement
from batchsched.objects.semver import SemverError, parse_semver
from batchsched.plugins.dynamicresources.allocator import Matcher, allocate, node_selector
from batchsched.plugins.dynamicresources.selectors import CelError, compile_selector
from tests.unit.plugins.dynamicresources.test_allocator import (
    CLASSES,
    _state,
    claim,
    exactly,
    slice_,
)

RACK_R1 = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
    ]
}


def shared_slice(name: str, *devices: dict[str, Any], **where: Any) -> dict[str, Any]:
    manifest = slice_(name, "", *devices, pool=name)
    del manifest["spec"]["nodeName"]
    manifest["spec"].update(where)
    return manifest


def picked(claims: list[dict[str, Any]], node: Any, in_use: set[str] | None = None) -> Any:
    found = allocate(
        [read_resource_claim(c) for c in claims], node, in_use or set(), Matcher(CLASSES)
    )
    return None if found is None else {k: [d.device for d in a.devices] for k, a in found.items()}


def numa(name: str, value: Any, kind: str = "int") -> dict[str, Any]:
    return {"name": name, "attributes": {"numa": {kind: value}}}


# --- distinctAttribute and typed values -------------------------------------------------


def test_distinct_attribute_skips_devices_sharing_a_value() -> None:
    node = _state(slice_("s", "n1", numa("g0", 0), numa("g1", 0), numa("g2", 1))).on_node("n1")
    spread = claim(
        "c", exactly("r", 2), constraints=[{"distinctAttribute": "gpu.example.com/numa"}]
    )
    assert picked([spread], node) == {"ml/c": ["g0", "g2"]}
    three = claim("c", exactly("r", 3), constraints=[{"distinctAttribute": "gpu.example.com/numa"}])
    assert picked([three], node) is None


def test_distinct_attribute_needs_the_attribute_and_binds_only_its_requests() -> None:
    node = _state(slice_("s", "n1", {"name": "bare"}, numa("g0", 0), numa("g1", 0))).on_node("n1")
    scoped = claim(
        "c",
        exactly("a"),
        exactly("b"),
        exactly("free"),
        constraints=[{"requests": ["a", "b"], "distinctAttribute": "gpu.example.com/numa"}],
    )
    # "free" is not constrained and may take the bare device; a and b need distinct values.
    assert picked([scoped], node) is None
    node = _state(slice_("s", "n1", {"name": "bare"}, numa("g0", 0), numa("g1", 1))).on_node("n1")
    assert picked([scoped], node) == {"ml/c": ["g0", "g1", "bare"]}


def test_match_attribute_compares_types_too() -> None:
    node = _state(
        slice_("s", "n1", numa("one", 1), numa("true", True, "bool"), numa("one-b", 1))
    ).on_node("n1")
    pair = claim("c", exactly("r", 2), constraints=[{"matchAttribute": "gpu.example.com/numa"}])
    # An int 1 and a bool true are different values (Python would call them equal).
    assert picked([pair], node) == {"ml/c": ["one", "one-b"]}
    node = _state(
        slice_("s", "n1", numa("s", "1.0.0", "string"), numa("v", "1.0.0", "version"))
    ).on_node("n1")
    assert picked([pair], node) is None


def test_versions_differing_only_in_build_metadata_are_not_distinct() -> None:
    node = _state(
        slice_("s", "n1", numa("a", "1.0.0+x", "version"), numa("b", "1.0.0+y", "version"))
    ).on_node("n1")
    spread = claim(
        "c", exactly("r", 2), constraints=[{"distinctAttribute": "gpu.example.com/numa"}]
    )
    assert picked([spread], node) is None


# --- where devices may be used ----------------------------------------------------------


def test_shared_devices_show_on_the_nodes_their_selection_names() -> None:
    state = _state(
        slice_("local", "n1", {"name": "l0"}),
        shared_slice("everywhere", {"name": "e0"}, allNodes=True),
        shared_slice("rack", {"name": "r0"}, nodeSelector=RACK_R1),
        shared_slice(
            "per-device",
            {"name": "d-n2", "nodeName": "n2"},
            {"name": "d-rack", "nodeSelector": RACK_R1},
            {"name": "d-all", "allNodes": True},
            perDeviceNodeSelection=True,
        ),
    )
    [term] = state.node_terms()  # one term, though two selections use it
    assert [d.name for d in state.on_node("n1").devices] == ["e0", "l0", "d-all"]
    assert [d.name for d in state.on_node("n2", frozenset({0})).devices] == [
        "e0",
        "d-n2",
        "d-rack",
        "d-all",
        "r0",
    ]
    assert term.match_expressions == (Requirement("rack", "In", ("r1",)),)


def test_the_allocation_records_where_its_devices_may_be_used() -> None:
    state = _state(
        slice_("local", "n1", {"name": "l0"}),
        shared_slice("everywhere", {"name": "e0"}, allNodes=True),
        shared_slice("rack", {"name": "r0"}, nodeSelector=RACK_R1),
    )
    by_name = {d.name: d for d in state.on_node("n1", frozenset({0})).devices}
    assert node_selector([by_name["e0"]]) == ()
    rack = node_selector([by_name["e0"], by_name["r0"], by_name["r0"]])
    assert rack == (NodeSelectorTerm((Requirement("rack", "In", ("r1",)),), ()),)
    pinned = node_selector([by_name["r0"], by_name["l0"]])
    assert pinned == (NodeSelectorTerm((), (Requirement("metadata.name", "In", ("n1",)),)),)


def test_an_incomplete_shared_pool_fails_all_mode_where_it_is_seen() -> None:
    manifest = shared_slice("everywhere", {"name": "e0"}, allNodes=True)
    manifest["spec"]["pool"]["resourceSliceCount"] = 2
    state = _state(manifest)
    assert state.on_node("n7").incomplete_pools == ("gpu.example.com/everywhere",)
    every = claim("c", exactly("r", allocationMode="All"))
    assert picked([every], state.on_node("n7")) is None
    assert picked([claim("c", exactly("r"))], state.on_node("n7")) == {"ml/c": ["e0"]}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"nodeName": "n1", "allNodes": True}, "spec: needs exactly one of nodeName"),
        (
            {"nodeSelector": {"nodeSelectorTerms": RACK_R1["nodeSelectorTerms"] * 2}},
            "spec.nodeSelector.nodeSelectorTerms: must have exactly 1 term, got 2",
        ),
        (
            {"perDeviceNodeSelection": True},
            "spec.devices[0]: needs exactly one of nodeName, nodeSelector, allNodes",
        ),
    ],
)
def test_node_selection_errors_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_resource_slice(shared_slice("s", {"name": "g"}, **spec))


# --- CEL: semver and quantity helpers ------------------------------------------------------


def test_semver_parsing_is_strict_and_orders_by_precedence() -> None:
    for bad in ("v1.0.0", "1.0", "01.0.0", "1.0.0-01", "1.0.0-", "1.0.0+"):
        with pytest.raises(SemverError):
            parse_semver(bad)
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.10.0",
        "2.0.0",
    ]  # semver.org's example, and numeric (not textual) components
    keys = [parse_semver(v).key() for v in ordered]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert parse_semver("1.2.3+build").key() == parse_semver("1.2.3").key()


DEVICE = read_resource_slice(
    slice_(
        "s",
        "n1",
        {
            "name": "g0",
            "attributes": {"driver": {"version": "1.2.3-rc.1+b7"}, "model": {"string": "H100"}},
            "capacity": {"memory": {"value": "1Gi"}},
        },
    )
).devices[0]


@pytest.mark.parametrize(
    "expression",
    [
        'semver("1.2.3") == semver("1.2.3")',
        '!(semver("1.2.3") == semver("1.0.0"))',
        'semver("1.0.0").isLessThan(semver("1.2.3"))',
        'semver("1.2.3").compareTo(semver("0.1.2")) == 1',
        'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2',
        'semver("1.2.3").patch() == 3',
        'isSemver("1.2.3-beta.1+build.1") && !isSemver("v1.0")',
        'device.attributes["gpu.example.com"].driver == semver("1.2.3-rc.1")',
        'device.attributes["gpu.example.com"].driver.isLessThan(semver("1.2.3"))',
        'device.capacity["gpu.example.com"].memory == quantity("1024Mi")',
        'device.capacity["gpu.example.com"].memory.add(quantity("1Gi")) == quantity("2Gi")',
        'quantity("1").add(2) == quantity("3") && quantity("3").sub(1) == quantity("2")',
        'quantity("-1").sign() == -1 && quantity("0").sign() == 0',
        'quantity("2").isInteger() && !quantity("1.5").isInteger()',
        'quantity("2").asInteger() == 2 && quantity("1.5").asApproximateFloat() == 1.5',
        'isQuantity("1Gi") && !isQuantity("1Gx")',
        # An unknown domain is an empty map, as upstream's attribute maps answer it.
        '!has(device.attributes["other.example.com"].model)',
        "!has(device.capacity['other.example.com'].memory)",
    ],
)
def test_kubernetes_cel_helpers(expression: str) -> None:
    assert compile_selector(expression).matches(DEVICE.view)


@pytest.mark.parametrize(
    "expression",
    [
        'semver("v1.0.0") == semver("1.0.0")',  # not a version
        'device.attributes["gpu.example.com"].model.major() == 1',  # a string, not a version
        'device.attributes["gpu.example.com"].driver.compareTo(quantity("1")) == 0',
        'quantity("1.5").asInteger() == 1',
        'device.capacity["gpu.example.com"].memory > 5',  # a quantity is no number
        'device.attributes["other.example.com"].model == "H100"',  # no such key
    ],
)
def test_kubernetes_cel_helpers_reject_the_wrong_values(expression: str) -> None:
    with pytest.raises(CelError):
        compile_selector(expression).matches(DEVICE.view)
