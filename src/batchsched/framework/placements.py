"""What a profile's filters and scores found, kept and refreshed only where the cluster
changed (docs/architecture.md, "framework").

- Static verdicts: the leading run of static filters' verdict per pod shape (their shapes,
  framework/signature.py), until nodes change (`ClusterState.node_generation`).
- Kept placements: per shape key, the static and row-local filters' feasibility and the
  row-local scores on every node, as of a position in the state's log of changed rows;
  refreshed on the rows changed since (a few rows one at a time, through each plugin's
  `row_check`/`row_score`). Those on room adjusted for nominations are kept apart, per
  priority, with a copy of that room.
- Raw scores of static node properties per plugin and score shape, normalised at each
  choice by the runtime.
- Which dynamic plugins skip a pod shape, and so which of those reading other nodes' pods
  still have something to say (`global_for`).

The runtime (framework/runtime.py) runs the extension points on top of these.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from batchsched.framework.interface import (
    Cycle,
    FilterPlugin,
    IndexArray,
    NodeTotals,
    Plugin,
    Rejection,
    RowLocalPlugin,
    ScorePlugin,
    StaticFilterPlugin,
    StaticScorePlugin,
)
from batchsched.framework.signature import StaticShapes
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray, rows_differ
from batchsched.state.resources import Demand

_CACHE_LIMIT = 4096
_T = TypeVar("_T")
_ADJUSTED = 256  # placements on adjusted room kept (each with a copy of the room)
# Refreshing a kept placement on at most this many rows goes row by row (`_refresh_rows`).
_ROW_BY_ROW = 8
_SKIPPING = "framework.skipping"  # Cycle.scratch: the plugins that skip the pod
_UNASKED: Hashable = object()  # `Placements.skipping` without the shape key at hand


@dataclass(frozen=True, slots=True)
class StaticVerdict:
    passing: BoolArray
    rejections: tuple[Rejection, ...]  # first-failure attribution already applied
    rejected_by: frozenset[str]  # the plugins those rejections came from


# The filters and weighted scores reading other nodes' pods that a pod meets.
Globals = tuple[tuple[FilterPlugin, ...], tuple[tuple[ScorePlugin, int], ...]]


@dataclass(frozen=True, slots=True)
class _RowPlan:
    """The row-local filters and weighted scores that have something to say about a pod
    shape: those a refresh runs (a row-local plugin skips, or scores alike, by the shape)."""

    filters: tuple[RowLocalPlugin, ...]
    scores: tuple[tuple[RowLocalPlugin, int], ...]


@dataclass(slots=True)
class _Placement:
    """One pod shape's feasibility and total score per node, as of `mark` in the row log."""

    verdict: StaticVerdict  # the shape's static filters (they hold until nodes change)
    mark: int
    feasible: BoolArray
    total: IntArray  # weighted score; -1 where infeasible
    plan: _RowPlan | None = None  # made at the first refresh
    # The room the results were computed on when it was a copy of the state's adjusted for
    # nominations (None: the state's own, whose changes the row log records).
    free: IntArray | None = None
    # `free` was a `Cycle.plain_room`: another such room differs from it only on rows the
    # log names.
    plain: bool = False
    # The clock (seconds) between which its results hold with the rows unchanged: from when
    # it was made to the earliest time a filter said its answer may change
    # (`Cycle.changes_at`: Backfill's pass for a pod that ends before a reservation starts).
    since: float = -math.inf
    until: float = math.inf
    # The dynamic filters and scores that skipped the pod when it was made: a refresh runs
    # the others (`_RowPlan`). One whose skipping reads the cluster (Backfill, with no
    # reservation) may stop skipping: it is made again then.
    skipping: frozenset[Plugin] = frozenset()


