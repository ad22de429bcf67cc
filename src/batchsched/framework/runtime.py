"""A profile's plugins, run in order over all nodes at once: the extension points.

Filters report the first filter that failed on each node (kube-scheduler's rule), so the
reason counts add up to the number of nodes. What the static and row-local filters and
scores found is kept per pod shape (framework/placements.py) and refreshed only on the rows
that changed; the plugins reading other nodes' pods run on top of it.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from datetime import datetime

import numpy as np

from batchsched.config import Profile
from batchsched.decisions import PreBind
from batchsched.framework.hints import HintPlans
from batchsched.framework.interface import (
    PREEMPTION_TIE_BREAK,
    Cycle,
    Diagnosis,
    FilterPlugin,
    GroupPlugin,
    IndexArray,
    NodeTotals,
    Plugin,
    PostFilterPlugin,
    PostFilterResult,
    PreemptionOrderPlugin,
    PreemptionTieBreak,
    PreFilterPlugin,
    PreFilterResult,
    QueueSortPlugin,
    Rejection,
    ReservePlugin,
    RowLocalPlugin,
    ScorePlugin,
    StaticFilterPlugin,
    StaticScorePlugin,
    StillFails,
)
from batchsched.framework.placements import Placements, record_rejections
from batchsched.framework.signature import ShapeKeys
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray


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
        # Scores that also order the nodes preemption finds equally good (Backfill's).
        self.preemption_orders = [
            p for p in self.score_plugins if isinstance(p, PreemptionOrderPlugin)
        ]
        # What the pods read (framework/signature.py) and of what the filters and scores
        # found, what is kept (framework/placements.py). The hot paths' lookups bound once.
        dynamic = list(dict.fromkeys([*self.dynamic_filters, *self.score_plugins]))
        readers = [p for p in dynamic if type(p).reads is not Plugin.reads]
        # The filters that judge part of what they read by their verdicts (Backfill).
        self._judges = [p for p in self.dynamic_filters if type(p).verdicts is not Plugin.verdicts]
        self.shapes = ShapeKeys(
            [f.shape for f in self.static_filters],
            [p.reads for p in readers],
            [p.kin_reads if type(p).kin_reads is not Plugin.kin_reads else None for p in readers]
            if self._judges
            else (),
        )
        self._keys = self.shapes.keys
        self.placements = Placements(
            self.static_filters, self.dynamic_filters, self.scores, self._keys, self._fresh
        )
        self._skipping = self.placements.skipping
        self._global_for = self.placements.global_for
        self._static_verdict = self.placements.static_verdict
        # What each plugin's rejection waits for (framework/hints.py).
        self.hints = HintPlans(self.plugins.values())
        # The plugins that keep something per pod (asked to forget the pods that leave).
        self._per_pod = [
            p for p in self.plugins.values() if type(p).forget_pods is not Plugin.forget_pods
        ]

    def verdicts(self, state: ClusterState, pod: Pod, now: datetime) -> Hashable:
        """What the filters that judge by verdicts say of the pod now (`Plugin.verdicts`):
        with equal `ShapeKeys.kin_key`s, pods of equal verdicts get equal answers."""
        if not self._judges:
            return ()
        cycle = Cycle(state, pod, now, state.pods.demand(pod), state.nodes.free)
        return tuple([judge.verdicts(cycle) for judge in self._judges])

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

    def static_passing(self, cycle: Cycle) -> BoolArray:
        """The nodes whose static properties (cordon, taints, affinity, name) admit the pod,
        whatever room they have: where it could run once pods there end."""
        return self._static_verdict(cycle.state, cycle, None).passing

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
            failed = record_rejections(plugin.filter(cycle, candidates), candidates, rejections)
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
            failed = record_rejections(plugin.filter(cycle, candidates), candidates, rejections)
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

    def _totals(self, cycle: Cycle, feasible: BoolArray, local_only: bool = False) -> IntArray:
        """The weighted sum of the non-static scores (with `local_only`, of the row-local
        ones); -1 where infeasible."""
        total = np.zeros(feasible.shape[0], dtype=np.int64)
        for plugin, weight in self.scores:
            if local_only and not isinstance(plugin, RowLocalPlugin):
                continue
            if not self.placements.silent(cycle, plugin):
                total += plugin.score(cycle, feasible) * weight
        total[~feasible] = -1
        return total

    def _fresh(self, cycle: Cycle) -> tuple[BoolArray, IntArray]:
        """The static and row-local filters' feasibility and the row-local scores of the pod
        on every node, afresh: what `Placements` keeps per shape."""
        feasible, _ = self.find_nodes(cycle, local_only=True)
        return feasible, self._totals(cycle, feasible, local_only=True)

    def _with_static(self, cycle: Cycle, feasible: BoolArray, total: IntArray) -> IntArray:
        """`total` plus the static scores, normalised over the feasible nodes. Pods that
        every static score rates alike (no preferences, tolerable taints or images) pay
        one cached lookup per plugin."""
        combined = total
        for plugin, weight in self.static_scores:
            raw = self.placements.raw(plugin, cycle)
            if raw is not None:
                if combined is total:
                    combined = total.copy()
                combined += plugin.normalize(raw, feasible) * weight
        if combined is not total:
            combined[~feasible] = -1
        return combined

    def select(self, cycle: Cycle, feasible: BoolArray, kept: bool = False) -> int:
        """The feasible node with the highest weighted score; ties go to the first name.
        `kept`: `feasible` is the pod's over every node, so the shape's kept placement on
        `cycle.free` may give the scores (refreshed where rows changed) if they are
        row-local."""
        if np.count_nonzero(feasible) == 1:
            return int(np.argmax(feasible))  # one node (e.g. a pinned pod): nothing to score
        placement = None
        if kept and not any(self._global_for(cycle)):
            placement = self.placements.kept(cycle)
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
        placement = self.placements.kept(cycle) if allowed is None and shared else None
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

    def place_on_rows(self, cycle: Cycle, rows: IndexArray, allowed: BoolArray) -> int | Diagnosis:
        """`place(cycle, allowed)`, where `allowed` is the mask of `rows` (one topology domain,
        docs/topology.md). For a pod whose results are row-local, on the state's own room,
        they come from the shape's kept placement looked at on `rows` alone: a gang is tried
        in domain after domain, each member a pass over every node otherwise."""
        state = cycle.state
        placement = None
        if state.nodes.is_shared_free(cycle.free) and not any(self._global_for(cycle)):
            placement = self.placements.kept(cycle)
        if placement is None or any(
            self.placements.raw(plugin, cycle) is not None for plugin, _ in self.static_scores
        ):
            return self.place(cycle, allowed)  # static scores normalise over every feasible node
        totals = NodeTotals(placement.feasible, placement.total)
        found = self.choose(state, cycle.pod, totals, rows)
        return self.find_nodes(cycle, allowed)[1] if found is None else found

    def evaluate(self, cycle: Cycle) -> NodeTotals | None:
        """The pod's feasibility and score on every node of `cycle.free`, for `place_changed`
        to refresh where the room or the pods later differ; None when the pod has no shape or
        a filter or score that reads other nodes' pods (spread, inter-pod affinity) has
        something to say about it (only a full pass decides then).

        Served from the shape's kept placement (`Placements.kept`, refreshed where the room
        or the log moved since), copied: the caller refreshes its results in place. A gang
        search asks for every pending member, and the members of the groups of one wave
        share a few shapes."""
        if self._keys(cycle.state, cycle.pod, cycle.demand)[1] is None or any(
            self._global_for(cycle)
        ):
            return None
        placement = self.placements.kept(cycle)
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
        self.placements.refresh_totals(cycle, base, rows)
        return self.choose(cycle.state, cycle.pod, base)

    @staticmethod
    def choose(
        state: ClusterState, pod: Pod, totals: NodeTotals, among: IndexArray | None = None
    ) -> int | None:
        """What `place_changed` chooses from results already up to date: the pod's
        nominated node if it fits, else the best row; None when no node fits. `among`: the
        rows it may take, in increasing order (None: any)."""
        nominated = state.nominations.get(pod.key)
        if among is not None:
            if nominated is not None and totals.feasible[nominated]:
                at = int(np.searchsorted(among, nominated))
                if at < among.shape[0] and among[at] == nominated:
                    return nominated
            total = totals.total[among]  # -1 where infeasible, as `_best` reads it
            if not total.shape[0] or total.max() < 0:
                return None
            if state.nodes.names_in_row_order():
                return int(among[total.argmax()])  # the first maximum is the first name
            best = among[total == total.max()]
            return int(best[np.argmin(state.nodes.name_rank()[best])])
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
        if any(self._global_for(cycle)) or not self.placements.passes_static_row(cycle, row):
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
        return tuple([step for step in steps if step is not None])

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
        order = self.preemption_order(cycle)
        if order is not None:
            cycle.scratch[PREEMPTION_TIE_BREAK] = order[1]
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

    def preemption_order(
        self, cycle: Cycle
    ) -> tuple[PreemptionOrderPlugin, PreemptionTieBreak] | None:
        """How the profile's scores order the nodes preemption finds equally good for the
        pod, and the plugin that says so (the first that says; None: kube-scheduler's
        order)."""
        for plugin in self.preemption_orders:
            found = plugin.preemption_tie_break(cycle)
            if found is not None:
                return plugin, found
        return None


def _best(state: ClusterState, total: IntArray) -> int:
    """The row with the highest total (>= 0); among equals, the node that sorts first."""
    if state.nodes.names_in_row_order():
        return int(total.argmax())  # the first maximum is the first name
    rows = np.flatnonzero(total == total.max())
    return int(rows[np.argmin(state.nodes.name_rank()[rows])])
