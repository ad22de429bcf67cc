"""A row-local plugin's one-row answers (`row_check`, `row_score`, what a cached placement's
refresh of a few rows asks) agree with its answers over many rows at once."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from batchsched.framework.interface import Cycle, RowLocalPlugin
from batchsched.objects.records import HostPort, Pod
from batchsched.plugins.daemonsetpreemption.plugin import DaemonSetPreemption
from batchsched.plugins.nodeports.plugin import NodePorts
from batchsched.plugins.noderesources.balanced_allocation import BalancedAllocation
from batchsched.plugins.noderesources.fit import NodeResourcesFit
from tests.unit.plugins.noderesources.helpers import cycle

NODES = [
    {"cpu": 4000, "memory": 8 * 2**30, "nvidia.com/gpu": 8, "pods": 110},
    {"cpu": 8000, "memory": 4 * 2**30, "pods": 110},
    {"cpu": 2000, "memory": 16 * 2**30, "nvidia.com/gpu": 2, "pods": 110},
]
# Pods already bound, so rows differ in what is left (the first node nearly full).
BOUND = [
    (0, Pod("ns", "a", requests={"cpu": 3500, "memory": 2**30, "nvidia.com/gpu": 6})),
    (2, Pod("ns", "b", requests={"memory": 8 * 2**30})),
]
ROWS = np.arange(len(NODES), dtype=np.intp)
# Every row four times: more rows than the plugins answer one by one (NODE_BY_NODE), so the
# many-row answers below come from their NumPy paths.
MANY = np.tile(ROWS, 4)


def _agrees(plugin: RowLocalPlugin, c: Cycle, filters: bool, scores: bool) -> None:
    check = plugin.row_check(c)
    if filters:
        fits = plugin.fits_rows(c, MANY).tolist()
        assert [True if check is None else check(row) for row in MANY.tolist()] == fits
    if scores:
        score = plugin.row_score(c)
        assert [score(row) for row in MANY.tolist()] == plugin.score_rows(c, MANY).tolist()


@pytest.mark.parametrize("strategy", ["MostAllocated", "LeastAllocated"])
@pytest.mark.parametrize(
    "request_",
    [
        {"cpu": 500, "memory": 2**30},
        {"nvidia.com/gpu": 2},
        {"cpu": 1000, "nvidia.com/gpu": 1},
        {"memory": 10 * 2**30},
    ],
)
def test_fit_one_row_at_a_time_agrees(strategy: str, request_: dict[str, int]) -> None:
    resources = [{"name": "nvidia.com/gpu", "weight": 10}, {"name": "cpu", "weight": 1}]
    args = {"scoringStrategy": {"type": strategy, "resources": resources}}
    c = cycle(NODES, request_, BOUND)
    _agrees(NodeResourcesFit(args), c, filters=True, scores=True)


def test_balanced_one_row_at_a_time_agrees() -> None:
    for request_ in ({"cpu": 1500, "memory": 3 * 2**30}, {"nvidia.com/gpu": 1}):
        _agrees(BalancedAllocation(), cycle(NODES, request_, BOUND), filters=False, scores=True)


def test_daemonset_reservations_one_row_at_a_time() -> None:
    plugin = DaemonSetPreemption()
    c = cycle(NODES, {"cpu": 100}, BOUND)
    assert plugin.row_check(c) is None  # nothing reserved: every row passes
    c.state.reserve("n1", "ns/other", datetime(2026, 1, 1, tzinfo=UTC))
    check = plugin.row_check(c)
    assert check is not None
    assert [check(row) for row in ROWS.tolist()] == [True, False, True]
    _agrees(plugin, c, filters=True, scores=False)


def test_the_default_one_row_answer_asks_the_many_row_one() -> None:
    plugin = NodePorts()
    c = cycle(
        NODES, {"cpu": 100}, [(1, Pod("ns", "web", host_ports=(HostPort("0.0.0.0", "TCP", 80),)))]
    )
    c.pod.host_ports = (HostPort("0.0.0.0", "TCP", 80),)
    check = plugin.row_check(c)
    assert check is not None
    assert [check(row) for row in ROWS.tolist()] == [True, False, True]
    _agrees(plugin, c, filters=True, scores=False)
