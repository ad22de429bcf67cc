from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.plugins.noderesources.balanced_allocation import (
    BalancedAllocation,
    balanced,
    balanced_node,
)
from batchsched.plugins.noderesources.resource_allocation import ScoredResource
from tests.unit.plugins.noderesources.helpers import all_rows, cycle, one_row, rows


def test_two_resources_score_one_minus_half_their_difference() -> None:
    # cpu 3000/4000 = .75, memory 5000/10000 = .5: std .125 -> 87; even use scores 100.
    c = cycle(
        [{"cpu": 4000, "memory": 10000}, {"cpu": 6000, "memory": 10000}],
        {"cpu": 3000, "memory": 5000},
    )
    assert balanced(all_rows(c), 2).tolist() == [87, 100]
    assert [balanced_node(one_row(c, r)) for r in (0, 1)] == [87, 100]


def test_three_resources_use_the_standard_deviation() -> None:
    c = cycle(
        [{"cpu": 4000, "memory": 10000, "example.com/gpu": 4}],
        {"cpu": 1000, "memory": 5000, "example.com/gpu": 4},
    )
    resources = (
        ScoredResource("cpu", 1),
        ScoredResource("memory", 1),
        ScoredResource("example.com/gpu", 1),
    )
    # .25, .5, 1: mean .5833, std .3118 -> 68
    assert balanced(all_rows(c, resources), 1).tolist() == [68]
    assert balanced_node(one_row(c, 0, resources)) == 68


def test_fractions_are_capped_at_one() -> None:
    c = cycle([{"cpu": 1000, "memory": 10000}], {"cpu": 3000, "memory": 5000})
    assert balanced(all_rows(c), 1).tolist() == [75]  # min(3, 1) and .5


def test_a_pod_requesting_none_of_the_resources_is_not_scored() -> None:
    plugin = BalancedAllocation()
    c = cycle([{"cpu": 1000, "memory": 10000}, {"cpu": 4000, "memory": 10000}], {})
    assert plugin.uniform(c)
    assert plugin.score_rows(c, rows(c)).tolist() == [0, 0]
    assert not plugin.uniform(cycle([{"cpu": 1000}], {"memory": 10}))


amounts = st.integers(min_value=0, max_value=2**40)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(amounts, amounts, st.integers(0, 64)), min_size=1, max_size=12),
    amounts,
    amounts,
)
def test_node_by_node_agrees_with_the_vectorised_scores(
    nodes: list[tuple[int, int, int]], cpu: int, memory: int
) -> None:
    """The two paths of every strategy (few rows node by node, many vectorised) agree."""
    from batchsched.plugins.noderesources.fit import STRATEGIES

    c = cycle(
        [{"cpu": a, "memory": b, "example.com/gpu": g} for a, b, g in nodes],
        {"cpu": cpu, "memory": memory, "example.com/gpu": 1},
    )
    resources = (
        ScoredResource("cpu", 2),
        ScoredResource("memory", 1),
        ScoredResource("example.com/gpu", 5),
    )
    for nonzero in (False, True):
        use = all_rows(c, resources, nonzero)
        every = [one_row(c, r, resources, nonzero) for r in range(len(nodes))]
        for vectorised, one_node in [*STRATEGIES.values(), (balanced, balanced_node)]:
            expected = vectorised(use, len(nodes))
            assert np.array_equal(expected, [one_node(u) for u in every]), vectorised.__name__


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(amounts.map(lambda a: a + 1), amounts.map(lambda a: a + 1)), min_size=1),
    amounts,
    amounts,
)
def test_nodes_with_every_resource_score_as_node_by_node(
    nodes: list[tuple[int, int]], cpu: int, memory: int
) -> None:
    """Where every node has every scored resource (cpu and memory: the usual cluster), the
    vectorised scores take a path without per-node masks (`_balanced_pair`,
    `_shares_everywhere`); it must give what the node-by-node scores give, fractions capped
    at 1 (requests above the allocatable) included."""
    from batchsched.plugins.noderesources.balanced_allocation import _balanced_pair
    from batchsched.plugins.noderesources.fit import STRATEGIES

    c = cycle([{"cpu": a, "memory": b} for a, b in nodes], {"cpu": cpu, "memory": memory})
    resources = (ScoredResource("cpu", 3), ScoredResource("memory", 1))
    for nonzero in (False, True):
        use = all_rows(c, resources, nonzero)
        every = [one_row(c, r, resources, nonzero) for r in range(len(nodes))]
        assert all(len(u) == 2 for u in every)
        assert np.array_equal(_balanced_pair(use), [balanced_node(u) for u in every])
        for vectorised, one_node in [*STRATEGIES.values(), (balanced, balanced_node)]:
            expected = vectorised(use, len(nodes))
            assert np.array_equal(expected, [one_node(u) for u in every]), vectorised.__name__
