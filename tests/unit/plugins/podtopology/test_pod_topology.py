"""A single pod's own topology annotations (docs/topology.md#a-single-pod): required keeps it
on nodes with the label, preferred scores the narrowest key's nodes first."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import read_pod
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.records import TopologyRequest
from batchsched.objects.topology import PREFERRED_ANNOTATION, REQUIRED_ANNOTATION
from tests.builders import node, pod, pod_group, priority_class
from tests.conftest import schedule

RACK, BLOCK = "example.com/rack", "example.com/block"


def labelled(name: str, **labels: str) -> dict[str, Any]:
    return node(name, cpu="8", labels={k.replace("_", "."): v for k, v in labels.items()})


def asking(name: str, cpu: str = "1", **annotations: str) -> dict[str, Any]:
    return pod(name, cpu=cpu, annotations=annotations)


def bound(*manifests: dict[str, Any]) -> dict[str, str]:
    return {b.pod: b.node for b in schedule(*manifests).bindings}


RACKED = {"example_com/rack": "rack-1", "example_com/block": "block-1"}
BLOCKED = {"example_com/block": "block-1"}


def test_the_annotations_are_read_into_the_pod() -> None:
    required = read_pod(asking("p", **{REQUIRED_ANNOTATION: RACK}))
    assert required.topology == TopologyRequest(required=RACK)
    preferred = read_pod(asking("p", **{PREFERRED_ANNOTATION: f"{RACK},{BLOCK}"}))
    assert preferred.topology == TopologyRequest(preferred=(RACK, BLOCK))
    assert not read_pod(pod("p")).topology


def test_a_bad_key_names_the_pod_and_the_annotation() -> None:
    with pytest.raises(ManifestError) as err:
        read_pod(asking("p", **{REQUIRED_ANNOTATION: "bad key"}))
    assert "Pod default/p" in str(err.value)
    assert f"metadata.annotations.{REQUIRED_ANNOTATION}" in str(err.value)
    with pytest.raises(ManifestError, match="ask for one of required and preferred"):
        read_pod(asking("p", **{REQUIRED_ANNOTATION: RACK, PREFERRED_ANNOTATION: RACK}))


def test_required_keeps_the_pod_on_nodes_with_the_label() -> None:
    # The unlabelled node is fuller: without the annotation the pod would go there
    # (the default profile packs: MostAllocated).
    nodes = [labelled("a-bare"), labelled("z-rack", **RACKED)]
    filler = pod("filler", cpu="6", node_name="a-bare")
    assert bound(*nodes, filler, pod("p"))["default/p"] == "a-bare"
    assert bound(*nodes, filler, asking("p", **{REQUIRED_ANNOTATION: RACK}))["default/p"] == (
        "z-rack"
    )


def test_required_without_a_labelled_node_stays_pending_naming_the_key() -> None:
    result = schedule(labelled("bare"), asking("p", **{REQUIRED_ANNOTATION: RACK}))
    assert not result.bindings
    assert (
        "1 node(s) didn't have the pod's required topology label example.com/rack"
        in result.unschedulable["default/p"]
    )


def test_required_never_preempts_on_an_unlabelled_node() -> None:
    manifests = [
        priority_class("low", 10),
        priority_class("high", 1000),
        labelled("bare"),
        pod("victim", cpu="8", node_name="bare", priority_class="low"),
        pod("p", cpu="8", priority_class="high", annotations={REQUIRED_ANNOTATION: RACK}),
    ]
    result = schedule(*manifests)
    assert not result.evictions and not result.bindings


def test_preferred_goes_to_the_narrowest_key_first_never_pending() -> None:
    nodes = [labelled("a-bare"), labelled("b-block", **BLOCKED), labelled("c-rack", **RACKED)]
    ask = {PREFERRED_ANNOTATION: f"{RACK},{BLOCK}"}
    assert bound(*nodes, pod("p"))["default/p"] == "a-bare"  # ties by name, unasked
    assert bound(*nodes, asking("p", **ask))["default/p"] == "c-rack"
    full = pod("filler", cpu="8", node_name="c-rack")
    assert bound(*nodes, full, asking("p", **ask))["default/p"] == "b-block"
    blocked = pod("filler2", cpu="8", node_name="b-block")
    assert bound(*nodes, full, blocked, asking("p", **ask))["default/p"] == "a-bare"


def test_a_members_own_annotation_applies_to_it() -> None:
    nodes = [labelled("a-bare"), labelled("z-rack", **RACKED)]
    member = pod(
        "m-0", namespace="ml", labels={GROUP_LABEL: "g"}, annotations={REQUIRED_ANNOTATION: RACK}
    )
    assert bound(*nodes, pod_group("g", 1), member) == {"ml/m-0": "z-rack"}
