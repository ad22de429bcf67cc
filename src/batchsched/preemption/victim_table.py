"""Bound pods of every node as padded NumPy arrays, for vectorised victim search.

Row r holds the pods bound to node row r in importance order (higher priority first, then
earlier start, then `namespace/name`), one slot per pod; empty slots have priority INT64 max
so they are never lower than a preemptor. With Queue objects, each slot also holds its pod's
leaf queue (interned), which priority preemption stays within (docs/queues.md#reclaim).
The table follows ClusterState's log of changed rows: each `sync` rebuilds only the rows that
changed since the last one, so a preemption cycle costs array work over the nodes, not Python
work over every pod in the cluster.
"""

from __future__ import annotations

import math
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np
import numpy.typing as npt

from batchsched.objects.records import Pod, PodDisruptionBudget
from batchsched.preemption.toleration_policy import scheduled_since
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.pdb_index import PdbIndex

FloatArray = npt.NDArray[np.float64]
AnyArray = npt.NDArray[Any]
EMPTY_PRIORITY = np.iinfo(np.int64).max
NO_CLASS = -1  # the pod names no PriorityClass
NO_QUEUE_ID = -1  # an empty slot, or queues not looked at (the cluster has no Queue objects)


def importance_key(pod: Pod) -> tuple[int, float, str]:
    """Most important first: higher priority, then earlier start (none: last), then name."""
    start = pod.start_time.timestamp() if pod.start_time is not None else math.inf
    return (-(pod.priority or 0), start, pod.key)


