"""A profile's plugins, run in order over all nodes at once.

Filters report the first filter that failed on each node (kube-scheduler's rule), so the
reason counts add up to the number of nodes; the leading run of static filters is evaluated
once per pod shape and cached until nodes change.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from itertools import compress

import numpy as np

from batchsched.config import Profile
from batchsched.decisions import PreBind
from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    Diagnosis,
    FilterPlugin,
    GroupPlugin,
    IndexArray,
    NodeTotals,
    Plugin,
    PodsHint,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    QueueSortPlugin,
    Rejection,
    ReservePlugin,
    RowLocalPlugin,
    ScorePlugin,
    StaticFilterPlugin,
    StaticScorePlugin,
    StillFails,
)
from batchsched.framework.signature import ShapeKeys
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray, rows_differ

_CACHE_LIMIT = 4096
_ADJUSTED = 256  # placements on adjusted room kept (each with a copy of the room)
# Refreshing a cached placement on at most this many rows goes row by row (`_refresh_rows`).
_ROW_BY_ROW = 8
# Cheap and specific events first: the hint that wakes a pod names the event it counts under.
_EVENT_ORDER = [
    ClusterEvent.NODE,
    ClusterEvent.POLICY,
    ClusterEvent.POD_GROUP,
    ClusterEvent.NAMESPACE,
    ClusterEvent.VOLUME,
    ClusterEvent.DEVICES,
    ClusterEvent.NODE_ROOM,
    ClusterEvent.ANY,
]
_SKIPPING = "framework.skipping"  # Cycle.scratch: the plugins that skip the pod
# Per event (its place in _EVENT_ORDER), the hints to ask (queueing_hints).
_Plan = tuple[tuple[int, tuple[QueueingHint | None, ...]], ...]


@dataclass(frozen=True, slots=True)
class _StaticVerdict:
    passing: BoolArray
    rejections: tuple[Rejection, ...]  # first-failure attribution already applied
    rejected_by: frozenset[str]  # the plugins those rejections came from


# The filters and weighted scores reading other nodes' pods that a pod meets.
_Globals = tuple[tuple[FilterPlugin, ...], tuple[tuple[ScorePlugin, int], ...]]


@dataclass(frozen=True, slots=True)
class _RowPlan:
    """The row-local filters and weighted scores that have something to say about a pod
    shape: those a refresh runs (a row-local plugin skips, or scores alike, by the shape)."""

    filters: tuple[RowLocalPlugin, ...]
    scores: tuple[tuple[RowLocalPlugin, int], ...]


@dataclass(slots=True)
class _Placement:
    """One pod shape's feasibility and total score per node, as of `mark` in the row log."""

    verdict: _StaticVerdict  # the shape's static filters (they hold until nodes change)
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


