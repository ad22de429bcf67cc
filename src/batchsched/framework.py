"""A profile's plugins, run in order over all nodes at once.

Filters report the first filter that failed on each node (kube-scheduler's rule), so the
reason counts add up to the number of nodes; the leading run of static filters is evaluated
once per pod shape and cached until nodes change.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from batchsched.config import Profile
from batchsched.plugins.base import (
    Cycle,
    Diagnosis,
    FilterPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    QueueSortPlugin,
    Rejection,
    ScorePlugin,
    StaticFilterPlugin,
)
from batchsched.state.cluster import BoolArray, ClusterState

_CACHE_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class _StaticVerdict:
    passing: BoolArray
    rejections: tuple[Rejection, ...]  # first-failure attribution already applied


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
        self.scores: list[tuple[ScorePlugin, int]] = [
            (p, w)
            for (name, w) in profile.plugins["score"]
            if isinstance(p := self.plugins[name], ScorePlugin) and w > 0
        ]
        self.post_filters = [p for p in at("postFilter") if isinstance(p, PostFilterPlugin)]
        self._cache: dict[Hashable, _StaticVerdict] = {}
        self._cache_generation = -1

    # ---- pre-filter --------------------------------------------------------------------

    def pre_filter(self, cycle: Cycle) -> PreFilterResult:
        combined = PreFilterResult()
        for plugin in self.pre_filters:
            result = plugin.pre_filter(cycle)
            if result is None:
                continue
            if result.reject is not None:
                return result
            if result.allowed_nodes is not None:
                combined.allowed_nodes = (
                    result.allowed_nodes
                    if combined.allowed_nodes is None
                    else combined.allowed_nodes & result.allowed_nodes
                )
        return combined

    # ---- filter ------------------------------------------------------------------------

    def _static_verdict(self, state: ClusterState, cycle: Cycle) -> _StaticVerdict:
        if self._cache_generation != state.node_generation:
            self._cache.clear()
            self._cache_generation = state.node_generation
        shapes = tuple(f.shape(cycle.pod) for f in self.static_filters)
        cacheable = all(s is not None for s in shapes)
        if cacheable:
            hit = self._cache.get(shapes)
            if hit is not None:
                return hit
        candidates = state.valid[: state.rows].copy()
        rejections: list[Rejection] = []
        for plugin in self.static_filters:
            failed = _apply(plugin.filter(cycle, candidates), candidates, rejections)
            candidates &= ~failed
        verdict = _StaticVerdict(candidates, tuple(rejections))
        if cacheable:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[shapes] = verdict
        return verdict

    def find_nodes(
        self, cycle: Cycle, allowed: BoolArray | None = None
    ) -> tuple[BoolArray, Diagnosis]:
        """Feasible nodes, and the diagnosis for the nodes that are not."""
        state = cycle.state
        verdict = self._static_verdict(state, cycle)
        rejections = list(verdict.rejections)
        candidates = verdict.passing.copy()
        if allowed is not None:
            candidates &= allowed
        for plugin in self.dynamic_filters:
            if not candidates.any():
                break
            failed = _apply(plugin.filter(cycle, candidates), candidates, rejections)
            candidates &= ~failed
        counts: dict[str, int] = {}
        unresolvable = np.zeros(state.rows, dtype=np.bool_)
        rejected = np.zeros(state.rows, dtype=np.bool_)
        for rej in rejections:
            counts[rej.reason] = counts.get(rej.reason, 0) + int(rej.nodes.sum())
            rejected |= rej.nodes
            if not rej.resolvable:
                unresolvable |= rej.nodes
        resolvable = rejected & ~unresolvable
        if allowed is not None:
            resolvable &= allowed
        return candidates, Diagnosis(state.node_count, counts, resolvable)

    # ---- score -------------------------------------------------------------------------

    def select(self, cycle: Cycle, feasible: BoolArray) -> int:
        """The feasible node with the highest weighted score; ties go to the first name."""
        rows = np.flatnonzero(feasible)
        if rows.size == 1 or not self.scores:
            return int(rows[np.argmin(cycle.state.name_rank()[rows])])
        total = np.zeros(rows.size, dtype=np.int64)
        for plugin, weight in self.scores:
            total += plugin.score(cycle, rows) * weight
        best = rows[total == total.max()]
        if best.size == 1:
            return int(best[0])
        return int(best[np.argmin(cycle.state.name_rank()[best])])

    # ---- post-filter -------------------------------------------------------------------

    def post_filter(self, cycle: Cycle, diagnosis: Diagnosis) -> PostFilterResult:
        """The first post-filter that finds a way (e.g. a preemption) wins."""
        messages = []
        for plugin in self.post_filters:
            result = plugin.post_filter(cycle, diagnosis)
            if result.nominated_node is not None or result.decisions:
                return result
            if result.message:
                messages.append(result.message)
        return PostFilterResult(message=" ".join(messages))


def _apply(
    found: list[Rejection] | tuple[Rejection, ...] | object,
    candidates: BoolArray,
    into: list[Rejection],
) -> BoolArray:
    """Record a plugin's rejections among `candidates`; return the nodes it failed."""
    failed = np.zeros(candidates.shape[0], dtype=np.bool_)
    assert isinstance(found, list | tuple)
    for rej in found:
        nodes = rej.nodes & candidates
        if nodes.any():
            into.append(Rejection(rej.reason, nodes, rej.resolvable))
            failed |= nodes
    return failed
