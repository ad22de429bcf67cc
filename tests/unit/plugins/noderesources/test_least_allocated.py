from __future__ import annotations

from batchsched.plugins.noderesources.least_allocated import least_allocated, least_allocated_node
from batchsched.plugins.noderesources.resource_allocation import ScoredResource
from tests.unit.plugins.noderesources.helpers import all_rows, cycle, one_row


def test_score_is_the_weighted_mean_of_room_left() -> None:
    # cpu: (4000 - 3000) / 4000 -> 25; memory: (10000 - 5000) / 10000 -> 50; mean 37.
    c = cycle(
        [{"cpu": 4000, "memory": 10000}, {"cpu": 6000, "memory": 10000}],
        {"cpu": 3000, "memory": 5000},
    )
    assert least_allocated(all_rows(c), 2).tolist() == [37, 50]
    assert [least_allocated_node(one_row(c, r)) for r in (0, 1)] == [37, 50]


def test_weights_and_over_requested_resources() -> None:
    c = cycle([{"cpu": 4000, "memory": 10000}], {"cpu": 3000, "memory": 12000})
    weighted = (ScoredResource("cpu", 3), ScoredResource("memory", 1))
    # cpu 25 * 3 + memory 0 (more than the node has) * 1, over 4.
    assert least_allocated(all_rows(c, weighted), 1).tolist() == [18]
    assert least_allocated_node(one_row(c, 0, weighted)) == 18


def test_a_resource_the_node_lacks_is_left_out_of_its_mean() -> None:
    c = cycle(
        [{"cpu": 4000, "memory": 10000, "example.com/gpu": 2}, {"cpu": 4000, "memory": 10000}],
        {"cpu": 1000, "memory": 5000, "example.com/gpu": 1},
    )
    resources = (
        ScoredResource("cpu", 1),
        ScoredResource("memory", 1),
        ScoredResource("example.com/gpu", 1),
    )
    # n0: (75 + 50 + 50) / 3 = 58; n1 has no GPUs: (75 + 50) / 2 = 62.
    assert least_allocated(all_rows(c, resources), 2).tolist() == [58, 62]
    assert [least_allocated_node(one_row(c, r, resources)) for r in (0, 1)] == [58, 62]


def test_an_extended_resource_the_pod_does_not_use_says_nothing() -> None:
    c = cycle([{"cpu": 4000, "memory": 10000, "example.com/gpu": 2}], {"cpu": 1000, "memory": 5000})
    resources = (
        ScoredResource("cpu", 1),
        ScoredResource("memory", 1),
        ScoredResource("example.com/gpu", 1),
    )
    assert least_allocated(all_rows(c, resources), 1).tolist() == [62]
