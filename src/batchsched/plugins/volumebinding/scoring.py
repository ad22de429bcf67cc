"""VolumeBinding's Score: upstream's StorageCapacityScoring (alpha and off in Kubernetes
1.33-1.36, beta and on by default from 1.37, which batchsched follows).

Only pods with unbound WaitForFirstConsumer claims are scored (for the others every node
scores 0, so the plugin is left out). On a feasible node the claims are grouped by storage
class as the binder would serve them there: if at least one gets an existing PV, each class
weighs its claims' summed requests against their PVs' summed capacities (claims to provision
are left out); otherwise each claim to provision whose driver publishes its capacity weighs
against the `capacity` of the CSIStorageCapacity that admits it (the first by
namespace/name; requests summed per class, the capacity not). Utilization is
requested * 100 // capacity, 100 when the capacity is 0 or smaller than the request; `shape`
maps it to a score (0..10, times 10) by linear interpolation between its points, flat beyond
the first and last; the node's score is the rounded mean over the classes.

The default shape, {0: 10, 100: 0}, favours the node where the volumes leave the most room,
as upstream's default (room to expand a local volume later); {0: 0, 100: 10} packs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.framework.interface import MAX_NODE_SCORE
from batchsched.objects.errors import shown
from batchsched.objects.volumes import PersistentVolumeClaim
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.volumebinding.capacity import CapacityIndex
from batchsched.plugins.volumebinding.matching import ClaimOptions, choose
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

MAX_UTILIZATION = 100
MAX_CUSTOM_SCORE = 10  # upstream's MaxCustomPriorityScore: shape scores are 0..10
Shape = tuple[tuple[int, int], ...]  # (utilization, score) points, utilization increasing
DEFAULT_SHAPE: Shape = ((0, MAX_CUSTOM_SCORE), (MAX_UTILIZATION, 0))
_INT64_MAX = 2**63 - 1


def read_shape(reader: ArgsReader) -> Shape:
    """VolumeBindingArgs `shape`, validated as upstream: at least one point, utilization
    0..100 strictly increasing, score 0..10 (a missing field reads as 0)."""
    raw = reader.args.get("shape")
    if raw is None:
        return DEFAULT_SHAPE
    if not isinstance(raw, list) or not raw:
        raise reader.fail("shape", f"must list at least one point, got {shown(raw)}")
    points: list[tuple[int, int]] = []
    for i, point in enumerate(raw):
        where = f"shape[{i}]"
        if not isinstance(point, Mapping):
            raise reader.fail(
                where, f"must be a mapping of utilization and score, got {shown(point)}"
            )
        unknown = sorted(str(k) for k in point if k not in ("utilization", "score"))
        if unknown:
            raise reader.fail(where, f"unknown keys {unknown} (known: utilization, score)")
        utilization = _point_field(reader, point, f"{where}.utilization", MAX_UTILIZATION)
        score = _point_field(reader, point, f"{where}.score", MAX_CUSTOM_SCORE)
        if points and utilization <= points[-1][0]:
            raise reader.fail(
                f"{where}.utilization",
                f"utilization values must be sorted in increasing order "
                f"({utilization} after {points[-1][0]})",
            )
        points.append((utilization, score))
    return tuple(points)


def _point_field(reader: ArgsReader, point: Mapping[str, Any], where: str, high: int) -> int:
    return reader.integer_at(where, point.get(where.rsplit(".", 1)[1], 0), 0, high)


def _interpolate(shape: Shape, utilization: int) -> int:
    """The shape's score at `utilization`, in integer arithmetic truncating toward zero as
    upstream's broken linear function does (a falling segment rounds up)."""
    for i, (u, s) in enumerate(shape):
        if utilization <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            rise = (s - s0) * (utilization - u0)
            step = abs(rise) // (u - u0)
            return s0 + (step if rise >= 0 else -step)
    return shape[-1][1]