class Framework:
    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.plugins = profile.instantiate()

        def at(point: str) -> list[object]:
            return [self.plugins[name] for name, _ in profile.plugins[point]]

        sorter = at("queueSort")[0]
        assert isinstance(sorter, QueueSortPlugin)
        self.queue_sort: QueueSortPlugin = sorter
        self.pre_filters = [p for p in at("preFilter") if isinstance(p, PreFilterPlugin)]
        filters = [p for p in at("filter") if isinstance(p, FilterPlugin)]
        lead = 0
        while lead < len(filters) and isinstance(filters[lead], StaticFilterPlugin):
            lead += 1
        self.static_filters: list[StaticFilterPlugin] = [
            f for f in filters[:lead] if isinstance(f, StaticFilterPlugin)
        ]
        self.dynamic_filters: list[FilterPlugin] = filters[lead:]
        scores: list[tuple[ScorePlugin, int]] = [
            (p, w)
            for (name, w) in profile.plugins["score"]
            if isinstance(p := self.plugins[name], ScorePlugin) and w > 0
        ]
        # Scores of static node properties are cached raw and normalised at selection; the
        # others are summed into the cached placements (row-local ones) or on top of them.
        self.static_scores: list[tuple[StaticScorePlugin, int]] = [
            (p, w) for p, w in scores if isinstance(p, StaticScorePlugin)
        ]
        self.scores = [(p, w) for p, w in scores if not isinstance(p, StaticScorePlugin)]
        self.post_filters = [p for p in at("postFilter") if isinstance(p, PostFilterPlugin)]
        for plugin in self.plugins.values():
            if isinstance(plugin, GroupPlugin):  # at Permit or only at PreFilter
                plugin.use_post_filters(self.post_filters)
        self.reserves = [p for p in at("reserve") if isinstance(p, ReservePlugin)]
        # A plugin at Permit that schedules a pod's whole group as one unit (Coscheduling).
        self.group_plugin: GroupPlugin | None = next(
            (p for p in at("permit") if isinstance(p, GroupPlugin)), None
        )
        self.score_plugins = [p for p, _ in self.scores]
        self._cache: dict[Hashable, _StaticVerdict] = {}
        self._cache_generation = -1
        self._row_local = all(
            isinstance(p, RowLocalPlugin) for p in [*self.dynamic_filters, *self.score_plugins]
        )
        # Filters and scores beyond the static ones, and those that read more of a pod than
        # its demand.
        dynamic = list(dict.fromkeys([*self.dynamic_filters, *self.score_plugins]))
        self._skippers = [p for p in dynamic if type(p).skips is not Plugin.skips]
        self._state_skippers = [p for p in self._skippers if not p.skips_by_shape]
        self._global_filters = [
            p for p in self.dynamic_filters if not isinstance(p, RowLocalPlugin)
        ]
        self._global_scores = [(p, w) for p, w in self.scores if not isinstance(p, RowLocalPlugin)]
        # The pods' shape keys (framework/signature.py), asked by the queue's grouping, the
        # scheduler's twin check and the placement; `_keys` bound once (the hot path).
        self.shapes = ShapeKeys(
            [f.shape for f in self.static_filters],
            [p.reads for p in dynamic if type(p).reads is not Plugin.reads],
        )
        self._keys = self.shapes.keys
        self._skips_by_shape: dict[Hashable, frozenset[Plugin]] = {}
        self._globals: dict[frozenset[Plugin], _Globals] = {}  # by the plugins skipping
        self._placements: dict[Hashable, _Placement] = {}
        # Those on room adjusted for nominations, per (shape, priority): each keeps a copy of
        # the room, so fewer are kept.
        self._adjusted: dict[Hashable, _Placement] = {}
        self._events = {p.name: p.events_to_register() for p in self.plugins.values()}
        # The plugins that keep something per pod (asked to forget the pods that leave).
        self._per_pod = [
            p for p in self.plugins.values() if type(p).forget_pods is not Plugin.forget_pods
        ]
        self._plans: dict[tuple[frozenset[str], frozenset[ClusterEvent]], _Plan] = {}
        self._raw_scores: dict[tuple[int, Hashable], IntArray | None] = {}

    # ---- pre-filter --------------------------------------------------------------------

    def pre_filter(self, cycle: Cycle) -> PreFilterResult:
        combined = PreFilterResult()
        for plugin in self.pre_filters:
            result = plugin.pre_filter(cycle)
            if result is None:
                continue
            if result.reject is not None:
                return PreFilterResult(reject=result.reject, by=frozenset({plugin.name}))
            if result.allowed_nodes is not None:
                combined.by |= {plugin.name}
                combined.allowed_nodes = (
                    result.allowed_nodes
                    if combined.allowed_nodes is None
                    else combined.allowed_nodes & result.allowed_nodes
                )
        return combined

    # ---- filter ------------------------------------------------------------------------

    def forget_pods(self, keys: Collection[str]) -> None:
        """These pods left: their shape keys go, and each plugin that keeps something per
        pod forgets them."""
        self.shapes.forget(keys)
        for plugin in self._per_pod:
            plugin.forget_pods(keys)

    def _skipping(self, cycle: Cycle) -> frozenset[Plugin]:
        """The dynamic filters and scores that skip this pod, asked once per cycle (once per
        pod shape for those whose answer follows from the shape)."""
        found = cycle.scratch.get(_SKIPPING)
        if found is None:
            state, pod = cycle.state, cycle.pod
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
            # The shape's own set when nothing adds to it: its hash is kept (`_global_for`).
            found = cycle.scratch[_SKIPPING] = by_shape.union(also) if also else by_shape
        assert isinstance(found, frozenset)
        return found

    def _global_for(self, cycle: Cycle) -> _Globals:
        """The filters and scores that are not row-local and have something to say about
        this pod (those that skip it pass every node alike)."""
        if self._row_local:
            return (), ()
        skipping = self._skipping(cycle)
        found = self._globals.get(skipping)  # a few sets of skipping plugins recur
        if found is None:
            found = self._globals[skipping] = (
                tuple(p for p in self._global_filters if p not in skipping),
                tuple((p, w) for p, w in self._global_scores if p not in skipping),
            )
        return found

    def _static_verdict(
        self, state: ClusterState, cycle: Cycle, shapes: tuple[Hashable, ...] | None
    ) -> _StaticVerdict:
        if shapes is None:
            shapes = tuple(f.shape(cycle.pod) for f in self.static_filters)
        verdict, lead = self._cached_lead(state, cycle, shapes)
        if lead < len(shapes):
            verdict = _run_static(self.static_filters[lead:], cycle, verdict.passing, verdict)
        return verdict

    def _cached_lead(
        self, state: ClusterState, cycle: Cycle, shapes: tuple[Hashable, ...]
    ) -> tuple[_StaticVerdict, int]:
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

    def _passes_static_row(self, cycle: Cycle, row: int) -> bool:
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
                return bool(self._static_verdict(state, cycle, shapes).passing[row])
            if not passes:
                return False
        return True

    def find_nodes(
        self, cycle: Cycle, allowed: BoolArray | None = None, local_only: bool = False
    ) -> tuple[BoolArray, Diagnosis]:
        """Feasible nodes, and the diagnosis for the nodes that are not (with `local_only`,
        as the static and row-local filters alone see them)."""
        state = cycle.state
        shapes = self._keys(state, cycle.pod, cycle.demand)[0]
        verdict = self._static_verdict(state, cycle, shapes)
        rejections = list(verdict.rejections)
        rejected_by = set(verdict.rejected_by)
        candidates = verdict.passing.copy()
        if allowed is not None:
            candidates &= allowed
        skipping = self._skipping(cycle)
        judged: dict[FilterPlugin, BoolArray] = {}  # the nodes each row-local filter saw
        for plugin in self.dynamic_filters:
            if plugin in skipping or (local_only and not isinstance(plugin, RowLocalPlugin)):
                continue
            if not candidates.any():
                break
            failed = _apply(plugin.filter(cycle, candidates), candidates, rejections)
            if isinstance(plugin, RowLocalPlugin):
                judged[plugin] = candidates
            if failed is not None:
                rejected_by.add(plugin.name)
                candidates = candidates & ~failed
        counts: dict[str, int] = {}
        unresolvable = np.zeros(state.nodes.rows, dtype=np.bool_)
        rejected = np.zeros(state.nodes.rows, dtype=np.bool_)
        for rej in rejections:
            counts[rej.reason] = counts.get(rej.reason, 0) + int(np.count_nonzero(rej.nodes))
            rejected |= rej.nodes
            if not rej.resolvable:
                unresolvable |= rej.nodes
        resolvable = rejected & ~unresolvable
        if allowed is not None:
            resolvable &= allowed
        clashes = [(rej.nodes, rej.still_fails) for rej in rejections if rej.still_fails]
        if not local_only and resolvable.any():
            clashes += self._later_verdicts(cycle, resolvable, judged)
        clashes = [(nodes & resolvable, check) for nodes, check in clashes]
        return candidates, Diagnosis(
            state.nodes.count,
            counts,
            resolvable,
            rejected_by=frozenset(rejected_by),
            clashes=clashes,
        )

    def _later_verdicts(
        self, cycle: Cycle, resolvable: BoolArray, judged: dict[FilterPlugin, BoolArray]
    ) -> list[tuple[BoolArray, StillFails]]:
        """What the dynamic filters say of the resolvable nodes an earlier filter rejected.

        Each node counts once in the message, under its first failure; but preemption must
        know everything that stands in the way there, as upstream's runs every filter with
        the victims gone: a node short of room may also clash with particular pods (host
        ports, anti-affinity, spread), or fail for good (required affinity), which takes it
        out of `resolvable` (updated in place). Returns the clashes found. A row-local filter
        is not asked again about the nodes it has `judged` (it would say the same: its
        rejections there are already counted, its clashes already found).
        """
        clashes: list[tuple[BoolArray, StillFails]] = []
        skipping = self._skipping(cycle)
        for plugin in self.dynamic_filters:
            if plugin in skipping:
                continue
            seen = judged.get(plugin)
            nodes = resolvable.copy() if seen is None else resolvable & ~seen
            if not nodes.any():
                continue
            for rej in plugin.filter(cycle, nodes):
                if not rej.resolvable:
                    resolvable &= ~rej.nodes
                elif rej.still_fails is not None:
                    clashes.append((rej.nodes, rej.still_fails))
        return clashes

    def filter_verdicts(
        self, cycle: Cycle, allowed: BoolArray | None = None
    ) -> tuple[BoolArray, list[tuple[str, Rejection]]]:
        """Feasible nodes and, per rejection, the filter that made it: every filter in order,
        uncached, for explaining one pod (`find_nodes` is the fast path of the same rule)."""
        state = cycle.state
        candidates = state.nodes.valid[: state.nodes.rows].copy()
        if allowed is not None:
            candidates &= allowed
        found: list[tuple[str, Rejection]] = []
        for plugin in [*self.static_filters, *self.dynamic_filters]:
            rejections: list[Rejection] = []
            failed = _apply(plugin.filter(cycle, candidates), candidates, rejections)
            if failed is not None:
                candidates &= ~failed
            found.extend((plugin.name, rej) for rej in rejections)
        return candidates, found

    def score_breakdown(self, cycle: Cycle, feasible: BoolArray) -> list[tuple[str, int, IntArray]]:
        """Each score plugin's name, weight and raw scores (0..100) on the feasible nodes."""
        return [
            (plugin.name, weight, plugin.score(cycle, feasible)) for plugin, weight in self.scores
        ]

    # ---- score -------------------------------------------------------------------------

    def _silent(self, cycle: Cycle, plugin: ScorePlugin) -> bool:
        """Whether a score rates every node alike for this pod (it skips the pod, or has
        nothing to tell the nodes apart by): leaving it out changes no choice."""
        return plugin in self._skipping(cycle) or plugin.uniform(cycle)

    def _totals(self, cycle: Cycle, feasible: BoolArray, local_only: bool = False) -> IntArray:
        """The weighted sum of the non-static scores (with `local_only`, of the row-local
        ones); -1 where infeasible."""
        total = np.zeros(feasible.shape[0], dtype=np.int64)
        for plugin, weight in self.scores:
            if local_only and not isinstance(plugin, RowLocalPlugin):
                continue
            if not self._silent(cycle, plugin):
                total += plugin.score(cycle, feasible) * weight
        total[~feasible] = -1
        return total

    def _with_static(self, cycle: Cycle, feasible: BoolArray, total: IntArray) -> IntArray:
        """`total` plus the static scores, normalised over the feasible nodes. Pods that
        every static score rates alike (no preferences, tolerable taints or images) pay
        one cached lookup per plugin."""
        combined = total
        for plugin, weight in self.static_scores:
            raw = self._raw(plugin, cycle)
            if raw is not None:
                if combined is total:
                    combined = total.copy()
                combined += plugin.normalize(raw, feasible) * weight
        if combined is not total:
            combined[~feasible] = -1
        return combined

    def _raw(self, plugin: StaticScorePlugin, cycle: Cycle) -> IntArray | None:
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

    def select(self, cycle: Cycle, feasible: BoolArray, kept: bool = False) -> int:
        """The feasible node with the highest weighted score; ties go to the first name.
        `kept`: `feasible` is the pod's over every node, so the shape's kept placement on
        `cycle.free` may give the scores (refreshed where rows changed) if they are
        row-local."""
        if np.count_nonzero(feasible) == 1:
            return int(np.argmax(feasible))  # one node (e.g. a pinned pod): nothing to score
        placement = None
        if kept and not any(self._global_for(cycle)):
            placement = self._cached_placement(cycle)
        total = self._totals(cycle, feasible) if placement is None else placement.total
        return _best(cycle.state, self._with_static(cycle, feasible, total))

    def place(self, cycle: Cycle, allowed: BoolArray | None = None) -> int | Diagnosis:
        """The node row for the pod (its nominated node if that fits), or why none fits.

        The results of the static and row-local filters and scores are kept per pod shape and
        refreshed only for rows that changed since, so a stream of similar pods costs
        O(changed nodes) array work each, plus one argmax; filters and scores that read other
        nodes' pods (spread, inter-pod affinity) then run over all nodes on top of them.
        """
        state = cycle.state
        nominated = state.nominations.get(cycle.pod.key)
        # On room adjusted for nominations, the filters run first: most such pods fail (a
        # preemptor's, whose diagnosis needs them anyway) or go to their nominated node.
        shared = state.nodes.is_shared_free(cycle.free)
        placement = self._cached_placement(cycle) if allowed is None and shared else None
        global_filters, global_scores = self._global_for(cycle)
        if placement is not None and (global_filters or global_scores):
            feasible = placement.feasible.copy()
            for plugin in global_filters:
                if not feasible.any():
                    break
                for rej in plugin.filter(cycle, feasible):
                    feasible &= ~rej.nodes
            if not feasible.any():
                return self.find_nodes(cycle, allowed)[1]
            if nominated is not None and feasible[nominated]:
                return nominated
            total = placement.total.copy()
            for scorer, weight in global_scores:
                if not scorer.uniform(cycle):
                    total += scorer.score(cycle, feasible) * weight
            total[~feasible] = -1
            return _best(state, self._with_static(cycle, feasible, total))
        if placement is None:
            if allowed is not None and (row := self._fits_only_row(cycle, allowed)) is not None:
                return row
            if (
                nominated is not None
                and (allowed is None or allowed[nominated])
                and self._fits_row(cycle, nominated)
            ):
                return nominated  # as upstream: the nominated node first, alone
            feasible, diagnosis = self.find_nodes(cycle, allowed)
            if not feasible.any():
                return diagnosis
            if nominated is not None and feasible[nominated]:
                return nominated
            return self.select(cycle, feasible, kept=allowed is None)
        if nominated is not None and placement.feasible[nominated]:
            return nominated
        total = self._with_static(cycle, placement.feasible, placement.total)
        # -1 where infeasible; no row at all before the first node is known
        if not total.shape[0] or total.item(best := _best(state, total)) < 0:
            return self.find_nodes(cycle, allowed)[1]
        return best

    def evaluate(self, cycle: Cycle) -> NodeTotals | None:
        """The pod's feasibility and score on every node of `cycle.free`, for `place_changed`
        to refresh where the room or the pods later differ; None when the pod has no shape or
        a filter or score that reads other nodes' pods (spread, inter-pod affinity) has
        something to say about it (only a full pass decides then).

        Served from the shape's kept placement (`_cached_placement`, refreshed where the room
        or the log moved since), copied: the caller refreshes its results in place. A gang
        search asks for every pending member, and the members of the groups of one wave
        share a few shapes."""
        if self._keys(cycle.state, cycle.pod, cycle.demand)[1] is None or any(
            self._global_for(cycle)
        ):
            return None
        placement = self._cached_placement(cycle)
        assert placement is not None  # the pod has a shape key
        return NodeTotals(placement.feasible.copy(), placement.total.copy())

    def place_changed(
        self, cycle: Cycle, base: NodeTotals, rows: IndexArray
    ) -> int | Diagnosis | None:
        """What `place` (no allowed mask) chooses on `cycle.free`, which differs from the room
        `base` was evaluated on (by `evaluate`, same pod shape) only in `rows`: O(rows) filter
        and score work plus one argmax. `base` is brought up to date on `rows` in place, so a
        caller trying many rooms refreshes only the rows that changed since its last call.
        None when no node fits (ask `place` why). Only for a pod whose results are row-local
        (`row_local`, which the caller asks first: the pods now on the nodes may change it).
        The row-local filters and scores a refresh runs follow from the pod: they are made
        once and kept on `base`, which a gang search refreshes many times."""
        state = cycle.state
        shapes = self._keys(state, cycle.pod, cycle.demand)[0]
        verdict = self._static_verdict(state, cycle, shapes)
        if rows.shape[0]:
            plan = base.plan
            if not isinstance(plan, _RowPlan):
                plan = base.plan = self._row_plan(cycle)
            now = _Placement(verdict, 0, base.feasible, base.total, plan)
            self._refresh(cycle, now, rows.tolist())
        return self.choose(state, cycle.pod, base)

    @staticmethod
    def choose(state: ClusterState, pod: Pod, totals: NodeTotals) -> int | None:
        """What `place_changed` chooses from results already up to date: the pod's
        nominated node if it fits, else the best row; None when no node fits."""
        nominated = state.nominations.get(pod.key)
        if nominated is not None and totals.feasible[nominated]:
            return nominated
        if not totals.feasible.any():
            return None
        return _best(state, totals.total)

    def row_local(self, cycle: Cycle) -> bool:
        """Whether the pod's filter and score results on a node depend only on that node's
        room and pods (no spread or inter-pod affinity rule has something to say)."""
        return not any(self._global_for(cycle))

    def _fits_only_row(self, cycle: Cycle, allowed: BoolArray) -> int | None:
        """The one allowed row (a pod pinned to its node), checked on that row alone.

        None when more rows are allowed, the row does not fit, or a dynamic filter is not
        row-local: the full pass then decides, and explains.
        """
        if np.count_nonzero(allowed) != 1:
            return None
        row = int(np.argmax(allowed))
        return row if self._fits_row(cycle, row) else None

    def _fits_row(self, cycle: Cycle, row: int) -> bool:
        """Whether the pod fits on `row`, checked on that row alone; False also when a
        dynamic filter is not row-local (only a pass over every node can tell then)."""
        if any(self._global_for(cycle)) or not self._passes_static_row(cycle, row):
            return False
        rows = np.array([row], dtype=np.intp)
        skipping = self._skipping(cycle)
        for flt in self.dynamic_filters:
            if (
                isinstance(flt, RowLocalPlugin)
                and flt not in skipping
                and not flt.fits_rows(cycle, rows)[0]
            ):
                return False
        return True

    def _cached_placement(self, cycle: Cycle) -> _Placement | None:
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
        if placement is not None and placement.feasible.shape[0] == rows:
            changed = state.nodes.rows_changed_since(placement.mark)
            stale = None if changed is None else _stale_rows(cycle, placement, changed)
            if stale is not None:
                if stale:
                    self._refresh(cycle, placement, stale)
                    if placement.free is not None:
                        placement.free[stale] = cycle.free[stale]
                placement.mark = state.nodes.change_mark()
                placement.plain = cycle.plain_room
                return placement
        verdict = self._static_verdict(state, cycle, shapes)
        feasible, _ = self.find_nodes(cycle, local_only=True)
        placement = _Placement(
            verdict,
            state.nodes.change_mark(),
            feasible,
            self._totals(cycle, feasible, local_only=True),
            free=None if shared else cycle.free.copy(order="K"),
            plain=cycle.plain_room,
        )
        if len(kept) >= limit:
            kept.clear()
        kept[slot] = placement
        return placement

    def _refresh(self, cycle: Cycle, placement: _Placement, changed: list[int]) -> None:
        """Bring `placement` up to date on the `changed` rows (sorted, distinct)."""
        plan = placement.plan
        if plan is None:
            plan = placement.plan = self._row_plan(cycle)
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

    def _row_plan(self, cycle: Cycle) -> _RowPlan:
        skipping = self._skipping(cycle)
        return _RowPlan(
            tuple(
                flt
                for flt in self.dynamic_filters
                if isinstance(flt, RowLocalPlugin) and flt not in skipping
            ),
            tuple(
                (scorer, weight)
                for scorer, weight in self.scores
                if isinstance(scorer, RowLocalPlugin) and not self._silent(cycle, scorer)
            ),
        )

    def reserve(self, cycle: Cycle, row: int) -> tuple[PreBind, ...]:
        """Run the Reserve plugins; what they ask the world to write before the Binding. If
        one raises, every one gives back what it held (`unreserve`, as upstream's
        RunReservePluginsUnreserve) before the error goes on."""
        steps = []
        try:
            for plugin in self.reserves:
                steps.append(plugin.reserve(cycle, row))
        except BaseException:
            self.unreserve(cycle.state, cycle.pod)
            raise
        return tuple(step for step in steps if step is not None)

    def unreserve(self, state: ClusterState, pod: Pod) -> None:
        """Give back what the Reserve plugins hold for the pod, in reverse order (each must
        do nothing where it holds nothing: this also follows a Reserve that raised)."""
        for plugin in reversed(self.reserves):
            plugin.unreserve(state, pod)

    # ---- post-filter -------------------------------------------------------------------

    def post_filter(self, cycle: Cycle, diagnosis: Diagnosis) -> PostFilterResult:
        """The first post-filter that finds a way (e.g. a preemption) wins."""
        messages = []
        retry_at = None
        looked: set[str] = set()
        for plugin in self.post_filters:
            result = plugin.post_filter(cycle, diagnosis)
            if result.nominated_node is not None or result.decisions:
                result.by = frozenset({*looked, plugin.name})
                return result
            # A post-filter that says nothing does not act for this pod (e.g. DaemonSet
            # preemption for other pods): no change can make it find a way.
            if result.message or result.retry_at is not None:
                looked.add(plugin.name)
            if result.message:
                messages.append(result.message)
            if result.retry_at is not None:
                retry_at = min(retry_at or result.retry_at, result.retry_at)
        return PostFilterResult(message=" ".join(messages), retry_at=retry_at, by=frozenset(looked))

    # ---- queueing hints ----------------------------------------------------------------

    def queueing_hints(
        self, change: ClusterChange, rejected: Sequence[frozenset[str]], pods: Sequence[Pod]
    ) -> list[ClusterEvent | None]:
        """Per waiting pod, rejected by the plugins named in `rejected` (in the same order):
        the first event in `change` after which such a plugin may let it pass, or None if
        none may (the pod would be told the same again). Each hint is asked once for all the
        pods that need its answer for an event (a `PodsHint` in one step), not pod by pod."""
        found: list[ClusterEvent | None] = [None] * len(pods)
        by_rejection: dict[frozenset[str], list[int]] = {}
        for i, rejected_by in enumerate(rejected):
            if (alike := by_rejection.get(rejected_by)) is None:
                by_rejection[rejected_by] = [i]
            else:
                alike.append(i)
        # Per event (its place in _EVENT_ORDER), per hint (None: may, unasked), the pods whose
        # rejecting plugins have it.
        steps: dict[int, dict[QueueingHint | None, list[int]]] = {}
        for rejected_by, alike in by_rejection.items():
            for rank, hints in self._hint_plan(rejected_by, change.events):
                by_hint = steps.setdefault(rank, {})
                for hint in hints:
                    if (items := by_hint.get(hint)) is None:
                        by_hint[hint] = list(alike)
                    else:
                        items.extend(alike)
        woken = False
        for rank in sorted(steps):
            event = _EVENT_ORDER[rank]
            for hint, items in steps[rank].items():
                # A pod an earlier event or hint wakes already is not asked again.
                waiting = [i for i in items if found[i] is None] if woken else items
                if not waiting:
                    continue
                if hint is None:
                    yes = waiting
                else:
                    asked = [pods[i] for i in waiting]
                    if isinstance(hint, PodsHint):
                        answers = hint.ask(change, asked)
                    else:
                        answers = [hint(change, pod) for pod in asked]
                    assert len(answers) == len(asked)
                    yes = list(compress(waiting, answers))
                for i in yes:
                    found[i] = event
                woken = woken or bool(yes)
        return found

    def _hint_plan(self, rejected_by: frozenset[str], events: frozenset[ClusterEvent]) -> _Plan:
        """Per event in `events` (by its place in _EVENT_ORDER), in order, the hints of the
        plugins in `rejected_by` that can lift their rejection after it (None: may, unasked),
        in name order; made once per pair of sets, as the hint groups asked each pass mostly
        share them."""
        key = (rejected_by, events)
        plan = self._plans.get(key)
        if plan is None:
            steps = []
            for event in sorted(events, key=_EVENT_ORDER.index):
                hints: list[QueueingHint | None] = []
                for name in sorted(rejected_by):
                    registered = self._events[name]
                    if registered is None:  # no hints: any event may
                        hints.append(None)
                    elif event in registered:
                        hints.append(registered[event])
                if hints:
                    steps.append((_EVENT_ORDER.index(event), tuple(hints)))
            if len(self._plans) >= _CACHE_LIMIT:
                self._plans.clear()
            plan = self._plans[key] = tuple(steps)
        return plan


