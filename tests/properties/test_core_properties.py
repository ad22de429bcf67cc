"""Invariants of ordinary scheduling, over random clusters."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import OneShotResult
from batchsched.objects.load import Objects
from tests.conftest import objects_of, same_decisions_whatever_the_order, schedule
from tests.properties.strategies import clusters

SETTINGS = settings(max_examples=60, deadline=None)


def final_usage(objects: Objects, result: OneShotResult) -> dict[str, dict[str, int]]:
    """Requests per node after the run: running pods that were not evicted, plus bindings."""
    evicted = {e.pod for e in result.evictions}
    placement = {p.key: p.node_name for p in objects.pods if p.node_name}
    placement.update({b.pod: b.node for b in result.bindings})
    usage: dict[str, dict[str, int]] = {}
    pods = {p.key: p for p in objects.pods}
    for key, node_name in placement.items():
        if key in evicted or pods[key].terminated:
            continue
        per_node = usage.setdefault(node_name, {})
        for resource, amount in pods[key].requests.items():
            per_node[resource] = per_node.get(resource, 0) + amount
    return usage


@SETTINGS
@given(clusters())
def test_no_node_is_ever_over_committed(manifests: list[dict[str, Any]]) -> None:
    objects = objects_of(*manifests)
    result = schedule(*manifests)
    allocatable = {n.name: n.allocatable for n in objects.nodes}
    for node_name, used in final_usage(objects, result).items():
        for resource, amount in used.items():
            assert amount <= allocatable[node_name].get(resource, 0), (node_name, resource)


@SETTINGS
@given(clusters(), st.integers(0, 2**32 - 1))
def test_same_input_same_decisions_whatever_the_order(
    manifests: list[dict[str, Any]], seed: int
) -> None:
    assert same_decisions_whatever_the_order(manifests, seed)


@SETTINGS
@given(clusters())
def test_every_pending_pod_gets_a_message(manifests: list[dict[str, Any]]) -> None:
    result = schedule(*manifests)
    bound = {b.pod for b in result.bindings}
    pending = {
        f"default/{m['metadata']['name']}"
        for m in manifests
        if m["kind"] == "Pod" and not m["spec"].get("nodeName")
    }
    evicted = {e.pod for e in result.evictions}
    assert set(result.unschedulable) == pending - bound - evicted
    for message in result.unschedulable.values():
        assert message.startswith("0/")
