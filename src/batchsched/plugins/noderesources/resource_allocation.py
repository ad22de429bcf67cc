"""What the resource scores read of a node: requested and allocatable per scored resource.

As kube-scheduler's resourceAllocationScorer: the pod's request is added to what the node's
pods request; a resource the node lacks, or an extended resource the pod does not ask for,
is left out of that node's score. NodeResourcesFit's strategies count cpu and memory with the
non-zero defaults; BalancedAllocation counts requests as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from batchsched.framework.interface import MAX_NODE_SCORE, Cycle, IndexArray, RowScore
from batchsched.framework.signature import nonzero_of
from batchsched.objects.quantity import CPU, MEMORY, PODS
from batchsched.plugins.args import ArgsReader
from batchsched.state.nodes import IntArray
from batchsched.state.resources import Demand

FloatArray = npt.NDArray[np.float64]
Rows = IndexArray | slice

_NATIVE = frozenset({CPU, MEMORY, "ephemeral-storage"})
_KNOWN_LIMIT = 4096
T = TypeVar("T")
DEFAULT_RESOURCES: list[dict[str, Any]] = [
    {"name": CPU, "weight": 1},
    {"name": MEMORY, "weight": 1},
]


@dataclass(frozen=True, slots=True)
class ScoredResource:
    name: str
    weight: int


def read_resources(reader: ArgsReader, key: str, high: int) -> tuple[ScoredResource, ...]:
    """A `resources` list of {name, weight}: names unique, weights 1..`high`."""
    raw = reader.get(key, list, DEFAULT_RESOURCES)
    out: list[ScoredResource] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise reader.fail(f"{key}[{i}]", "needs a name")
        weight = reader.integer_at(f"{key}[{i}].weight", item.get("weight", 1), 1, high)
        if any(r.name == item["name"] for r in out):
            raise reader.fail(f"{key}[{i}].name", f"{item['name']!r} is listed twice")
        out.append(ScoredResource(item["name"], weight))
    if not out:
        raise reader.fail(key, "must name at least one resource")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Column:
    """One scored resource as this pod sees it."""

    col: int
    request: int  # the pod's request (with the non-zero default, where that counts)
    with_gap: bool  # the node's pods count with their non-zero defaults too
    weight: int


class ByDemand(Generic[T]):
    """Values derived from a pod's demand (and a few facts besides), remembered against the
    Demand object: pods with equal requests share it (`ClusterState.demand`), so a stream of
    like pods derives each value once. The object is kept with its value, so its id is never
    reused while remembered."""

    def __init__(self) -> None:
        self._known: dict[Hashable, tuple[Demand, T]] = {}
        # The last answer, asked again at once for the next pod of a stream of like pods.
        self._last: tuple[Demand, Hashable, T] | None = None

    def get(self, demand: Demand, also: Hashable, derive: Callable[[], T]) -> T:
        last = self._last
        if last is not None and last[0] is demand and last[1] == also:
            return last[2]
        key = (id(demand), also)
        found = self._known.get(key)
        if found is not None and found[0] is demand:
            value = found[1]
        else:
            value = derive()
            if len(self._known) >= _KNOWN_LIMIT:
                self._known.clear()
            self._known[key] = (demand, value)
        self._last = (demand, also, value)
        return value


class Columns:
    """The resources that enter a pod's scores, in configuration order: a resource no node
    has, `pods`, or an extended resource the pod does not use says nothing. Remembered per
    demand, as a stream of like pods asks for the same."""

    def __init__(self, resources: tuple[ScoredResource, ...], nonzero: bool) -> None:
        self.resources = resources
        self.nonzero = nonzero
        self._known: ByDemand[list[Column]] = ByDemand()

    def __call__(self, cycle: Cycle) -> list[Column]:
        pod_nonzero = nonzero_of(cycle.pod) if self.nonzero else None
        also = (len(cycle.state.nodes.resources), pod_nonzero)
        return self._known.get(cycle.demand, also, lambda: self._columns(cycle, pod_nonzero))

    def _columns(self, cycle: Cycle, pod_nonzero: tuple[int, int] | None) -> list[Column]:
        state = cycle.state
        asked = dict(zip(cycle.demand.cols.tolist(), cycle.demand.amounts.tolist(), strict=True))
        out = []
        for resource in self.resources:
            col = state.nodes.resources.get(resource.name)
            if col is None or resource.name == PODS:
                continue
            request = asked.get(col, 0)
            if resource.name not in _NATIVE and request == 0:
                continue
            with_gap = pod_nonzero is not None and col < 2  # cpu and memory: columns 0 and 1
            if pod_nonzero is not None and with_gap:
                request = pod_nonzero[col]
            out.append(Column(col, request, with_gap, resource.weight))
        return out


@dataclass(frozen=True, slots=True)
class Usage:
    """Per scored resource (in configuration order), one value per node row."""

    requested: list[FloatArray]
    allocatable: list[FloatArray]  # 0 where the node lacks the resource: left out there
    weights: list[int]


def usage(cycle: Cycle, rows: Rows, cols: list[Column]) -> Usage:
    """Requested (with the pod) and allocatable per resource on `rows`.

    Float64 holds every amount exactly (they stay far below 2**53), and lets the strategies
    divide without overflow.
    """
    state = cycle.state
    out = Usage([], [], [])
    for c in cols:
        alloc = state.nodes.allocatable[rows, c.col].astype(np.float64)
        requested = alloc - cycle.free[rows, c.col] + c.request
        if c.with_gap:
            requested += state.nodes.nonzero_gap[rows, c.col]
        out.requested.append(requested)
        out.allocatable.append(alloc)
        out.weights.append(c.weight)
    return out


# One node's usage: (requested, allocatable, weight) per resource the node has.
NodeUsage = list[tuple[int, int, int]]


def node_usage(cycle: Cycle, row: int, cols: list[Column]) -> NodeUsage:
    """`usage` for one node, in Python integers."""
    allocatable, free, gap = (
        cycle.state.nodes.allocatable,
        cycle.free,
        cycle.state.nodes.nonzero_gap,
    )
    out = []
    for c in cols:
        alloc = allocatable.item(row, c.col)
        if alloc > 0:
            requested = alloc - free.item(row, c.col) + c.request
            if c.with_gap:
                requested += gap.item(row, c.col)
            out.append((requested, alloc, c.weight))
    return out


# Refreshing a cached placement rechecking a few rows (usually the one the last pod went to)
# is cheaper node by node in Python than through NumPy's per-call overhead.
NODE_BY_NODE = 8


def score_rows(
    cycle: Cycle,
    rows: IndexArray,
    cols: list[Column],
    vectorised: Callable[[Usage, int], IntArray],
    one_node: Callable[[NodeUsage], int],
) -> IntArray:
    """Scores of `rows` by `vectorised`, or `one_node` per node when they are few (the two
    agree exactly: tests/unit/plugins/noderesources check it)."""
    if rows.shape[0] > NODE_BY_NODE:
        return vectorised(usage(cycle, rows, cols), rows.shape[0])
    score = row_score(cycle, cols, one_node)
    return np.array([score(row) for row in rows.tolist()], dtype=np.int64)


def row_score(cycle: Cycle, cols: list[Column], one_node: Callable[[NodeUsage], int]) -> RowScore:
    """`one_node`'s score of one row at a time (a row-local plugin's `row_score`)."""
    return lambda row: one_node(node_usage(cycle, row, cols))


def shares(use: Usage, rows: int, part: Callable[[FloatArray, FloatArray], FloatArray]) -> IntArray:
    """The weighted mean over resources of ⌊100·part(requested, allocatable)/allocatable⌋,
    over the resources each node has, in integers as upstream."""
    if use.allocatable and all(bool((alloc > 0).all()) for alloc in use.allocatable):
        return _shares_everywhere(use, part)
    total = np.zeros(rows, dtype=np.float64)
    weight_sum = np.zeros(rows, dtype=np.float64)
    for requested, alloc, weight in zip(use.requested, use.allocatable, use.weights, strict=True):
        has = alloc > 0
        score = np.floor(part(requested, alloc) * MAX_NODE_SCORE / np.where(has, alloc, np.inf))
        total += score * weight
        weight_sum += has * weight
    return (total // np.maximum(weight_sum, 1)).astype(np.int64)


def _shares_everywhere(
    use: Usage, part: Callable[[FloatArray, FloatArray], FloatArray]
) -> IntArray:
    """`shares` where every node has every resource: the same float operations without the
    per-node masks (a gang search scores a few hundred rows at a time thousands of times)."""
    total: FloatArray | None = None
    for requested, alloc, weight in zip(use.requested, use.allocatable, use.weights, strict=True):
        score = np.floor(part(requested, alloc) * MAX_NODE_SCORE / alloc) * weight
        total = score if total is None else total + score
    assert total is not None  # at least one resource
    return (total // sum(use.weights)).astype(np.int64)


def node_shares(use: NodeUsage, part: Callable[[int, int], int]) -> int:
    """`shares` for one node."""
    weight_sum = total = 0
    for q, a, w in use:
        weight_sum += w
        total += part(q, a) * MAX_NODE_SCORE // a * w
    return total // weight_sum if weight_sum else 0
