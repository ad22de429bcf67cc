"""Required topology (docs/topology.md): a gang lands whole inside one domain of a node label
key, chosen by BestFit on its dominant resource, or stays whole pending saying why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.cli import main
from batchsched.commands.schedule import OneShotResult, build_state
from batchsched.config import default_config
from batchsched.controllers import Controllers
from batchsched.decisions import GroupPlaced, PodGroupUpdate
from batchsched.framework.interface import ClusterChange, ClusterEvent, PodsHint
from batchsched.objects.load import load_files
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.records import TopologyRequest
from batchsched.objects.topology import REQUIRED_ANNOTATION
from batchsched.plugins.coscheduling import Coscheduling
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.topology import dominant_resource, placement_message
from tests.builders import node, pod, pod_group
from tests.conftest import NOW, objects_of, schedule
from tests.paths import ROOT

RACK = "example.com/rack"
GPU = "nvidia.com/gpu"


def rack_node(name: str, rack: str | None, gpus: int = 8) -> dict[str, Any]:
    return node(name, cpu="32", labels={RACK: rack} if rack else None, nvidia_com__gpu=str(gpus))


def gang(name: str, size: int, required: str | None = RACK) -> dict[str, Any]:
    manifest = pod_group(name, size)
    if required:
        manifest["metadata"]["annotations"] = {REQUIRED_ANNOTATION: required}
    return manifest


def member(name: str, group: str, gpus: int = 8, **kw: Any) -> dict[str, Any]:
    return pod(
        name,
        namespace="ml",
        labels={GROUP_LABEL: group},
        extra_requests={GPU: str(gpus)},
        **kw,
    )


def bound(result: OneShotResult) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings}


def test_ties_between_equal_domains_break_on_the_domain_value() -> None:
    nodes = [rack_node("x1", "rack-b"), rack_node("y1", "rack-a")]
    result = schedule(gang("g", 1), member("w-0", "g"), *nodes)
    assert bound(result) == {"ml/w-0": "y1"}


def test_within_a_domain_ties_go_to_the_node_first_by_name() -> None:
    # Rows not in name order (z1 is read first): the tie inside rack-a goes to a1.
    nodes = [rack_node("z1", "rack-a"), rack_node("a1", "rack-a"), rack_node("m1", None)]
    result = schedule(gang("g", 1), member("w-0", "g"), *nodes)
    assert bound(result) == {"ml/w-0": "a1"}


def test_without_a_request_the_gang_spreads_as_before() -> None:
    nodes = [rack_node("a1", "rack-a"), rack_node("b1", "rack-b")]
    pods = [member(f"w-{i}", "g") for i in range(2)]
    assert set(bound(schedule(gang("g", 2, None), *pods, *nodes)).values()) == {"a1", "b1"}
    result = schedule(gang("g", 2), *pods, *nodes)
    assert not result.bindings
    assert (
        "largest fit is rack-a with 8 of 16 nvidia.com/gpu free" in (result.unschedulable["ml/w-0"])
    )


def test_no_labelled_node_is_said() -> None:
    result = schedule(gang("g", 1), member("w-0", "g"), rack_node("n1", None))
    assert "topology example.com/rack: no node has the label." in result.unschedulable["ml/w-0"]


def test_members_beyond_min_member_join_the_groups_domain() -> None:
    # rack-b (16 GPUs) is the BestFit for minMember 2; the third member fits only in rack-a,
    # and stays pending rather than leave the group's rack.
    nodes = [rack_node(f"a{i}", "rack-a") for i in range(3)]
    nodes += [rack_node(f"b{i}", "rack-b") for i in range(2)]
    pods = [member(f"w-{i}", "g") for i in range(3)]
    result = schedule(gang("g", 2), *pods, *nodes)
    assert bound(result) == {"ml/w-0": "b0", "ml/w-1": "b1"}
    assert set(result.unschedulable) == {"ml/w-2"}
    assert result.domains == {"ml/g": ["rack-b"]}


def test_a_domain_where_a_filter_keeps_members_apart_is_passed_over() -> None:
    # rack-a has room for both by GPUs, but only node a0 matches the members' selector.
    nodes = [rack_node("a0", "rack-a", 16), rack_node("a1", "rack-a")]
    nodes[0]["metadata"]["labels"]["pool"] = "x"
    nodes += [rack_node("b0", "rack-b", 16), rack_node("b1", "rack-b", 16)]
    for n in nodes[2:]:
        n["metadata"]["labels"]["pool"] = "x"
    pods = [member(f"w-{i}", "g", 12, node_selector={"pool": "x"}) for i in range(2)]
    assert bound(schedule(gang("g", 2), *pods, *nodes)) == {"ml/w-0": "b0", "ml/w-1": "b1"}


def test_the_dominant_resource_is_the_largest_share_of_the_cluster() -> None:
    state = build_state(objects_of(rack_node("n", "r"), member("w", "g", 4)))
    col, amount = dominant_resource(state, list(state.pods.pending.values()))
    assert (state.nodes.resources.names[col], amount) == (GPU, 4)


def test_a_room_change_wakes_a_waiting_topology_gang() -> None:
    objects = objects_of(gang("g", 1), gang("h", 1, None), member("w", "g"), member("v", "h"))
    state = build_state(objects)
    hint = Coscheduling().events_to_register()[ClusterEvent.NODE_ROOM]
    assert isinstance(hint, PodsHint)
    change = ClusterChange(state, frozenset({ClusterEvent.NODE_ROOM}), np.zeros(0, np.intp), None)
    assert list(hint.ask(change, [state.pods.by_key["ml/w"], state.pods.by_key["ml/v"]])) == [
        True,
        False,
    ]


def test_the_chosen_domain_is_told_in_an_event_and_the_scheduled_condition() -> None:
    scheduler = Scheduler(build_state(load_files([Path(EXAMPLE)])), default_config())
    Controllers(scheduler)
    decisions = scheduler.schedule_pass(NOW)
    placed = {d.group: d.message for d in decisions if isinstance(d, GroupPlaced)}
    assert placed == {
        "ml/allreduce": "placed 2 member(s) in example.com/rack rack-21",
        "ml/finetune": "placed 2 member(s) in example.com/rack rack-22",
    }
    [update] = [d for d in decisions if isinstance(d, PodGroupUpdate) and d.group == "ml/allreduce"]
    condition = update.status.condition("PodGroupInitiallyScheduled")
    assert condition is not None and condition.status == "True"
    assert condition.message == "2 member(s) in example.com/rack rack-21"


def test_placement_words_for_a_preference() -> None:
    nodes = [rack_node("a0", "rack-a"), rack_node("b0", "rack-b"), rack_node("x", None)]
    state = build_state(objects_of(*nodes))
    rows = [state.nodes.row_of[n] for n in ("a0", "b0", "x")]
    asked = TopologyRequest(preferred=(RACK, "example.com/block"))
    assert placement_message(state, asked, rows[:1]) == "in example.com/rack rack-a"
    assert placement_message(state, asked, rows) == (
        "across 2 example.com/rack domain(s): rack-a, rack-b and 1 node(s) without the label"
    )


# ---- property: a required gang never spans two domains --------------------------------

CLUSTER = st.lists(
    st.tuples(st.sampled_from(["rack-a", "rack-b", "rack-c", None]), st.sampled_from([4, 8])),
    min_size=1,
    max_size=8,
)
GANGS = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from([2, 4, 8]), st.booleans()),
    min_size=1,
    max_size=3,
)


@settings(max_examples=40, deadline=None)
@given(CLUSTER, GANGS)
def test_a_required_gang_never_spans_two_domains(
    cluster: list[tuple[str | None, int]], gangs: list[tuple[int, int, bool]]
) -> None:
    nodes = [rack_node(f"n{i}", rack, gpus) for i, (rack, gpus) in enumerate(cluster)]
    racks = {f"n{i}": rack for i, (rack, _) in enumerate(cluster)}
    manifests: list[dict[str, Any]] = [*nodes]
    for g, (size, gpus, required) in enumerate(gangs):
        manifests.append(gang(f"g{g}", size, RACK if required else None))
        manifests += [member(f"g{g}-{i}", f"g{g}", gpus) for i in range(size)]
    result = schedule(*manifests)
    again = schedule(*manifests)
    assert result.to_json() == again.to_json()  # same input, same decisions
    placed = bound(result)
    for g, (size, _, required) in enumerate(gangs):
        nodes_of = [placed[f"ml/g{g}-{i}"] for i in range(size) if f"ml/g{g}-{i}" in placed]
        assert len(nodes_of) in (0, size)  # never part of a gang
        if required and nodes_of:
            domains = {racks[n] for n in nodes_of}
            assert len(domains) == 1 and None not in domains, (g, nodes_of)
            assert result.domains[f"ml/g{g}"] == sorted(domains)  # type: ignore[type-var]


# ---- the two-level example: schedule and explain -----------------------------------------

EXAMPLE = str(ROOT / "examples" / "topology" / "cluster.yaml")


def test_the_example_places_each_gang_in_one_domain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedule", "-f", EXAMPLE, "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {b["pod"]: b["node"] for b in out["bindings"]} == {
        "ml/allreduce-0": "b2-r1-n1",
        "ml/allreduce-1": "b2-r1-n2",
        "ml/finetune-0": "b2-r2-n1",
        "ml/finetune-1": "b2-r2-n2",
    }
    groups = {g["name"]: g.get("topology") for g in out["podGroups"]}
    assert groups == {
        "ml/allreduce": {"key": RACK, "domains": ["rack-21"]},
        "ml/finetune": {"key": RACK, "domains": ["rack-22"]},
        "ml/pretrain": {"key": "example.com/block", "domains": []},
    }
    messages = {u["pod"]: u["message"] for u in out["unschedulable"]}
    assert "largest fit is block-1 with 20 of 24 nvidia.com/gpu free." in messages["ml/pretrain-0"]


def test_explain_shows_each_domains_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "ml/pretrain-0", "-f", EXAMPLE, "-o", "json"]) == 0
    topology = json.loads(capsys.readouterr().out)["gang"]["topology"]
    assert topology == {
        "key": "example.com/block",
        "resource": GPU,
        "needed": 24,
        "domains": [
            {"domain": "block-2", "free": 4, "membersFit": 0},
            {"domain": "block-1", "free": 20, "membersFit": 0},
        ],
    }
    assert main(["explain", "ml/pretrain-0", "-f", EXAMPLE]) == 0
    text = capsys.readouterr().out
    assert "TOPOLOGY example.com/block: one domain, needing 24 nvidia.com/gpu" in text
    assert "block-1  20    not tried: too little nvidia.com/gpu" in text
