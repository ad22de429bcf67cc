"""NodeResourcesBalancedAllocation (Score): favour nodes whose resources would be used evenly.

Name: NodeResourcesBalancedAllocation. Extension points: Score (row-local).

Per node, the fraction of each configured resource (args `resources`, cpu and memory by
default, weights must be 1) that would be requested with the pod, capped at 1; the score is
100·(1 − their standard deviation), truncated, as kube-scheduler computes it. Requests count
as they are (no non-zero defaults), and a pod that requests none of the resources is not
scored by this plugin (kube-scheduler skips best-effort pods so they do not pile up).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from batchsched.framework.interface import (
    MAX_NODE_SCORE,
    Cycle,
    IndexArray,
    RowLocalPlugin,
    RowScore,
    ScorePlugin,
)
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.noderesources.resource_allocation import (
    Columns,
    FloatArray,
    NodeUsage,
    Usage,
    read_resources,
    row_score,
    score_rows,
    usage,
)
from batchsched.state.nodes import BoolArray, IntArray


def balanced(use: Usage, rows: int) -> IntArray:
    """100·(1 − std of the capped fractions), over the resources each node has."""
    if len(use.allocatable) == 2 and all(bool((alloc > 0).all()) for alloc in use.allocatable):
        return _balanced_pair(use)
    fractions: list[FloatArray] = []
    present: list[BoolArray] = []
    for requested, alloc in zip(use.requested, use.allocatable, strict=True):
        has = alloc > 0
        fractions.append(np.where(has, np.minimum(requested / np.where(has, alloc, 1), 1.0), 0.0))
        present.append(has)
    if not fractions:
        return np.full(rows, MAX_NODE_SCORE, dtype=np.int64)
    count = np.sum(present, axis=0)
    total = np.zeros(rows, dtype=np.float64)
    for fraction in fractions:
        total += fraction
    mean = total / np.maximum(count, 1)
    spread = np.zeros(rows, dtype=np.float64)
    highest = np.zeros(rows, dtype=np.float64)
    lowest = np.ones(rows, dtype=np.float64)
    for fraction, has in zip(fractions, present, strict=True):
        spread += np.where(has, (fraction - mean) ** 2, 0.0)
        highest = np.where(has, np.maximum(highest, fraction), highest)
        lowest = np.where(has, np.minimum(lowest, fraction), lowest)
    # Two resources (the usual case): half their difference, as upstream writes it.
    std = np.where(
        count == 2,
        (highest - lowest) / 2,
        np.where(count > 2, np.sqrt(spread / np.maximum(count, 1)), 0.0),
    )
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def _balanced_pair(use: Usage) -> IntArray:
    """`balanced` where every node has both resources (cpu and memory, the usual case), in
    the same float operations without the per-node masks: a gang search scores a few
    hundred rows at a time thousands of times, where the masks cost more than the rows."""
    (requested0, requested1), (alloc0, alloc1) = use.requested, use.allocatable
    first = np.minimum(requested0 / alloc0, 1.0)
    second = np.minimum(requested1 / alloc1, 1.0)
    # As the general loop's running extremes, from 0 and from 1 (a fraction is at most 1).
    highest = np.maximum(np.maximum(first, 0.0), second)
    lowest = np.minimum(first, second)
    return ((1 - (highest - lowest) / 2) * MAX_NODE_SCORE).astype(np.int64)


def balanced_node(use: NodeUsage) -> int:
    """`balanced` for one node."""
    fractions = [min(q / a, 1.0) for q, a, _ in use]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class BalancedAllocation(ScorePlugin, RowLocalPlugin):
    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(self.name, args, ("resources",))
        self.resources = read_resources(reader, "resources", high=1)
        self._columns = Columns(self.resources, nonzero=False)
        self._names = frozenset(r.name for r in self.resources)

    def uniform(self, cycle: Cycle) -> bool:
        """A pod that requests none of the resources: every node scores alike (0)."""
        names = cycle.state.nodes.resources.names
        return not any(names[col] in self._names for col in cycle.demand.cols.tolist())

    def score(self, cycle: Cycle, feasible: BoolArray) -> IntArray:
        rows = feasible.shape[0]
        if self.uniform(cycle):
            return np.zeros(rows, dtype=np.int64)
        return balanced(usage(cycle, slice(0, rows), self._columns(cycle)), rows)

    def score_rows(self, cycle: Cycle, rows: IndexArray) -> IntArray:
        if self.uniform(cycle):
            return np.zeros(rows.shape[0], dtype=np.int64)
        return score_rows(cycle, rows, self._columns(cycle), balanced, balanced_node)

    def row_score(self, cycle: Cycle) -> RowScore:
        if self.uniform(cycle):
            return lambda row: 0
        return row_score(cycle, self._columns(cycle), balanced_node)