class CapacityScorer:
    def __init__(self, shape: Shape) -> None:
        scale = MAX_NODE_SCORE // MAX_CUSTOM_SCORE
        scaled = tuple((u, s * scale) for u, s in shape)
        # Utilization is an integer 0..100: the function is a table.
        self._table = np.array(
            [_interpolate(scaled, p) for p in range(MAX_UTILIZATION + 1)], dtype=np.int64
        )

    def scores(
        self,
        state: ClusterState,
        capacity: CapacityIndex,
        found: Sequence[ClaimOptions],
        feasible: BoolArray,
    ) -> IntArray:
        """A score per node row (only rows in `feasible` are set) for the pod whose unbound
        claims have these options."""
        if len(found) == 1:
            return self._one_claim(state, capacity, found[0], feasible)
        return self._per_node(state, capacity, found, feasible)

    def _per_node(
        self,
        state: ClusterState,
        capacity: CapacityIndex,
        found: Sequence[ClaimOptions],
        feasible: BoolArray,
    ) -> IntArray:
        """Any number of claims: `choose` on each feasible node."""
        out = np.zeros(state.nodes.rows, dtype=np.int64)
        sizes = {option.claim.key: self._sizes(state, capacity, option.claim) for option in found}
        pvs = state.volumes.volumes
        for row in np.flatnonzero(feasible):
            chosen = choose(found, int(row))
            if chosen is None:
                continue
            static: dict[str, list[int]] = {}  # class -> [requested, capacity]
            dynamic: dict[str, list[int]] = {}
            for option in found:
                claim = option.claim
                name = chosen[claim.key]
                if name:
                    used = static.setdefault(claim.storage_class, [0, 0])
                    used[0] += claim.request
                    used[1] += pvs[name].capacity
                    continue
                size = sizes[claim.key]
                if size is not None and size[row] >= 0:
                    used = dynamic.setdefault(claim.storage_class, [0, 0])
                    used[0] += claim.request
                    used[1] = int(size[row])  # the class's room on the node, counted once
            out[row] = self._mean(static or dynamic)
        return out

    def _one_claim(
        self,
        state: ClusterState,
        capacity: CapacityIndex,
        option: ClaimOptions,
        feasible: BoolArray,
    ) -> IntArray:
        """The common case, whole columns at a time: each node's first PV (as `choose`
        takes it), else provisioning."""
        out = np.zeros(state.nodes.rows, dtype=np.int64)
        request = option.claim.request
        # Candidates are best first: writing them last to first leaves each node its best.
        first = np.full(state.nodes.rows, -1, dtype=np.int64)
        for index in range(len(option.volumes) - 1, -1, -1):
            first[option.volumes[index][1]] = index
        served = feasible & (first >= 0)
        if served.any():
            pvs = state.volumes.volumes
            sizes = np.array([pvs[name].capacity for name, _ in option.volumes], dtype=np.int64)
            out[served] = self._table[self._utilizations(request, sizes[first[served]])]
        rest = feasible & (first < 0) & option.provision
        room = self._sizes(state, capacity, option.claim) if rest.any() else None
        if room is not None:
            rows = rest & (room >= 0)
            out[rows] = self._table[self._utilizations(request, room[rows])]
        return out

    @classmethod
    def _utilizations(cls, requested: int, capacities: IntArray) -> IntArray:
        if requested * MAX_UTILIZATION > _INT64_MAX:  # beyond 92 PB: exact, one by one
            return np.array([cls._utilization(requested, int(c)) for c in capacities], np.int64)
        full = (capacities <= 0) | (requested > capacities)
        share = requested * MAX_UTILIZATION // np.maximum(capacities, 1)
        return np.where(full, MAX_UTILIZATION, share)

    @staticmethod
    def _sizes(
        state: ClusterState, capacity: CapacityIndex, claim: PersistentVolumeClaim
    ) -> IntArray | None:
        storage_class = state.volumes.classes.get(claim.storage_class)
        if storage_class is None:
            return None
        return capacity.sizes(state, storage_class, claim.request)

    @staticmethod
    def _utilization(requested: int, capacity: int) -> int:
        if capacity <= 0 or requested > capacity:
            return MAX_UTILIZATION
        return requested * MAX_UTILIZATION // capacity

    def _mean(self, classes: Mapping[str, list[int]]) -> int:
        if not classes:
            return 0
        total = sum(int(self._table[self._utilization(r, c)]) for r, c in classes.values())
        count = len(classes)
        return (2 * total + count) // (2 * count)  # rounded half up, as math.Round here