class VictimTable:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.slots = 0
        self.width = 0
        self.mark = state.nodes.change_mark()
        self.rows_built = 0  # rows below this were built (rows are only ever added)
        self.pods: list[list[Pod]] = []
        self.priority: IntArray = np.zeros((0, 0), dtype=np.int64)
        self.start: FloatArray = np.zeros((0, 0))  # seconds; inf when unknown
        self.since: FloatArray = np.zeros((0, 0))  # PodScheduled=True time; nan when none
        self.klass: npt.NDArray[np.int32] = np.zeros((0, 0), dtype=np.int32)
        self.terminating: BoolArray = np.zeros((0, 0), dtype=np.bool_)
        self.request: IntArray = np.zeros((0, 0, 0), dtype=np.int64)
        self.terminating_room: IntArray = np.zeros((0, 0), dtype=np.int64)
        self.class_names: list[str] = []
        self._class_ids: dict[str, int] = {}
        self.queue: npt.NDArray[np.int32] = np.zeros((0, 0), dtype=np.int32)  # leaf queue ids
        self._queue_ids: dict[str, int] = {}
        self._membership: tuple[int, int, int] | None = None  # what `queue` was read at
        self.membership_version = 0  # moves when every row's queues are read anew
        # PDB key -> slots holding pods it covers, for every PDB in the state; `_pdb_any`
        # is their union and `_row_pdbs[r]` the keys covering some pod on row r.
        self._pdb_masks: dict[str, BoolArray] = {}
        self._pdb_any: BoolArray = np.zeros((0, 0), dtype=np.bool_)
        self._row_pdbs: list[tuple[str, ...]] = []
        self._pdb_index: PdbIndex | None = None  # the state's index the masks follow

    # ---- keeping in step ---------------------------------------------------------------

    def sync(self) -> None:
        state = self.state
        rows = state.nodes.rows
        width = len(state.nodes.resources)
        if rows > self.priority.shape[0] or width != self.width:
            self._resize(rows, self.slots, width)
        log = state.nodes.rows_changed_since(self.mark)
        self.mark = state.nodes.change_mark()
        membership = state.membership_version() if state.queues else None
        if membership != self._membership:
            # Which queue a pod is in reads Queues, Namespaces and PodGroups, none of which
            # the log of changed rows shows: every row's queues are read again.
            self._membership = membership
            self.membership_version += 1
            log = None
        if log is None:
            changed = np.arange(rows)
        elif log or self.rows_built < rows:
            # A few rows mostly (one attempt's): sorted in Python, not by `np.unique`.
            changed = np.asarray(sorted({*log, *range(self.rows_built, rows)}), dtype=np.intp)
        else:
            return  # nothing changed: no array work over the rows
        if changed.size == 0:
            return
        needed = max(1, *(len(state.nodes.pods_on[int(r)]) for r in changed))
        if needed > self.slots:
            self._resize(self.priority.shape[0], max(needed, 2 * self.slots, 4), self.width)
        for r in changed:
            self._build_row(int(r))
        self.rows_built = rows
        self._refresh_pdb_masks(changed)

    def _resize(self, rows: int, slots: int, width: int) -> None:
        capacity = max(rows, self.priority.shape[0])
        slots = max(slots, self.slots)
        self.priority = _grow(self.priority, EMPTY_PRIORITY, (capacity, slots))
        self.start = _grow(self.start, math.inf, (capacity, slots))
        self.since = _grow(self.since, math.nan, (capacity, slots))
        self.klass = _grow(self.klass, NO_CLASS, (capacity, slots))
        self.queue = _grow(self.queue, NO_QUEUE_ID, (capacity, slots))
        self.terminating = _grow(self.terminating, False, (capacity, slots))
        # New resource columns are zero for every existing pod: a pod's demand interns its
        # resources before it is bound, so no bound pod requests a column added later.
        self.request = _grow(self.request, 0, (capacity, slots, width))
        self.terminating_room = _grow(self.terminating_room, 0, (capacity, width))
        self.pods.extend([] for _ in range(capacity - len(self.pods)))
        self.slots, self.width = slots, width
        self._row_pdbs.extend(() for _ in range(capacity - len(self._row_pdbs)))
        self._pdb_any = _grow(self._pdb_any, False, (capacity, slots))
        for key, mask in self._pdb_masks.items():
            self._pdb_masks[key] = _grow(mask, False, (capacity, slots))

    def _class_id(self, name: str) -> int:
        if not name:
            return NO_CLASS
        cid = self._class_ids.get(name)
        if cid is None:
            cid = self._class_ids[name] = len(self.class_names)
            self.class_names.append(name)
        return cid

    def queue_id(self, name: str) -> int:
        """The id of leaf queue `name` ("": no queue) in `queue`."""
        return self._queue_ids.setdefault(name, len(self._queue_ids))

    @property
    def queue_count(self) -> int:
        """How many queue ids `queue` may hold (ids are below this)."""
        return len(self._queue_ids)

    def _build_row(self, r: int) -> None:
        state = self.state
        pods = (
            sorted(state.nodes.pods_on[r].values(), key=importance_key)
            if state.nodes.valid[r]
            else []
        )
        self.pods[r] = pods
        self.priority[r] = EMPTY_PRIORITY
        self.start[r] = math.inf
        self.since[r] = math.nan
        self.klass[r] = NO_CLASS
        self.queue[r] = NO_QUEUE_ID
        self.terminating[r] = False
        self.request[r] = 0
        self.terminating_room[r] = 0
        for s, pod in enumerate(pods):
            self.priority[r, s] = pod.priority or 0
            if pod.start_time is not None:
                self.start[r, s] = pod.start_time.timestamp()
            since = scheduled_since(pod)
            if since is not None:
                self.since[r, s] = since.timestamp()
            self.klass[r, s] = self._class_id(pod.priority_class_name)
            if self._membership is not None:
                self.queue[r, s] = self.queue_id(state.queue_of(pod).queue)
            demand = state.pods.demand(pod)
            self.request[r, s, demand.cols] = demand.amounts
            if pod.deletion_timestamp is not None:
                self.terminating[r, s] = True
                self.terminating_room[r, demand.cols] += demand.amounts

    # ---- PodDisruptionBudgets ----------------------------------------------------------

    def pdbs_taken(
        self, rows: npt.NDArray[np.intp], take: BoolArray
    ) -> list[tuple[PodDisruptionBudget, BoolArray]]:
        """Each PDB covering a slot of `take` (over `rows`) with the slots of `take` it
        covers, in key order: only the PDBs on the rows taken from are looked at."""
        self._follow_pdbs()
        hit = (self._pdb_any[rows] & take).any(axis=1)
        if not hit.any():
            return []
        keys = {key for r in rows[hit].tolist() for key in self._row_pdbs[r]}
        found = []
        for key in sorted(keys):
            covered = self._pdb_masks[key][rows] & take
            if covered.any():
                found.append((self.state.policy.pdbs[key], covered))
        return found

    def _follow_pdbs(self) -> None:
        """Masks rebuilt over every row when a PDB's selector, or the set of PDBs, changed."""
        state = self.state
        if state.policy.pdb_index is self._pdb_index:
            return  # at most disruptions allowed changed: read from the state when used
        self._pdb_index = state.policy.pdb_index
        self._pdb_masks = {
            key: np.zeros(self.priority.shape, dtype=np.bool_) for key in state.policy.pdbs
        }
        self._pdb_any[:] = False
        self._row_pdbs = [() for _ in self._row_pdbs]
        self._refresh_pdb_masks(np.arange(self.rows_built))

    def _refresh_pdb_masks(self, rows: npt.NDArray[np.intp]) -> None:
        """Every PDB mask refreshed on `rows` from the index's answer for each pod (kept
        there per pod): per sync, work per changed pod rather than per PDB and changed pod."""
        index = self.state.policy.pdb_index
        if not self._pdb_masks or index is not self._pdb_index:
            return  # none, or made for another index: `_follow_pdbs` makes them all anew
        # Only the masks that covered something on these rows have slots to clear.
        for key in {key for r in rows.tolist() for key in self._row_pdbs[r]}:
            self._pdb_masks[key][rows] = False
        self._pdb_any[rows] = False
        for r in rows.tolist():
            on_row: set[str] = set()
            for s, pod in enumerate(self.pods[r]):
                covering = index.covering(pod)
                for key in covering:
                    self._pdb_masks[key][r, s] = True
                    self._pdb_any[r, s] = True
                on_row.update(covering)
            self._row_pdbs[r] = tuple(on_row)


# One table per cluster state, for every search that reads it (priority preemption and
# reclaim): building one costs a pass over every bound pod, and each follows the same log.
_TABLES: WeakKeyDictionary[ClusterState, VictimTable] = WeakKeyDictionary()


def table_of(state: ClusterState) -> VictimTable:
    """The victim table of `state`, made at the first call."""
    table = _TABLES.get(state)
    if table is None:
        table = _TABLES[state] = VictimTable(state)
    return table


def _grow(old: AnyArray, fill: object, shape: tuple[int, ...]) -> AnyArray:
    """`old` padded with `fill` to `shape` (never smaller than it was)."""
    new = np.full(shape, fill, dtype=old.dtype)
    new[tuple(slice(0, n) for n in old.shape)] = old
    return new
