"""The nodes: NumPy arrays of room (one row per node, one column per resource), the Node
records and the pods on each row, and the log of rows whose room changed.

A removed node keeps its row (invalid, zero room) so that rows never move under the caches
that follow the log. See docs/architecture.md for who reads the log.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice

import numpy as np
import numpy.typing as npt

from batchsched.objects.records import Node, Pod
from batchsched.state.resources import Demand, ResourceIndex

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_CHANGE_LOG_LIMIT = 65_536


@dataclass(frozen=True, slots=True)
class LabelDomains:
    """The nodes carrying one label key, per value (a topology domain, docs/topology.md):
    `rows[value]` in row order, `values` sorted, and every row `flat`, grouped by value in
    that order (`starts`: where each value's rows begin), so that a column is summed per
    domain in one step. Shared: not to be changed."""

    rows: dict[str, IntArray]
    values: list[str]
    flat: IntArray
    starts: IntArray

    def totals(self, column: IntArray) -> IntArray:
        """The sum of `column` (one value per node row) over each domain, in `values` order."""
        if not self.values:
            return np.zeros(0, dtype=np.int64)
        found: IntArray = np.add.reduceat(column[self.flat], self.starts)
        return found


class Nodes:
    def __init__(self) -> None:
        self.resources = ResourceIndex()
        self._capacity = 0
        # Column-major: the hot loops read one resource column across all nodes.
        self.allocatable: IntArray = np.zeros((0, len(self.resources)), dtype=np.int64, order="F")
        self.free: IntArray = np.zeros((0, len(self.resources)), dtype=np.int64, order="F")
        self._cells_of, self._cells = self.free, self.free.data  # see `free_cells`
        self.valid: BoolArray = np.zeros(0, dtype=np.bool_)
        # Per node, what scoring adds to the cpu and memory requested by its pods: the
        # non-zero defaults of pods (containers) that request none (`signature.nonzero_of`).
        self.nonzero_gap: IntArray = np.zeros((0, 2), dtype=np.int64)
        self._gap_cells_of, self._gap_cells = self.nonzero_gap, self.nonzero_gap.data
        self.by_row: list[Node | None] = []  # None: a removed node's row
        self.row_of: dict[str, int] = {}
        self.pods_on: list[dict[str, Pod]] = []  # per row, the pods there by key
        # Bumped when node labels, taints, schedulability or membership change: masks derived
        # from static node properties are cached against it.
        self.generation = 0
        # Per label key, the rows of each of its values, made at this generation (topology
        # domains, docs/topology.md): a gang attempt asks for them, a scan of every node.
        self._domains: dict[str, tuple[int, LabelDomains]] = {}
        self._name_rank: IntArray | None = None
        self._rank_is_identity: bool | None = None
        # Rows whose free or allocatable room or pods changed, in order: lets cached per-node
        # results be refreshed for those rows only. `_changed_base` is the log position of item 0.
        self._changed_rows: list[int] = []
        # Beside each logged row: the pod that arrived there, left or began terminating (None
        # for any other change of room: nominations, reservations, allocatable). Only the
        # queueing hints read it, from the marks of the pods still waiting: the part older
        # than all of those is dropped (`forget_pods_before`), so pods long gone are not
        # kept alive by the log. `_pods_base` is the log position of its item 0.
        self._changed_pods: list[Pod | None] = []
        self._changed_base = 0
        self._pods_base = 0
        # Reads of that log (marks handed out, changes asked for), and for a `tentative`
        # scope the pods of each row it touched as the scope found them: the row's own
        # mapping, put back at the scope's end (the scope works on a copy: `pods_to_change`).
        self._log_reads = 0
        self.kept_rows: dict[int, dict[str, Pod]] | None = None

    @property
    def count(self) -> int:
        return len(self.row_of)

    @property
    def rows(self) -> int:
        """Rows in use in the node arrays (including rows of removed nodes)."""
        return len(self.by_row)

    def _grow_rows(self, rows: int) -> None:
        if rows <= self._capacity:
            return
        new_cap = max(rows, self._capacity * 2, 64)
        width = len(self.resources)
        for attr in ("allocatable", "free"):
            old = getattr(self, attr)
            grown = np.zeros((new_cap, width), dtype=np.int64, order="F")
            grown[: old.shape[0]] = old
            setattr(self, attr, grown)
        valid = np.zeros(new_cap, dtype=np.bool_)
        valid[: self.valid.shape[0]] = self.valid
        self.valid = valid
        gap = np.zeros((new_cap, 2), dtype=np.int64)
        gap[: self.nonzero_gap.shape[0]] = self.nonzero_gap
        self.nonzero_gap = gap
        self._capacity = new_cap

    def ensure_columns(self) -> None:
        """A column for every interned resource (a pod's request may name a new one)."""
        width = len(self.resources)
        if self.allocatable.shape[1] == width:
            return
        for attr in ("allocatable", "free"):
            old = getattr(self, attr)
            grown = np.zeros((old.shape[0], width), dtype=np.int64, order="F")
            grown[:, : old.shape[1]] = old
            setattr(self, attr, grown)

    def _vector(self, amounts: dict[str, int]) -> IntArray:
        for name in amounts:
            self.resources.intern(name)
        self.ensure_columns()
        vec = np.zeros(len(self.resources), dtype=np.int64)
        for name, amount in amounts.items():
            vec[self.resources.intern(name)] = amount
        return vec

    def upsert(self, node: Node) -> bool:
        """Record a node as reported; True when it is new (it got a row)."""
        alloc = self._vector(node.allocatable)
        idx = self.row_of.get(node.name)
        if idx is None:
            idx = len(self.by_row)
            self._grow_rows(idx + 1)
            self.by_row.append(node)
            self.pods_on.append({})
            self.row_of[node.name] = idx
            self.valid[idx] = True
            self.allocatable[idx] = alloc
            self.free[idx] = alloc
            self.touch(idx)
            self._name_rank = None
            self.generation += 1
            return True
        old = self.by_row[idx]
        used = self.allocatable[idx] - self.free[idx]
        self.allocatable[idx] = alloc
        self.free[idx] = alloc - used
        self.touch(idx)
        self.by_row[idx] = node
        if old is None or (
            old.labels != node.labels
            or old.taints != node.taints
            or old.unschedulable != node.unschedulable
            or old.images != node.images
        ):
            self.generation += 1
        return False

    def clear_row(self, idx: int) -> None:
        """Empty the row of a node that is gone (its name out of `row_of`, its pods off)."""
        self.by_row[idx] = None
        self.valid[idx] = False
        self.allocatable[idx] = 0
        self.free[idx] = 0
        self.nonzero_gap[idx] = 0
        self.touch(idx)
        self._name_rank = None
        self.generation += 1

    # ---- the log of changed rows ---------------------------------------------------------

    def touch(self, idx: int, pod: Pod | None = None) -> None:
        """Log a change of row `idx`'s room, by `pod` (arrived, left, began terminating)."""
        # Not within a tentative scope: its entries are to be dropped at its end, and a
        # cache whose mark the log no longer reaches rebuilds from scratch.
        if len(self._changed_rows) >= _CHANGE_LOG_LIMIT and self.kept_rows is None:
            self._changed_base += len(self._changed_rows)
            self._pods_base = self._changed_base
            self._changed_rows = []
            self._changed_pods = []
        self._changed_rows.append(idx)
        self._changed_pods.append(pod)

    def touch_all(self, rows: Sequence[int], pods: Sequence[Pod | None]) -> None:
        """`touch` each row with its pod, in one step unless the log is to roll over."""
        if self.kept_rows is None and len(self._changed_rows) + len(rows) > _CHANGE_LOG_LIMIT:
            for idx, pod in zip(rows, pods, strict=True):
                self.touch(idx, pod)
        else:
            self._changed_rows += rows
            self._changed_pods += pods

    @contextmanager
    def tentative(self) -> Iterator[None]:
        """A scope for changes that the caller undoes before it ends (a search trying
        placements: `pods.hold` / `pods.unhold`, room taken on the own `free`). Each row's
        pods are put back in the order they had, and if nothing read the change log meanwhile
        (`change_mark`, `rows_changed_since`, `pods_changed_since`) the scope's entries are
        dropped: caches following the log then do not refresh rows that end as they were.
        Had anything read the log, it saw the rows change and must see them change back."""
        assert self.kept_rows is None, "tentative scopes do not nest"
        length, reads = len(self._changed_rows), self._log_reads
        pods_length = len(self._changed_pods)
        rows: dict[int, dict[str, Pod]] = {}
        self.kept_rows = rows
        try:
            yield
        finally:
            self.kept_rows = None
        pods_on = self.pods_on
        for idx, pods in rows.items():
            # The same pods (in whatever order): the row's own mapping, in its order, back.
            if pods_on[idx].keys() != pods.keys():
                raise AssertionError(f"row {idx}'s pods were not restored")
            pods_on[idx] = pods
        if self._log_reads == reads:
            del self._changed_rows[length:]
            del self._changed_pods[pods_length:]

    def pods_to_change(self, idx: int) -> dict[str, Pod]:
        """Row `idx`'s pods by key, for the caller to add or take pods: within a `tentative`
        scope a copy made at the row's first change there (the row's own mapping is kept, to
        be put back at the scope's end), else the row's own."""
        pods = self.pods_on[idx]
        kept = self.kept_rows
        if kept is not None and idx not in kept:
            kept[idx], pods = pods, dict(pods)
            self.pods_on[idx] = pods
        return pods

    def change_mark(self) -> int:
        """A position in the log of changed node rows."""
        self._log_reads += 1
        return self._changed_base + len(self._changed_rows)

    def rows_changed_since(self, mark: int) -> list[int] | None:
        """Rows whose room changed since `mark`, or None if the log no longer reaches back."""
        self._log_reads += 1
        if mark < self._changed_base:
            return None
        return self._changed_rows[mark - self._changed_base :]

    def pods_changed_since(self, mark: int) -> Iterator[Pod | None] | None:
        """The pods behind the row changes since `mark` (None for a change that came from no
        pod), or None if the log no longer reaches back."""
        self._log_reads += 1
        if mark < self._pods_base:
            return None
        return islice(self._changed_pods, mark - self._pods_base, None)

    def forget_pods_before(self, mark: int | None) -> None:
        """Nothing will ask `pods_changed_since` for a mark before `mark` (None: for any mark
        handed out so far): the pods logged before it may go. Dropped when that is at least
        half of them, so each entry is moved at most twice."""
        end = self._changed_base + len(self._changed_rows)
        if self.kept_rows is not None:
            return  # the scope puts the log's end back: not a time to move its start
        drop = (end if mark is None else min(mark, end)) - self._pods_base
        if drop > 0 and 2 * drop >= len(self._changed_pods):
            del self._changed_pods[:drop]
            self._pods_base += drop

    # ---- rows and names ------------------------------------------------------------------

    def name(self, idx: int) -> str:
        node = self.by_row[idx]
        assert node is not None, f"node slot {idx} is empty"
        return node.name

    def live(self) -> Iterator[tuple[int, Node]]:
        """(row, Node) of every node there is."""
        for idx, node in enumerate(self.by_row):
            if node is not None:
                yield idx, node

    def domains(self, key: str) -> LabelDomains:
        """The nodes with label `key`, per value (kept until node labels or membership
        change)."""
        kept = self._domains.get(key)
        if kept is not None and kept[0] == self.generation:
            return kept[1]
        found: dict[str, list[int]] = {}
        for idx, node in self.live():
            value = node.labels.get(key)
            if value is not None:
                found.setdefault(value, []).append(idx)
        if len(self._domains) >= 64:
            self._domains.clear()
        values = sorted(found)
        rows = {value: np.asarray(found[value], dtype=np.intp) for value in values}
        sizes = np.asarray([len(found[value]) for value in values], dtype=np.intp)
        flat = np.concatenate([rows[v] for v in values]) if values else np.zeros(0, np.intp)
        domains = LabelDomains(rows, values, flat, np.cumsum(sizes) - sizes)
        self._domains[key] = (self.generation, domains)
        return domains

    def name_rank(self) -> IntArray:
        """Each node row's position in name order: ties between nodes break on name."""
        if self._name_rank is None or self._name_rank.shape[0] != self.rows:
            order = sorted(
                range(self.rows), key=lambda i: (self.by_row[i] is None, self._sort_name(i))
            )
            rank = np.empty(self.rows, dtype=np.int64)
            rank[np.asarray(order, dtype=np.intp)] = np.arange(self.rows, dtype=np.int64)
            self._name_rank = rank
            self._rank_is_identity = None
        return self._name_rank

    def names_in_row_order(self) -> bool:
        """True when rows are in node-name order (nodes added sorted): ties resolve by row."""
        rank = self.name_rank()
        if self._rank_is_identity is None:
            self._rank_is_identity = bool(
                np.array_equal(rank, np.arange(rank.shape[0])) and self.valid[: self.rows].all()
            )
        return self._rank_is_identity

    def _sort_name(self, idx: int) -> str:
        node = self.by_row[idx]
        return node.name if node is not None else ""

    # ---- room ----------------------------------------------------------------------------

    def free_cells(self) -> memoryview:
        """`free` as a memoryview, to read and write single cells without making NumPy
        scalars (a pod's few columns as it binds and leaves); made anew when `free` is."""
        if self._cells_of is not self.free:
            self._cells_of = self.free
            self._cells = self.free.data
        return self._cells

    def gap_cells(self) -> memoryview:
        """`nonzero_gap` as a memoryview (as `free_cells`): a pod's two cells as it binds
        and leaves."""
        if self._gap_cells_of is not self.nonzero_gap:
            self._gap_cells_of = self.nonzero_gap
            self._gap_cells = self.nonzero_gap.data
        return self._gap_cells

    def is_shared_free(self, free: IntArray) -> bool:
        """Whether `free` (from `ClusterState.free_for`) is a view of the own room, not
        adjusted."""
        return free.base is self.free

    def take_room(self, free: IntArray, idx: int, demand: Demand, sign: int = 1) -> None:
        """Take (sign 1) or give back (sign -1) a demand's room on one row of `free`.

        For tentative placements that are undone or made real within one scheduling step;
        when `free` is the own room the change is logged like any other, so cached per-node
        results are refreshed for that row.
        """
        shared = self.is_shared_free(free)
        view = self.free_cells() if shared else free.data
        for col, amount in demand.key:  # a few columns: cheaper than fancy indexing
            view[idx, col] -= sign * amount
        if shared:
            self.touch(idx)


def rows_differ(a: IntArray, b: IntArray, cols: list[int] | None = None) -> BoolArray:
    """Rows where `a` (its columns `cols`, all if None) and `b` differ; column by column,
    which is several times faster than `(a != b).any(axis=1)` on a few columns of a
    column-major array."""
    differ: BoolArray = np.zeros(a.shape[0], dtype=np.bool_)
    for i, col in enumerate(range(a.shape[1]) if cols is None else cols):
        differ |= a[:, col] != b[:, i]
    return differ
