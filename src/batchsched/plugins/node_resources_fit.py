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
from batchsched.objects.records import Pod
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.base import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    QueueingHint,
    Rejection,
    RowLocalPlugin,
    ScorePlugin,
)
from batchsched.state.cluster import BoolArray, IntArray

STRATEGIES = ("LeastAllocated", "MostAllocated")
MAX_SCORE = 100


def is_extended(resource: str) -> bool:
    """An extended resource (`domain/name` outside kubernetes.io): the only kind that
    `ignoredResources` and `ignoredResourceGroups` can skip, as upstream, so cpu, memory and
    pods are always checked."""
    domain, slash, _ = resource.partition("/")
    return bool(slash) and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def insufficient_reason(resource: str) -> str:
    return "Too many pods" if resource == PODS else f"Insufficient {resource}"


class NodeResourcesFit(FilterPlugin, ScorePlugin, RowLocalPlugin):
    name = "NodeResourcesFit"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(
            self.name, args, ("scoringStrategy", "ignoredResources", "ignoredResourceGroups")
        )
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
        groups = [str(g) for g in reader.get("ignoredResourceGroups", list, [])]
        for i, group in enumerate(groups):
            if "/" in group:
                raise reader.fail(f"ignoredResourceGroups[{i}]", f"{group!r} must not contain '/'")
        self.ignored_groups = frozenset(groups)

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return {ClusterEvent.NODE: None, ClusterEvent.NODE_ROOM: self._fits_a_changed_row}

    def _fits_a_changed_row(self, change: ClusterChange, pod: Pod) -> bool:
        """Whether the pod now fits the free room of a node whose room changed.

        The state's own room is checked: what nominations of others hold only lowers it, so
        a pod that does not fit here fits nowhere among these rows.
        """
        state = change.state
        demand = state.demand(pod)
        ok = np.ones(change.rows.shape[0], dtype=np.bool_)
        names = state.resources.names
        for col, amount in zip(demand.cols.tolist(), demand.amounts.tolist(), strict=True):
            if names[col] not in self.ignored:
                ok &= state.free[change.rows, col] >= amount
        return bool(ok.any())

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        names = cycle.state.resources.names
        rejections = []
        for col, amount in self._checked(cycle):
            short = cycle.free[:, col] < amount
            short &= candidates
            if short.any():
                rejections.append(
                    Rejection(insufficient_reason(names[col]), short, resolvable=True)
                )
        return rejections

    def fits_rows(self, cycle: Cycle, rows: IndexArray) -> BoolArray:
        ok = np.ones(rows.shape[0], dtype=np.bool_)
        for col, amount in self._checked(cycle):
            ok &= cycle.free[rows, col] >= amount
        return ok

    def _checked(self, cycle: Cycle) -> list[tuple[int, int]]:
        names = cycle.state.resources.names
        demand = cycle.demand
        return [
            (col, amount)
            for col, amount in zip(demand.cols.tolist(), demand.amounts.tolist(), strict=True)
            if not self._ignores(names[col])
        ]

    def _ignores(self, resource: str) -> bool:
        if not is_extended(resource):
            return False
        return resource in self.ignored or resource.split("/", 1)[0] in self.ignored_groups

    def score(self, cycle: Cycle, feasible: BoolArray) -> IntArray:
        rows = feasible.shape[0]
        return self._score(cycle, cycle.free[:rows], cycle.state.allocatable[:rows])

    def score_rows(self, cycle: Cycle, rows: IndexArray) -> IntArray:
        return self._score(cycle, cycle.free[rows], cycle.state.allocatable[rows])

    def _score(self, cycle: Cycle, free: IntArray, allocatable: IntArray) -> IntArray:
        state = cycle.state
        requested = dict(
            zip(cycle.demand.cols.tolist(), cycle.demand.amounts.tolist(), strict=True)
        )
        total = np.zeros(free.shape[0], dtype=np.float64)
        weight_sum = 0
        for resource, weight in self.weights.items():
            weight_sum += weight
            col = state.resources.get(resource)
            if col is None:
                continue
            alloc = allocatable[:, col]
            free_after = free[:, col] - requested.get(col, 0)
            if self.strategy == "MostAllocated":
                free_after = alloc - free_after  # used after placing the pod
            bounded = np.minimum(np.maximum(free_after, 0), alloc)
            # Exact integer floor division in float64 (numerators stay far below 2**53); a
            # resource the node lacks scores 0, by dividing by infinity.
            per = np.floor(bounded * float(MAX_SCORE) / np.where(alloc > 0, alloc, np.inf))
            total += per * weight
        return (total // max(weight_sum, 1)).astype(np.int64)
