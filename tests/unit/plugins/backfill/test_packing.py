"""Preemption takes the least room (docs/backfill.md#preemption-takes-the-least-room): among
nodes kube-scheduler's criteria leave equal down to the number of victims, Backfill puts
first the node whose victims hold the least of what the preemptor asks for."""

from __future__ import annotations

from typing import Any

from batchsched.commands.explain import explain_pod
from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.plugins.backfill.packing import evicted_share
from tests.builders import node, pod, priority_class
from tests.conftest import NOW, objects_of, schedule
from tests.unit.plugins.backfill.pods import gpus, running, stating


def _low(name: str, on: str, count: int, started: str) -> dict[str, Any]:
    return running(
        name, count, "3h", on=on, started=f"2026-11-22T{started}:00Z", priority_class="low"
    )


def _cluster(runtime: str | None = "1h") -> list[dict[str, Any]]:
    """n1 runs `whole` (8 GPUs, started 09:50, the latest); n2 runs two pods of 4 GPUs
    (09:00 and 09:10). `urgent` (4 GPUs) fits nowhere: one victim on either node."""
    return [
        priority_class("low", 10),
        priority_class("high", 100),
        node("n1", nvidia_com__gpu="8"),
        node("n2", nvidia_com__gpu="8"),
        _low("whole", "n1", 8, "09:50"),
        _low("half-a", "n2", 4, "09:00"),
        _low("half-b", "n2", 4, "09:10"),
        pod(
            "urgent",
            priority_class="high",
            annotations=stating(runtime),
            extra_requests=gpus(4),
        ),
    ]


def _evicted(*manifests: dict[str, Any], config: Any = None) -> list[str]:
    return [e.pod for e in schedule(*manifests, config=config).evictions]


def _config(plugins: dict[str, Any]) -> Any:
    return parse_config({"profiles": [{"plugins": plugins}]})


def test_a_preemptor_takes_the_node_whose_victims_hold_least() -> None:
    # kube-scheduler's order ends on the latest-started victim: `whole` (09:50), emptying n1
    # for a pod that takes half of it. Counted by what they hold, half-b (4 of 8 GPUs) goes.
    assert _evicted(*_cluster()) == ["default/half-b"]
    off = _config({"multiPoint": {"disabled": [{"name": "Backfill"}]}})
    assert _evicted(*_cluster(), config=off) == ["default/whole"]
    # It comes with Backfill's score: without the score, kube-scheduler's order.
    no_score = _config({"score": {"disabled": [{"name": "Backfill"}]}})
    assert _evicted(*_cluster(), config=no_score) == ["default/whole"]


def test_a_preemptor_stating_no_runtime_keeps_kube_schedulers_order() -> None:
    # As the score leaves it: where nobody states a runtime, nothing changes.
    assert _evicted(*_cluster(runtime=None)) == ["default/whole"]


def test_explain_names_the_node_and_the_criterion() -> None:
    out = explain_pod(objects_of(*_cluster()), default_config(), NOW, "default/urgent")
    assert out.preemption_node == "n2"
    criteria = "count, least room the victims hold (from Backfill) and start times is n2"
    assert criteria in out.preemption


def test_the_share_counts_what_the_preemptor_asks_for_on_that_node() -> None:
    state = build_state(objects_of(*_cluster()))
    demand = state.pods.demand(state.pods.by_key["default/urgent"])
    whole = state.pods.by_key["default/whole"]
    half = state.pods.by_key["default/half-b"]
    n1, n2 = state.nodes.row_of["n1"], state.nodes.row_of["n2"]
    # GPUs 8/8 (or 4/8), CPU 1/4 and memory 1Gi/32Gi: the pods ask the same of those.
    assert evicted_share(state, demand, n1, [whole]) == 8 / 8 + 1 / 4 + 1 / 32
    assert evicted_share(state, demand, n2, [half]) == 4 / 8 + 1 / 4 + 1 / 32
    # A victim on another node (its gang's member) holds nothing here.
    assert evicted_share(state, demand, n2, [whole]) == 0.0
