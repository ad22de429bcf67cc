"""The pods running on candidate nodes as the planner sees them: their expected ends and
requests (docs/backfill.md). Kept per node row and refreshed only for the rows the state's
log says changed, so that planning again within a pass, or in the next one, reads only the
nodes whose pods came or went."""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from batchsched.objects.daemonset import is_daemonset_owned
from batchsched.objects.podgroup import group_key_of
from batchsched.objects.records import Pod
from batchsched.objects.runtime_bound import stated_runtime
from batchsched.plugins.backfill.planner import Endings, FloatArray, IntArray, Totals
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray


def bound_of(state: ClusterState, pod: Pod) -> int | None:
    """The pod's stated runtime in seconds (its own, else its PodGroup's); None: none."""
    key = group_key_of(pod)
    return stated_runtime(pod, state.groups.by_key.get(key) if key else None)


def _end_terms(state: ClusterState, pod: Pod) -> tuple[float, float]:
    """When a pod on a node is expected to be gone (seconds since the epoch), when that
    does not depend on the clock, else nan (a pod bound but not started yet: from now), and
    its bound: a leaving pod after its grace period, a running one at its start plus its
    bound; inf if it states no runtime."""
    if pod.deletion_timestamp is not None:
        return pod.deletion_timestamp.timestamp() + pod.termination_grace_period_seconds, 0.0
    bound = bound_of(state, pod)
    if bound is None:
        return math.inf, math.inf
    if pod.start_time is None:
        return math.nan, float(bound)
    return pod.start_time.timestamp() + bound, float(bound)


def row_content(state: ClusterState, row: int) -> Hashable:
    """What a plan reads of a node row: its free and allocatable room, per pod there its
    key, requests, end terms (nan as None: equal to itself) and whether a DaemonSet owns it,
    and the version of the PodGroups' stated runtimes (a holder's stay follows its group's).
    Equal at two moments: the row is as it was, whatever the log of changed rows says (a
    gang's attempt takes room there and gives it back, docs/backfill.md#rules)."""
    nodes = state.nodes
    pods = []
    for key, pod in sorted(nodes.pods_on[row].items()):
        fixed, bound = _end_terms(state, pod)
        end = None if math.isnan(fixed) else fixed
        pods.append((key, state.pods.demand(pod).key, end, bound, is_daemonset_owned(pod)))
    room = nodes.free[row].tobytes(), nodes.allocatable[row].tobytes()
    return room, tuple(pods), state.groups.runtime_version


@dataclass(frozen=True, slots=True)
class _RowPods:
    keys: tuple[str, ...]
    fixed: FloatArray  # end when known whatever the clock; nan: start unknown, from now
    bound: FloatArray
    requests: IntArray  # pods x resources
    ending: IntArray  # what the pods expected to end at all (a finite end) request in all
    total: IntArray  # what all the pods request
    lasting: bool  # whether one of them is expected to end never (states no runtime)
    daemons: BoolArray  # DaemonSet pods: they stay with the node, whoever else comes or goes