def _run_static(
    filters: list[StaticFilterPlugin],
    cycle: Cycle,
    passing: BoolArray,
    before: _StaticVerdict | None = None,
) -> _StaticVerdict:
    """Apply `filters` in order to the nodes in `passing`, after `before`'s rejections."""
    candidates = passing.copy()
    rejections: list[Rejection] = list(before.rejections) if before is not None else []
    rejected_by = set(before.rejected_by) if before is not None else set()
    for plugin in filters:
        failed = _apply(plugin.filter(cycle, candidates), candidates, rejections)
        if failed is not None:
            rejected_by.add(plugin.name)
            candidates &= ~failed
    return _StaticVerdict(candidates, tuple(rejections), frozenset(rejected_by))


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
        return sorted(set(changed))
    if placement.free.shape != free.shape:
        return None
    if placement.plain and cycle.plain_room:
        return sorted(set(changed))
    moved = rows_differ(free, placement.free)
    moved[changed] = True
    stale = np.flatnonzero(moved)
    return stale.tolist() if stale.shape[0] <= limit else None


def _best(state: ClusterState, total: IntArray) -> int:
    """The row with the highest total (>= 0); among equals, the node that sorts first."""
    if state.nodes.names_in_row_order():
        return int(total.argmax())  # the first maximum is the first name
    rows = np.flatnonzero(total == total.max())
    return int(rows[np.argmin(state.nodes.name_rank()[rows])])


def _apply(
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