class Placements:
    """One profile's kept results. `keys` gives a pod's static filter shapes and shape key
    (`ShapeKeys.keys`); `fresh` the static and row-local filters' feasibility and the
    row-local scores of a pod on every node, computed afresh (the runtime's)."""

    def __init__(
        self,
        static_filters: list[StaticFilterPlugin],
        dynamic_filters: list[FilterPlugin],
        scores: list[tuple[ScorePlugin, int]],
        keys: Callable[[ClusterState, Pod, Demand], tuple[StaticShapes, Hashable | None]],
        fresh: Callable[[Cycle], tuple[BoolArray, IntArray]],
    ) -> None:
        self.static_filters = static_filters
        self.dynamic_filters = dynamic_filters
        self.scores = scores
        self._keys = keys
        self._fresh = fresh
        score_plugins = [p for p, _ in scores]
        self._row_local = all(
            isinstance(p, RowLocalPlugin) for p in [*dynamic_filters, *score_plugins]
        )
        # Filters and scores beyond the static ones that may skip a pod.
        dynamic = list(dict.fromkeys([*dynamic_filters, *score_plugins]))
        self._skippers = [p for p in dynamic if type(p).skips is not Plugin.skips]
        self._state_skippers = [p for p in self._skippers if not p.skips_by_shape]
        self._global_filters = [p for p in dynamic_filters if not isinstance(p, RowLocalPlugin)]
        self._global_scores = [(p, w) for p, w in scores if not isinstance(p, RowLocalPlugin)]
        self._cache: dict[Hashable, StaticVerdict] = {}
        self._cache_generation = -1
        self._skips_by_shape: dict[Hashable, frozenset[Plugin]] = {}
        self._globals: dict[frozenset[Plugin], Globals] = {}  # by the plugins skipping
        self._placements: dict[Hashable, _Placement] = {}
        # Those on room adjusted for nominations, per (shape, priority): each keeps a copy of
        # the room, so fewer are kept.
        self._adjusted: dict[Hashable, _Placement] = {}
        self._raw_scores: dict[tuple[int, Hashable], IntArray | None] = {}

    def skipping(self, cycle: Cycle, key: Hashable | None = _UNASKED) -> frozenset[Plugin]:
        """The dynamic filters and scores that skip this pod, asked once per cycle (once per
        pod shape for those whose answer follows from the shape). `key`: the pod's shape key,
        if the caller has it."""
        found = cycle.scratch.get(_SKIPPING)
        if found is None:
            state, pod = cycle.state, cycle.pod
            if key is _UNASKED:
                key = self._keys(state, pod, cycle.demand)[1]
            by_shape = None if key is None else self._skips_by_shape.get(key)
            if by_shape is None:
                by_shape = frozenset(
                    p for p in self._skippers if p.skips_by_shape and p.skips(state, pod)
                )
                if key is not None:
                    if len(self._skips_by_shape) >= _CACHE_LIMIT:
                        self._skips_by_shape.clear()
                    self._skips_by_shape[key] = by_shape
            also = [p for p in self._state_skippers if p.skips(state, pod)]
            # The shape's own set when nothing adds to it: its hash is kept (`global_for`).
            found = cycle.scratch[_SKIPPING] = by_shape.union(also) if also else by_shape
        assert isinstance(found, frozenset)
        return found

    def global_for(self, cycle: Cycle) -> Globals:
        """The filters and scores that are not row-local and have something to say about
        this pod (those that skip it pass every node alike)."""
        if self._row_local:
            return (), ()
        skipping = self.skipping(cycle)
        found = self._globals.get(skipping)  # a few sets of skipping plugins recur
        if found is None:
            found = self._globals[skipping] = (
                tuple(p for p in self._global_filters if p not in skipping),
                tuple((p, w) for p, w in self._global_scores if p not in skipping),
            )
        return found

    def static_verdict(
        self, state: ClusterState, cycle: Cycle, shapes: tuple[Hashable, ...] | None
    ) -> StaticVerdict:
        if shapes is None:
            shapes = tuple(f.shape(cycle.pod) for f in self.static_filters)
        verdict, lead = self._cached_lead(state, cycle, shapes)
        if lead < len(shapes):
            verdict = _run_static(self.static_filters[lead:], cycle, verdict.passing, verdict)
        return verdict

    def _cached_lead(
        self, state: ClusterState, cycle: Cycle, shapes: tuple[Hashable, ...]
    ) -> tuple[StaticVerdict, int]:
        """The verdict of the leading run of static filters that have a shape (all of them,
        usually), cached per shape, and how many filters that run covers. The rest are for
        this pod alone (e.g. NodeAffinity for a pod pinned by name)."""
        self._follow_nodes(state)
        lead = 0
        while lead < len(shapes) and shapes[lead] is not None:
            lead += 1
        key = shapes[:lead]
        verdict = self._cache.get(key)
        if verdict is None:
            verdict = _run_static(
                self.static_filters[:lead], cycle, state.nodes.valid[: state.nodes.rows]
            )
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = verdict
        return verdict, lead

    def _follow_nodes(self, state: ClusterState) -> None:
        """Drop what was derived from static node properties once they change."""
        if self._cache_generation != state.nodes.generation:
            self._cache.clear()
            self._placements.clear()
            self._adjusted.clear()
            self._raw_scores.clear()
            self._cache_generation = state.nodes.generation

    def passes_static_row(self, cycle: Cycle, row: int) -> bool:
        """Whether one node passes every static filter, without evaluating the others where
        the filters beyond the cached run can judge a single node."""
        state = cycle.state
        shapes = tuple(f.shape(cycle.pod) for f in self.static_filters)
        verdict, lead = self._cached_lead(state, cycle, shapes)
        if not verdict.passing[row]:
            return False
        for plugin in self.static_filters[lead:]:
            passes = plugin.passes_row(state, cycle.pod, row)
            if passes is None:
                return bool(self.static_verdict(state, cycle, shapes).passing[row])
            if not passes:
                return False
        return True

    def silent(self, cycle: Cycle, plugin: ScorePlugin) -> bool:
        """Whether a score rates every node alike for this pod (it skips the pod, or has
        nothing to tell the nodes apart by): leaving it out changes no choice."""
        return plugin in self.skipping(cycle) or plugin.uniform(cycle)

    def raw(self, plugin: StaticScorePlugin, cycle: Cycle) -> IntArray | None:
        shape = plugin.score_shape(cycle.pod)
        if shape is None:
            return None
        self._follow_nodes(cycle.state)
        key = (id(plugin), shape)
        if key in self._raw_scores:
            return self._raw_scores[key]
        raw = plugin.raw_scores(cycle.state, cycle.pod)
        if len(self._raw_scores) >= _CACHE_LIMIT:
            self._raw_scores.clear()
        self._raw_scores[key] = raw
        return raw

    def kept(self, cycle: Cycle) -> _Placement | None:
        """The pod shape's placement on `cycle.free`, refreshed where rows changed since it
        was made. Room adjusted for nominations (a copy per cycle, which the row log does
        not follow) is compared with the room the placement was made on, and its placements
        are kept apart per priority (the nominations a pod counts follow its priority), so
        that pods in a cluster with nominations pay O(changed rows) as the others do."""
        state = cycle.state
        shapes, key = self._keys(state, cycle.pod, cycle.demand)
        if key is None:
            return None  # before the verdict: uncached filters would run twice
        self._follow_nodes(state)  # drops placements made for other nodes
        shared = state.nodes.is_shared_free(cycle.free)
        kept, limit = (self._placements, _CACHE_LIMIT) if shared else (self._adjusted, _ADJUSTED)
        slot = key if shared else (key, cycle.pod.priority or 0)
        placement = kept.get(slot)
        rows = state.nodes.rows
        now = cycle.now.timestamp()
        skipping = self.skipping(cycle, key)
        if (
            placement is not None
            and placement.feasible.shape[0] == rows
            and placement.since <= now < placement.until
            and placement.skipping == skipping
        ):
            changed = state.nodes.rows_changed_since(placement.mark)
            stale = None if changed is None else _stale_rows(cycle, placement, changed)
            if stale is not None:
                if stale:
                    # As `_timed` (inline: one refresh per pod of a replay, most of one row).
                    held = cycle.holds_until
                    cycle.holds_until = math.inf
                    self._refresh(cycle, placement, stale)
                    until = cycle.holds_until
                    cycle.holds_until = min(held, until)
                    placement.until = min(placement.until, until)
                    if placement.free is not None:
                        placement.free[stale] = cycle.free[stale]
                placement.mark = state.nodes.change_mark()
                placement.plain = cycle.plain_room
                cycle.changes_at(placement.until)  # its kept rows' answers hold until then
                return placement
        verdict = self.static_verdict(state, cycle, shapes)
        (feasible, total), until = _timed(cycle, lambda: self._fresh(cycle))
        placement = _Placement(
            verdict,
            state.nodes.change_mark(),
            feasible,
            total,
            free=None if shared else cycle.free.copy(order="K"),
            plain=cycle.plain_room,
            since=now,
            until=until,
            skipping=skipping,
        )
        if len(kept) >= limit:
            kept.clear()
        kept[slot] = placement
        return placement

    def refresh_totals(self, cycle: Cycle, base: NodeTotals, rows: IndexArray) -> None:
        """Bring `base` (a pod's results on a room, `Framework.evaluate`) up to date on
        `rows`, where `cycle.free` differs from that room. The row-local filters and scores
        a refresh runs follow from the pod: they are made once and kept on `base`, which a
        gang search refreshes many times."""
        state = cycle.state
        shapes = self._keys(state, cycle.pod, cycle.demand)[0]
        verdict = self.static_verdict(state, cycle, shapes)
        if rows.shape[0]:
            plan = base.plan
            if not isinstance(plan, _RowPlan):
                plan = base.plan = self.row_plan(cycle)
            now = _Placement(verdict, 0, base.feasible, base.total, plan)
            self._refresh(cycle, now, rows.tolist())

    def _refresh(self, cycle: Cycle, placement: _Placement, changed: list[int]) -> None:
        """Bring `placement` up to date on the `changed` rows (sorted, distinct)."""
        plan = placement.plan
        if plan is None:
            plan = placement.plan = self.row_plan(cycle)
        if len(changed) <= _ROW_BY_ROW:
            self._refresh_rows(cycle, placement, plan, changed)
            return
        rows = np.asarray(changed, dtype=np.intp)
        ok = placement.verdict.passing[rows]  # a copy: fancy indexing
        for flt in plan.filters:
            ok &= flt.fits_rows(cycle, rows)
        placement.feasible[rows] = ok
        placement.total[rows] = -1
        # Only feasible rows are scored (their scores are row-local): a search freeing room
        # often refreshes many rows that still do not fit.
        fitting = rows[ok]
        if not fitting.shape[0]:
            return
        total: IntArray | int = 0
        for scorer, weight in plan.scores:
            total = total + scorer.score_rows(cycle, fitting) * weight
        placement.total[fitting] = total

    @staticmethod
    def _refresh_rows(cycle: Cycle, placement: _Placement, plan: _RowPlan, rows: list[int]) -> None:
        """`_refresh` one row at a time, in Python numbers: for a few rows (usually the one
        node the last pod went to) cheaper than NumPy's per-call cost. A row that fails a
        filter is not scored (its total is -1 either way)."""
        checks = [check for flt in plan.filters if (check := flt.row_check(cycle)) is not None]
        scores = [(scorer.row_score(cycle), weight) for scorer, weight in plan.scores]
        passing, feasible, total = placement.verdict.passing, placement.feasible, placement.total
        for row in rows:
            ok = passing.item(row)
            for check in checks:
                if not ok:
                    break
                ok = check(row)
            if ok:
                score = 0
                for scored, weight in scores:
                    score += scored(row) * weight
                feasible[row] = True
                total[row] = score
            else:
                feasible[row] = False
                total[row] = -1

    def row_plan(self, cycle: Cycle) -> _RowPlan:
        skipping = self.skipping(cycle)
        return _RowPlan(
            tuple(
                flt
                for flt in self.dynamic_filters
                if isinstance(flt, RowLocalPlugin) and flt not in skipping
            ),
            tuple(
                (scorer, weight)
                for scorer, weight in self.scores
                if isinstance(scorer, RowLocalPlugin) and not self.silent(cycle, scorer)
            ),
        )