class Picture:
    """Per node row, its pods' end terms and requests, following the state's change log."""

    def __init__(self) -> None:
        self._rows: dict[int, _RowPods] = {}
        self._row_of: dict[str, int] = {}  # pod key -> the kept row it is in
        self._mark: int | None = None
        self._width = -1
        self._last: tuple[tuple[list[int], int | None], Endings] | None = None
        # Per row, `_RowPods.ending`, `total`, its pods' count and `lasting` of the kept rows
        # (`_known`), for `most_room` and `totals`.
        self._ending: IntArray = np.zeros((0, 0), dtype=np.int64)
        self._total: IntArray = np.zeros((0, 0), dtype=np.int64)
        self._count: IntArray = np.zeros(0, dtype=np.int64)
        self._lasting: BoolArray = np.zeros(0, dtype=np.bool_)
        self._known: BoolArray = np.zeros(0, dtype=np.bool_)

    def _follow(self, state: ClusterState) -> None:
        nodes = state.nodes
        width = nodes.free.shape[1]
        changed = None if self._mark is None else nodes.rows_changed_since(self._mark)
        if changed is None or width != self._width:
            self._rows.clear()
            self._row_of.clear()
            self._known[:] = False
            self.forget_last()
        else:
            for row in changed:
                self._drop(row)
        self._mark, self._width = nodes.change_mark(), width

    def forget_last(self) -> None:
        """The next `endings` reads the rows again."""
        self._last = None

    def _drop(self, row: int) -> None:
        self.forget_last()
        if row < self._known.shape[0]:
            self._known[row] = False
        kept = self._rows.pop(row, None)
        if kept is not None:
            for key in kept.keys:
                self._row_of.pop(key, None)

    def forget(self, keys: Collection[str]) -> None:
        """These pods left: the rows that hold them go (nothing keeps a gone pod's key)."""
        for key in keys:
            row = self._row_of.get(key)
            if row is not None:
                self._drop(row)

    def _row(self, state: ClusterState, row: int) -> _RowPods:
        found = self._rows.get(row)
        if found is None:
            pods = sorted(state.nodes.pods_on[row].items())
            width = state.nodes.free.shape[1]
            requests = np.zeros((len(pods), width), dtype=np.int64)
            fixed = np.empty(len(pods), dtype=np.float64)
            bound = np.empty(len(pods), dtype=np.float64)
            for i, (_, pod) in enumerate(pods):
                demand = state.pods.demand(pod)
                requests[i, demand.cols] = demand.amounts
                fixed[i], bound[i] = _end_terms(state, pod)
            ends = ~np.isinf(np.where(np.isnan(fixed), bound, fixed))
            ending = requests[ends].sum(axis=0)
            total = requests.sum(axis=0)
            daemons = np.fromiter(
                (is_daemonset_owned(pod) for _, pod in pods), np.bool_, count=len(pods)
            )
            keys = tuple(k for k, _ in pods)
            lasting = not ends.all()
            found = _RowPods(keys, fixed, bound, requests, ending, total, lasting, daemons)
            # A pod bound but not started yet is read again: its start is set on the same
            # object (the world's), which the log of changed rows does not see.
            if not np.isnan(fixed).any():
                self._rows[row] = found
                self._row_of.update((key, row) for key in found.keys)
        return found

    def staying(
        self, state: ClusterState, row: int, now: float, start: float | None, gone: Collection[str]
    ) -> tuple[IntArray, float]:
        """What the pods on `row` that are still there at `start` request in all: those
        expected to end after it, or, with no start, those not in `gone`; and when that may
        change with the clock (a pod not started yet is expected to end its bound from now,
        so it comes to stay past `start` once `start` minus its bound has passed)."""
        self._follow(state)
        part = self._row(state, row)
        changes = math.inf
        if start is None:
            stays = np.fromiter((k not in gone for k in part.keys), np.bool_, len(part.keys))
        else:
            unknown = np.isnan(part.fixed)
            stays = np.where(unknown, now + part.bound, part.fixed) > start
            if unknown.any() and (coming := unknown & ~stays).any():
                changes = float((start - part.bound[coming]).min())
        total: IntArray = part.requests[stays].sum(axis=0)
        return total, changes

    def most_room(self, state: ClusterState) -> IntArray:
        """The most room each node row has at any finite moment from now on: its free room
        and what the pods there expected to end at all (leaving, or stating a runtime)
        request (rows x resources)."""
        self._sum_rows(state)
        rows = state.nodes.rows
        return np.asarray(state.nodes.free[:rows] + self._ending[:rows], dtype=np.int64)

    def totals(self, state: ClusterState, rows: IntArray) -> Totals:
        """The pods on `rows` (as candidate indices 0..len-1) summed per node, as the
        planner's `Totals`: `endings` of the same rows summed, from sums kept per row."""
        self._sum_rows(state)
        free = state.nodes.free[rows]
        kept = [int(row) for row in rows.tolist()]

        def keys(i: int) -> tuple[str, ...]:
            return self._row(state, kept[i]).keys

        return Totals(
            free + self._ending[rows],
            free + self._total[rows],
            self._count[rows],
            bool(self._lasting[rows].any()),
            keys,
        )

    def _sum_rows(self, state: ClusterState) -> None:
        """Brings the per-row sums up to date: rows not kept (`_known`) are read again."""
        self._follow(state)
        nodes = state.nodes
        rows = nodes.rows
        if self._known.shape[0] < rows or self._ending.shape[1] != self._width:
            # Sized anew: rows kept before are read again once.
            size = nodes.free.shape[0]
            self._ending = np.zeros((size, self._width), dtype=np.int64)
            self._total = np.zeros((size, self._width), dtype=np.int64)
            self._count = np.zeros(size, dtype=np.int64)
            self._lasting = np.zeros(size, dtype=np.bool_)
            self._known = np.zeros(size, dtype=np.bool_)
        for row in np.flatnonzero(~self._known[:rows]).tolist():
            if nodes.by_row[row] is not None:
                part = self._row(state, row)
                self._ending[row] = part.ending
                self._total[row] = part.total
                self._count[row] = len(part.keys)
                self._lasting[row] = part.lasting
                self._known[row] = row in self._rows  # else read again (a pod not started)

    def last_end(self, state: ClusterState, row: int, now: float) -> float:
        """When the last pod on `row` is expected to be gone (inf: one states no runtime;
        -inf: the node has none), its DaemonSet pods aside: they run on every node for good,
        in the room the others leave, so they would make every node busy for good
        (docs/backfill.md, "Where other pods go")."""
        self._follow(state)
        part = self._row(state, row)
        others = ~part.daemons
        if not others.any():
            return -math.inf
        ends = np.where(np.isnan(part.fixed), now + part.bound, part.fixed)
        return float(ends[others].max())

    def endings(self, state: ClusterState, rows: list[int], now: datetime) -> Endings:
        """The pods on `rows` (in that order, as candidate indices 0..len-1). The last
        answer is given again while the rows and every row's pods are as they were (holders
        planned one after another read the same nodes); only when every pod there has
        started, so that the clock does not move their ends."""
        self._follow(state)
        key = (rows, self._mark)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        parts = [self._row(state, row) for row in rows]
        counts = np.fromiter((len(p.keys) for p in parts), dtype=np.intp, count=len(parts))
        node = np.repeat(np.arange(len(parts), dtype=np.intp), counts)
        width = state.nodes.free.shape[1]
        if not parts or not counts.any():
            empty = np.zeros(0, dtype=np.float64)
            return Endings(node, empty, np.zeros((0, width), dtype=np.int64), ())
        fixed = np.concatenate([p.fixed for p in parts])
        bound = np.concatenate([p.bound for p in parts])
        at = np.where(np.isnan(fixed), now.timestamp() + bound, fixed)
        requests = np.concatenate([p.requests for p in parts])
        keys = [k for p in parts for k in p.keys]
        found = Endings(node, at, requests, keys)
        # Only when every row's pods are kept (a pod not started yet is read again).
        self._last = (key, found) if all(row in self._rows for row in rows) else None
        return found


