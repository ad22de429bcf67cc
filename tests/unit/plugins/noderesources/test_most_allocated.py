from __future__ import annotations

from batchsched.objects.records import Pod
from batchsched.plugins.noderesources.most_allocated import most_allocated, most_allocated_node
from tests.unit.plugins.noderesources.helpers import all_rows, cycle, one_row


def test_score_is_the_weighted_mean_of_use() -> None:
    # cpu 3000/4000 -> 75, memory 5000/10000 -> 50: 62; on the bigger node 50 and 50.
    c = cycle(
        [{"cpu": 4000, "memory": 10000}, {"cpu": 6000, "memory": 10000}],
        {"cpu": 3000, "memory": 5000},
    )
    assert most_allocated(all_rows(c), 2).tolist() == [62, 50]
    assert [most_allocated_node(one_row(c, r)) for r in (0, 1)] == [62, 50]


def test_use_is_capped_at_the_node_and_counts_the_non_zero_defaults() -> None:
    # A bound pod that requests nothing counts 100m cpu and 200Mi memory when scoring.
    idle = Pod("ns", "idle", requests={"pods": 1})
    mi = 2**20
    c = cycle([{"cpu": 1000, "memory": 1000 * mi}], {"cpu": 2000, "memory": 100 * mi}, [(0, idle)])
    # cpu: min(2100, 1000) -> 100; memory: 300Mi of 1000Mi -> 30.
    assert most_allocated(all_rows(c, nonzero=True), 1).tolist() == [65]
    assert most_allocated_node(one_row(c, 0, nonzero=True)) == 65
    assert most_allocated(all_rows(c), 1).tolist() == [55]  # requests as they are: 100, 10
