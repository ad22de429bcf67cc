"""NodeResourcesFit (Filter, Score): the pod's requests must fit every node resource.

Name: NodeResourcesFit. Extension points: Filter, Score (both row-local).

Scoring strategies, as in NodeResourcesFitArgs `scoringStrategy`: LeastAllocated (spread;
least_allocated.py) and MostAllocated (bin packing; most_allocated.py), each a weighted mean
over the configured resources of an integer 0..100 score, with cpu and memory counted with
kube-scheduler's non-zero defaults (resource_allocation.py). Without a `scoringStrategy`,
batchsched packs with GPUs weighing most (GPU_PACKING), where kube-scheduler spreads.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    PodsHint,
    QueueingHint,
    Rejection,
    RowCheck,
    RowLocalPlugin,
    RowScore,
    ScorePlugin,
)
from batchsched.objects.quantity import PODS
from batchsched.objects.records import Pod
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.noderesources.least_allocated import (
    least_allocated,
    least_allocated_node,
)
from batchsched.plugins.noderesources.most_allocated import most_allocated, most_allocated_node
from batchsched.plugins.noderesources.resource_allocation import (
    NODE_BY_NODE,
    ByDemand,
    Columns,
    NodeUsage,
    Usage,
    read_resources,
    row_score,
    score_rows,
    usage,
)
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.resources import Demand

# Each strategy scores many nodes at once, or one node (see resource_allocation.score_rows).
STRATEGIES: dict[str, tuple[Callable[[Usage, int], IntArray], Callable[[NodeUsage], int]]] = {
    "LeastAllocated": (least_allocated, least_allocated_node),
    "MostAllocated": (most_allocated, most_allocated_node),
}

# What a pod needs of a resource it does not ask for, or that this plugin ignores: every
# node's room passes, even where more is requested than allocatable (room below zero).
_NEEDS_NOTHING = np.iinfo(np.int64).min
_PODS_KNOWN = 4096  # waiting pods whose rows the room hint keeps

# The scoring when none is configured. kube-scheduler's LeastAllocated spreads pods, so on a
# GPU cluster small jobs take a share of every node and a job needing a whole node waits with
# enough GPUs free in total; packing fills partly used nodes first, GPUs before cpu and
# memory, and measured better on the simulator (docs/configuration.md).
GPU_PACKING: dict[str, Any] = {
    "type": "MostAllocated",
    "resources": [
        {"name": "nvidia.com/gpu", "weight": 10},
        {"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 1},
    ],
}


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
        strategy = reader.get("scoringStrategy", dict, GPU_PACKING)
        sreader = ArgsReader(self.name, strategy, ("type", "resources"), "scoringStrategy")
        self.strategy = sreader.get("type", str, "LeastAllocated")
        if self.strategy not in STRATEGIES:
            raise sreader.fail("type", f"{self.strategy!r} is not one of {', '.join(STRATEGIES)}")
        self._vectorised, self._one_node = STRATEGIES[self.strategy]
        self.resources = read_resources(sreader, "resources", high=100)
        self._columns = Columns(self.resources, nonzero=True)
        self.ignored = frozenset(reader.strings("ignoredResources"))
        groups = reader.strings("ignoredResourceGroups")
        for i, group in enumerate(groups):
            if "/" in group:
                raise reader.fail(f"ignoredResourceGroups[{i}]", f"{group!r} must not contain '/'")
        self.ignored_groups = frozenset(groups)
        self._checks: ByDemand[list[tuple[int, int]]] = ByDemand()
        # The room hint's rows of checked amounts (`_needs`) per waiting pod, for one width:
        # by key, for the version kept with its row (a new version is a new object);
        # forgotten when the pod leaves.
        self._pod_needs: dict[str, tuple[Pod, IntArray, bytes]] = {}
        self._pod_needs_width = 0
        # Per needs row (its bytes): the rows where it fits, for the room as of `_fits_stamp`.
        self._fits: dict[bytes, BoolArray | None] = {}
        self._fits_of: ClusterState | None = None
        self._fits_stamp: tuple[int, int, int, int] = (-1, -1, -1, -1)

    def forget_pods(self, keys: Collection[str]) -> None:
        for key in keys:
            self._pod_needs.pop(key, None)

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return {
            ClusterEvent.NODE: None,
            ClusterEvent.NODE_ROOM: PodsHint(self._fit_a_changed_row),
        }

    def _fit_a_changed_row(self, change: ClusterChange, pods: Sequence[Pod]) -> list[bool]:
        """Per pod, whether it now fits the free room of a node whose room changed.

        The state's own room is checked: what nominations of others hold only lowers it, so
        a pod that does not fit here fits nowhere among these rows. A refresh asks this for
        every change since a waiting group's mark (hundreds, each of thousands of rows, at
        5000 nodes) and for the few requests of the waiting pods: the rows where a request
        fits are found once over every node while the room stands still (`_fitting`), and
        each request asks only whether one of them is among the changed rows.
        """
        state = change.state
        width = state.nodes.free.shape[1]
        if width != self._pod_needs_width or len(self._pod_needs) >= _PODS_KNOWN:
            self._pod_needs = {}
            self._pod_needs_width = width
        known = self._pod_needs
        changed = change.rows
        answers: list[bool] = []
        by_needs: dict[bytes, bool] = {}
        for pod in pods:  # asked each refresh for the same waiting pods: looked up, mostly
            found = known.get(pod.key)
            if found is None or found[0] is not pod:
                needs = self._needs(state, state.pods.demand(pod), width)
                found = known[pod.key] = (pod, needs, needs.tobytes())
            answer = by_needs.get(found[2])
            if answer is None:
                fitting = self._fitting(state, *found[1:])
                answer = fitting is not None and bool(fitting[changed].any())
                by_needs[found[2]] = answer
            answers.append(answer)
        return answers

    def _fitting(self, state: ClusterState, needs: IntArray, key: bytes) -> BoolArray | None:
        """The rows whose free room fits `needs` (None: no row), kept per needs while the
        state's room stands still: every change of it is logged (`change_mark` moves), and
        the columns left to DRA follow the node generation."""
        stamp = (
            state.nodes.change_mark(),
            state.nodes.rows,
            needs.shape[0],
            state.nodes.generation,
        )
        if self._fits_of is not state or self._fits_stamp != stamp:
            self._fits_of, self._fits_stamp, self._fits = state, stamp, {}
        if key in self._fits:
            return self._fits[key]
        fits = state.nodes.free[: state.nodes.rows] >= needs
        if state.device_class_resources:
            names = state.nodes.resources.names
            for col in range(needs.shape[0]):
                if names[col] in state.device_class_resources:
                    fits[:, col] |= state.nodes.allocatable[: state.nodes.rows, col] == 0
        mask: BoolArray = np.logical_and.reduce(fits, axis=1)
        found = self._fits[key] = mask if mask.any() else None
        return found

    def _needs(self, state: ClusterState, demand: Demand, width: int) -> IntArray:
        """The demand's checked amounts as a row of `width` resources; a resource it does not
        check needs less than any node can lack."""
        needs = np.full(width, _NEEDS_NOTHING, dtype=np.int64)
        for col, amount in self._checks_of(state, demand):
            needs[col] = amount
        return needs

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        names = cycle.state.nodes.resources.names
        rejections = []
        for col, amount in self._checked(cycle):
            short = cycle.free[:, col] < amount
            short &= candidates
            if names[col] in cycle.state.device_class_resources:
                short &= self._not_left_to_dra(cycle, col, slice(0, short.shape[0]))
            if short.any():
                rejections.append(
                    Rejection(insufficient_reason(names[col]), short, resolvable=True)
                )
        return rejections

    def fits_rows(self, cycle: Cycle, rows: IndexArray) -> BoolArray:
        checked = self._checked(cycle)
        free = cycle.free
        mapped = cycle.state.device_class_resources
        names = cycle.state.nodes.resources.names
        if mapped and any(names[col] in mapped for col, _ in checked):
            ok = np.ones(rows.shape[0], dtype=np.bool_)
            for col, amount in checked:
                fits = free[rows, col] >= amount
                if names[col] in mapped:
                    fits |= ~self._not_left_to_dra(cycle, col, rows)
                ok &= fits
            return ok
        if rows.shape[0] <= NODE_BY_NODE:
            fits = _row_fits(free, checked)
            return np.array([fits(row) for row in rows.tolist()], dtype=np.bool_)
        ok = np.ones(rows.shape[0], dtype=np.bool_)
        for col, amount in checked:
            ok &= free[rows, col] >= amount
        return ok

    def row_check(self, cycle: Cycle) -> RowCheck | None:
        checked = self._checked(cycle)
        mapped = cycle.state.device_class_resources
        names = cycle.state.nodes.resources.names
        if mapped and any(names[col] in mapped for col, _ in checked):
            return super().row_check(cycle)
        return _row_fits(cycle.free, checked)

    @staticmethod
    def _not_left_to_dra(cycle: Cycle, col: int, rows: IndexArray | slice) -> BoolArray:
        """Nodes that advertise a resource a DeviceClass maps: checked here as any resource.
        Where allocatable has none of it, DynamicResources allocates devices instead
        (KEP-5004, upstream's fit check skips it there)."""
        return np.asarray(cycle.state.nodes.allocatable[rows, col] > 0)

    def _checked(self, cycle: Cycle) -> list[tuple[int, int]]:
        return self._checks_of(cycle.state, cycle.demand)

    def _checks_of(self, state: ClusterState, demand: Demand) -> list[tuple[int, int]]:
        """The (column, amount) pairs of the demand this plugin checks."""
        names = state.nodes.resources.names
        return self._checks.get(
            demand,
            None,
            lambda: [(col, amount) for col, amount in demand.key if not self._ignores(names[col])],
        )

    def _ignores(self, resource: str) -> bool:
        if not is_extended(resource):
            return False
        return resource in self.ignored or resource.split("/", 1)[0] in self.ignored_groups

    def score(self, cycle: Cycle, feasible: BoolArray) -> IntArray:
        rows = feasible.shape[0]
        return self._vectorised(usage(cycle, slice(0, rows), self._columns(cycle)), rows)

    def score_rows(self, cycle: Cycle, rows: IndexArray) -> IntArray:
        return score_rows(cycle, rows, self._columns(cycle), self._vectorised, self._one_node)

    def row_score(self, cycle: Cycle) -> RowScore:
        return row_score(cycle, self._columns(cycle), self._one_node)


def _row_fits(free: IntArray, checked: list[tuple[int, int]]) -> RowCheck:
    """Whether one row's room holds every checked request."""

    def fits(row: int) -> bool:
        for col, amount in checked:  # noqa: SIM110 (a loop is cheaper than all() over a generator)
            if free.item(row, col) < amount:
                return False
        return True

    return fits