def _run_static(
    filters: list[StaticFilterPlugin],
    cycle: Cycle,
    passing: BoolArray,
    before: StaticVerdict | None = None,
) -> StaticVerdict:
    """Apply `filters` in order to the nodes in `passing`, after `before`'s rejections."""
    candidates = passing.copy()
    rejections: list[Rejection] = list(before.rejections) if before is not None else []
    rejected_by = set(before.rejected_by) if before is not None else set()
    for plugin in filters:
        failed = record_rejections(plugin.filter(cycle, candidates), candidates, rejections)
        if failed is not None:
            rejected_by.add(plugin.name)
            candidates &= ~failed
    return StaticVerdict(candidates, tuple(rejections), frozenset(rejected_by))


def _stale_rows(cycle: Cycle, placement: _Placement, changed: list[int]) -> list[int] | None:
    """The rows of `placement` to refresh for `cycle.free` (sorted, distinct): those in the
    log since it was made and, for a placement on a copy of the room, those where the room
    differs from that copy (compared over every row unless both are plain `free_for` rooms,
    which differ only on logged rows). None when so many changed (or the copy has other
    columns) that making it afresh is cheaper."""
    free = cycle.free
    limit = free.shape[0] // 4
    if len(changed) > limit:
        return None
    if placement.free is None:
        return changed if len(changed) == 1 else sorted(set(changed))
    if placement.free.shape != free.shape:
        return None
    if placement.plain and cycle.plain_room:
        return sorted(set(changed))
    moved = rows_differ(free, placement.free)
    moved[changed] = True
    stale = np.flatnonzero(moved)
    return stale.tolist() if stale.shape[0] <= limit else None


def record_rejections(
    found: Sequence[Rejection],
    candidates: BoolArray,
    into: list[Rejection],
) -> BoolArray | None:
    """Record a plugin's rejections among `candidates`; return the nodes it failed (None:
    none)."""
    failed: BoolArray | None = None
    for rej in found:
        nodes = rej.nodes & candidates
        if nodes.any():
            into.append(Rejection(rej.reason, nodes, rej.resolvable, rej.still_fails))
            failed = nodes if failed is None else failed | nodes
    return failed


def _timed(cycle: Cycle, work: Callable[[], _T]) -> tuple[_T, float]:
    """What `work` finds on `cycle`, and when its answers may change with the cluster
    unchanged (the earliest `Cycle.changes_at` it made; the cycle keeps that too)."""
    held = cycle.holds_until
    cycle.holds_until = math.inf
    found = work()
    until = cycle.holds_until
    cycle.holds_until = min(held, until)
    return found, until
