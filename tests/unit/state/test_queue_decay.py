"""Decayed usage: the half-life formula step by step, read back from a stored value, and the
effective weights it gives siblings (KAI's max(w + k(w - u), 0), renormalised); with decay on,
a queue that used much gets less of the surplus beyond nominal, never less than its nominal."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.parse import read_node, read_pod
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, read_queue
from batchsched.state.cluster import ClusterState
from batchsched.state.queue_decay import Decay, DecayedUsage
from tests.builders import node, pod

GPU = "nvidia.com/gpu"


def test_usage_integrates_and_halves_each_half_life() -> None:
    decayed = DecayedUsage(Decay(half_life=10.0))
    decayed.advance(100.0, {"a": {GPU: 2}}, {GPU})  # the first step only starts the clock
    assert decayed.usage == {}
    decayed.advance(110.0, {"a": {GPU: 2, "cpu": 500}}, {GPU})  # cpu: not shared, not kept
    assert decayed.usage == {"a": {GPU: pytest.approx(20.0)}}
    decayed.advance(120.0, {}, {GPU})
    assert decayed.usage == {"a": {GPU: pytest.approx(10.0)}}
    decayed.advance(115.0, {}, {GPU})  # a clock that went back restarts from there
    assert decayed.at == 115.0 and decayed.usage == {"a": {GPU: pytest.approx(10.0)}}


def test_a_stored_value_is_decayed_to_now_when_read_back() -> None:
    decayed = DecayedUsage(Decay(half_life=60.0))
    decayed.restore("a", {GPU: 400.0}, stored_at=880.0, now=1000.0)
    assert decayed.at == 1000.0
    assert decayed.usage == {"a": {GPU: pytest.approx(100.0)}}


def queue(name: str, parent: str = "", weight: float = 1, **gpu: int) -> Any:
    spec: dict[str, Any] = {"resources": {GPU: gpu}, "weight": weight}
    if parent:
        spec["parent"] = parent
    return read_queue(
        {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    )


def test_effective_weights_follow_the_share_of_past_usage_among_siblings() -> None:
    queues = {q.name: q for q in (queue("a"), queue("b"), queue("org"), queue("x", "org"))}
    decayed = DecayedUsage(Decay(half_life=60.0, k=1.0))
    decayed.usage = {"a": {GPU: 300.0}, "b": {GPU: 100.0}, "x": {GPU: 5.0}}
    weights = decayed.effective_weights(queues)
    # Roots a, b, org: w = 1/3 each; u = 3/4, 1/4, 0.
    assert weights["a"][GPU] == pytest.approx(0.0)  # 1/3 + (1/3 - 3/4) < 0: floored
    assert weights["b"][GPU] == pytest.approx(3 * (1 / 3 + 1 / 12) / (5 / 12 + 2 / 3))
    assert weights["org"][GPU] == pytest.approx(3 * (2 / 3) / (5 / 12 + 2 / 3))
    assert weights["x"][GPU] == pytest.approx(1.0)  # alone among its siblings
    gentle = DecayedUsage(Decay(half_life=60.0, k=0.0))
    gentle.usage = decayed.usage
    assert gentle.effective_weights(queues)["a"][GPU] == pytest.approx(1.0)  # k = 0: no effect


def test_with_decay_the_queue_that_used_more_gets_less_of_the_surplus() -> None:
    state = ClusterState()
    state.apply("Node", read_node(node("n1", nvidia_com__gpu="8")))
    for q in (queue("a", nominal=1), queue("b", nominal=1)):
        state.apply("Queue", q)
    for leaf in ("a", "b"):
        for i in range(8):
            labels = {QUEUE_LABEL: leaf}
            state.apply(
                "Pod", read_pod(pod(f"{leaf}-{i}", labels=labels, extra_requests={GPU: "1"}))
            )
    even = state.queue_fair_shares()
    assert (even["a"][GPU], even["b"][GPU]) == (4, 4)
    state.queues.use_decay(Decay(half_life=3600.0))
    state.advance_queue_usage(0.0)
    state.apply(
        "Pod",
        read_pod(pod("ran", labels={QUEUE_LABEL: "a"}, extra_requests={GPU: "4"}, node_name="n1")),
    )
    state.advance_queue_usage(3600.0)  # a used 4 GPUs for an hour, b none
    shares = state.queue_fair_shares()
    assert shares["a"][GPU] >= 1  # never below nominal
    assert shares["b"][GPU] > shares["a"][GPU]