def with_nominated(
    state: ClusterState,
    rows: npt.NDArray[np.intp],
    free: IntArray,
    endings: Endings,
    nominated: Sequence[tuple[int, str]],
    now: datetime,
) -> tuple[IntArray, Endings]:
    """`free` and `endings` of the candidate `rows` with the pending pods nominated there
    (node row, pod key) that state a runtime counted as running from now for it: the room
    preemption frees on a node is the nominated pod's, as kube-scheduler counts a nominated
    pod's request on its node and Slurm's backfill a starting job until its time limit
    (docs/backfill.md#rules). A node nominated for a pod stating none is the caller's to
    leave out."""
    index = {row: i for i, row in enumerate(rows.tolist())}
    width = free.shape[1]
    pending = state.pods.pending
    node: list[int] = []
    at: list[float] = []
    requests: list[IntArray] = []
    keys: list[str] = []
    for row, key in sorted(nominated):
        i = index.get(row)
        pod = pending.get(key)
        if i is None or pod is None:
            continue
        demand = state.pods.demand(pod)
        request = np.zeros(width, dtype=np.int64)
        request[demand.cols] = demand.amounts
        bound = bound_of(state, pod)
        if bound is None:
            continue
        node.append(i)
        at.append(now.timestamp() + bound)
        requests.append(request)
        keys.append(key)
    if not node:
        return free, endings
    free = free.copy()
    np.subtract.at(free, np.asarray(node, dtype=np.intp), np.stack(requests))
    return free, Endings(
        np.concatenate([endings.node, np.asarray(node, dtype=np.intp)]),
        np.concatenate([endings.at, np.asarray(at, dtype=np.float64)]),
        np.concatenate([endings.requests, np.stack(requests)]),
        [*endings.keys, *keys],
    )
