"""NodeResourcesFit (Filter, Score): the pod's requests must fit every node resource.

Scoring strategies, as in NodeResourcesFitArgs `scoringStrategy`: LeastAllocated (spread,
the default) and MostAllocated (bin packing, usually wanted for GPUs), each a weighted mean
over the configured resources of an integer 0..100 score, with kube-scheduler's rounding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.objects.quantity import CPU, MEMORY, PODS
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.base import (
    Cycle,
    FilterPlugin,
    IndexArray,
    Rejection,
    ScorePlugin,
)
from batchsched.state.cluster import BoolArray, IntArray

STRATEGIES = ("LeastAllocated", "MostAllocated")
MAX_SCORE = 100


def insufficient_reason(resource: str) -> str:
    return "Too many pods" if resource == PODS else f"Insufficient {resource}"


class NodeResourcesFit(FilterPlugin, ScorePlugin):
    name = "NodeResourcesFit"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(self.name, args, ("scoringStrategy", "ignoredResources"))
        strategy = reader.get("scoringStrategy", dict, {})
        sreader = ArgsReader(f"{self.name} scoringStrategy", strategy, ("type", "resources"))
        self.strategy = sreader.get("type", str, "LeastAllocated")
        if self.strategy not in STRATEGIES:
            raise sreader.fail("type", f"{self.strategy!r} is not one of {', '.join(STRATEGIES)}")
        resources = sreader.get(
            "resources", list, [{"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1}]
        )
        self.weights: dict[str, int] = {}
        for i, item in enumerate(resources):
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise sreader.fail(f"resources[{i}]", "needs a name")
            weight = item.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                raise sreader.fail(f"resources[{i}].weight", f"must be 1..100, got {weight!r}")
            self.weights[item["name"]] = weight
        if not self.weights:
            raise sreader.fail("resources", "must name at least one resource")
        ignored = reader.get("ignoredResources", list, [])
        self.ignored = frozenset(str(r) for r in ignored)

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        demand = cycle.demand
        names = cycle.state.resources.names
        rows = np.flatnonzero(candidates)
        if rows.size == 0:
            return []
        room = cycle.free[np.ix_(rows, demand.cols)]
        short = room < demand.amounts
        if not short.any():
            return []
        rejections = []
        for j, col in enumerate(demand.cols):
            if names[col] in self.ignored or not short[:, j].any():
                continue
            mask = np.zeros(candidates.shape[0], dtype=np.bool_)
            mask[rows[short[:, j]]] = True
            rejections.append(Rejection(insufficient_reason(names[col]), mask, resolvable=True))
        return rejections

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        state = cycle.state
        total = np.zeros(nodes.shape[0], dtype=np.int64)
        weight_sum = 0
        for resource, weight in self.weights.items():
            col = state.resources.get(resource)
            weight_sum += weight
            if col is None:
                continue
            alloc = state.allocatable[nodes, col]
            request = int(cycle.demand.amounts[cycle.demand.cols == col].sum())
            free_after = cycle.free[nodes, col] - request
            safe = np.where(alloc > 0, alloc, 1)
            if self.strategy == "LeastAllocated":
                per = np.where(alloc > 0, np.clip(free_after, 0, None) * MAX_SCORE // safe, 0)
            else:
                used_after = alloc - free_after
                per = np.where(alloc > 0, np.clip(used_after, 0, alloc) * MAX_SCORE // safe, 0)
            total += per * weight
        return total // max(weight_sum, 1)
