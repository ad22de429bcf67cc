"""PodTopologySpread (Filter, Score): matching pods spread over topology domains.

Filter (`whenUnsatisfiable: DoNotSchedule`): a node must carry every constraint's topology
key (else it fails unresolvably), and placing the pod there must keep
`matching pods in the node's domain + 1 (if the pod matches itself) - the fewest in any domain`
within `maxSkew`; the fewest counts as 0 while fewer domains than `minDomains` exist. Domains
and counts cover the nodes that carry every key and pass the pod's node affinity
(`nodeAffinityPolicy: Honor`, the default) and, with `nodeTaintsPolicy: Honor`, its
tolerations. Terminating pods do not count. As upstream's RunFilterPluginsWithNominatedPods,
a node with pods nominated to it (priority at least the pod's) must pass both with those pods
counted in its domain and without them; pods nominated to other nodes never count. The skew
failure is resolvable: preemption removes matching pods from the node.

Score (`ScheduleAnyway`, and the defaults): per constraint, the node's domain count times
log(domains + 2) plus maxSkew - 1, summed, rounded, then flipped so the emptiest domain scores
100. Nodes missing a key are ignored (score 0), except under the system defaults.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    FilterPlugin,
    QueueingHint,
    Rejection,
    ScorePlugin,
    StaticFilterPlugin,
)
from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import read_defaults
from batchsched.objects.records import Pod, SpreadConstraint
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.nodeaffinity.plugin import NodeAffinity
from batchsched.plugins.podtopologyspread.constraints import (
    NONE,
    SYSTEM_DEFAULTS,
    PodConstraints,
    constraints_of,
)
from batchsched.plugins.podtopologyspread.counts import MatchCounts, SpreadScope
from batchsched.plugins.podtopologyspread.domains import HOSTNAME, TopologyDomains
from batchsched.plugins.tainttoleration.plugin import TaintToleration
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SKEW = "node(s) didn't match pod topology spread constraints"
MAX_SCORE = 100


def _read_defaults(reader: ArgsReader) -> tuple[tuple[SpreadConstraint, ...], bool]:
    raw = reader.get("defaultConstraints", list, [])
    kind = reader.get("defaultingType", str, "System")
    if kind not in ("System", "List"):
        raise reader.fail("defaultingType", f"{kind!r} is not one of System, List")
    if kind == "System" and raw:
        raise reader.fail("defaultConstraints", 'must be empty when defaultingType is "System"')
    if kind == "System":
        return SYSTEM_DEFAULTS, True
    try:
        return read_defaults(raw), False
    except ManifestError as err:
        raise reader.fail(err.field or "defaultConstraints", err.what) from None


class PodTopologySpread(FilterPlugin, ScorePlugin):
    name = "PodTopologySpread"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(self.name, args, ("defaultConstraints", "defaultingType"))
        self.defaults, self.system = _read_defaults(reader)
        self._state: ClusterState | None = None
        self._domains: TopologyDomains | None = None
        self._counts: MatchCounts | None = None
        self._memo: tuple[Pod | None, PodConstraints] = (None, NONE)
        self._inclusion: dict[Hashable, BoolArray] = {}
        self._inclusion_generation = -1

    # ---- per-state indexes, per-pod constraints -----------------------------------------

    def _indexes(self, state: ClusterState) -> tuple[TopologyDomains, MatchCounts]:
        if self._state is not state or self._domains is None or self._counts is None:
            self._state = state
            self._domains = TopologyDomains(state)
            self._counts = MatchCounts(state)
        return self._domains, self._counts

    def constraints(self, pod: Pod) -> PodConstraints:
        if self._memo[0] is not pod:
            self._memo = (pod, constraints_of(pod, self.defaults, self.system))
        return self._memo[1]

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        # Nodes' topology labels, taints and affinity decide which domains count.
        return {ClusterEvent.NODE: None, ClusterEvent.NODE_ROOM: self._pod_change_may_help}

    def _pod_change_may_help(self, change: ClusterChange, pod: Pod) -> bool:
        """A pod came or went that one of the pod's hard constraints counts (its selector
        before matchLabelKeys narrow it: a superset, so never a missed wake)."""
        hard = self.constraints(pod).hard
        return change.pods_where(
            lambda other: any(c.selector.matches_labels(other.labels) for c in hard)
        )

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        found = self.constraints(pod)
        if found is NONE:
            return ()
        return (found, tuple(sorted(pod.labels.items())), pod.namespace)

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        return self.constraints(pod) is NONE

    def _included(self, state: ClusterState, pod: Pod, c: SpreadConstraint) -> BoolArray:
        """Nodes whose pods count for `c`: the pod's node affinity and taints, per policy."""
        if self._inclusion_generation != state.nodes.generation:
            self._inclusion.clear()
            self._inclusion_generation = state.nodes.generation
        mask = state.nodes.valid[: state.nodes.rows].copy()
        checks: list[StaticFilterPlugin] = []
        if c.honor_node_affinity and (pod.node_selector or pod.required_terms):
            checks.append(_AFFINITY)
        if c.honor_node_taints:
            checks.append(_TAINTS)
        for plugin in checks:
            shape = plugin.shape(pod)
            key = (plugin.name, shape)
            passing = self._inclusion.get(key) if shape is not None else None
            if passing is None or passing.shape[0] != state.nodes.rows:
                passing = state.nodes.valid[: state.nodes.rows].copy()
                for rej in plugin.evaluate(state, pod):
                    passing &= ~rej.nodes
                if shape is not None:
                    self._inclusion[key] = passing
            mask &= passing
        return mask

    def _matching(self, cycle: Cycle, c: SpreadConstraint) -> IntArray:
        """Matching pods per row (bound or assumed, not terminating)."""
        scope = SpreadScope(cycle.pod.namespace, c.selector)
        return self._indexes(cycle.state)[1].per_row(scope)

    def _nominated_matching(self, cycle: Cycle, c: SpreadConstraint) -> IntArray | None:
        """Matching pods nominated to each row with priority at least the pod's (None: no
        such pod anywhere)."""
        state, pod = cycle.state, cycle.pod
        if not len(state.nominations):
            return None
        scope = SpreadScope(pod.namespace, c.selector)
        rows: list[int] = []
        for key, row in state.nominations.items():
            other = state.pods.by_key.get(key)
            if (
                other is not None
                and key != pod.key
                and (other.priority or 0) >= cycle.priority
                and scope.includes(other)
            ):
                rows.append(row)
        if not rows:
            return None
        return np.bincount(np.asarray(rows, dtype=np.intp), minlength=state.nodes.rows).astype(
            np.int64
        )

    # ---- filter --------------------------------------------------------------------------

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        found = self.constraints(cycle.pod)
        if not found.hard:
            return []
        state, pod = cycle.state, cycle.pod
        domains, _ = self._indexes(state)
        has_all = domains.having(found.keys)
        over = np.zeros(state.nodes.rows, dtype=np.bool_)
        excess: list[tuple[SpreadConstraint, IntArray, IntArray, BoolArray]] = []
        for c in found.hard:
            dom, values = domains.of(c.topology_key)
            counted = has_all & self._included(state, pod, c)
            totals = np.bincount(
                dom[counted], weights=self._matching(cycle, c)[counted], minlength=len(values)
            ).astype(np.int64)
            present = np.zeros(len(values), dtype=np.bool_)
            present[dom[counted]] = True
            nominated = self._nominated_matching(cycle, c)
            added = np.zeros(state.nodes.rows, dtype=np.int64) if nominated is None else nominated
            enough = bool(present.sum() >= c.min_domains)
            own = int(c.selector.matches(pod))
            # > 0: too many by that much
            skew = _skew(added * counted, dom, totals, present, enough, own, c)
            over |= skew > 0
            excess.append((c, dom, skew, counted))
        rejections = []
        missing = candidates & ~has_all
        if missing.any():
            rejections.append(Rejection(MISSING_LABEL, missing, resolvable=False))
        over &= candidates & has_all
        if over.any():

            def still_fails(row: int, removed: Collection[str]) -> bool:
                gone = [state.pods.by_key[k] for k in removed if k in state.pods.bound]
                for c, dom, skew, counted in excess:
                    if skew[row] <= 0:
                        continue
                    lifted = sum(
                        1
                        for p in gone
                        if dom[state.pods.bound[p.key]] == dom[row]
                        and counted[state.pods.bound[p.key]]
                        and SpreadScope(pod.namespace, c.selector).includes(p)
                    )
                    if lifted < skew[row]:
                        return True
                return False

            rejections.append(Rejection(SKEW, over, resolvable=True, still_fails=still_fails))
        return rejections

    # ---- score ---------------------------------------------------------------------------

    def score(self, cycle: Cycle, feasible: BoolArray) -> IntArray:
        found = self.constraints(cycle.pod)
        rows = feasible.shape[0]
        out = np.zeros(rows, dtype=np.int64)
        if not found.soft:
            return out
        state, pod = cycle.state, cycle.pod
        domains, _ = self._indexes(state)
        feasible = feasible & state.nodes.valid[:rows]
        if found.system_defaulted:
            has_all = state.nodes.valid[:rows].copy()
        else:
            has_all = domains.having(found.soft_keys)
        scored = feasible & has_all
        if not scored.any():
            return out
        raw = np.zeros(rows, dtype=np.float64)
        for c in found.soft:
            dom, values = domains.of(c.topology_key)
            per_row = self._matching(cycle, c)
            labelled = dom >= 0
            if c.topology_key == HOSTNAME:
                size = int(scored.sum())
                count = per_row
            else:
                in_play = np.zeros(len(values), dtype=np.bool_)
                in_play[dom[scored & labelled]] = True
                size = int(in_play.sum())
                counted = has_all & labelled & self._included(state, pod, c)
                totals = np.bincount(
                    dom[counted], weights=per_row[counted], minlength=len(values)
                ).astype(np.int64)
                totals[~in_play] = 0
                count = np.where(labelled, totals[np.maximum(dom, 0)], 0)
            weight = math.log(size + 2)
            raw += np.where(labelled, count * weight + (c.max_skew - 1), 0.0)
        rounded = np.floor(raw + 0.5).astype(np.int64)  # Go's math.Round on non-negatives
        lowest = int(rounded[scored].min())
        highest = int(rounded[scored].max())
        if highest == 0:
            out[scored] = MAX_SCORE
        else:
            out[scored] = MAX_SCORE * (highest + lowest - rounded[scored]) // highest
        return out


def _skew(
    added: IntArray,
    dom: IntArray,
    totals: IntArray,
    present: BoolArray,
    enough: bool,
    own: int,
    c: SpreadConstraint,
) -> IntArray:
    """Each row's skew with the pods nominated to it (`added`) counted in its domain and
    those nominated elsewhere not: upstream adds a node's nominated pods to that node's filter
    state alone, and also checks the node without them, a skew never larger than this one."""
    at_node = np.where(dom >= 0, totals[np.maximum(dom, 0)], 0) + added
    if not enough:  # fewer domains than minDomains: the minimum counts as 0
        return at_node + own - c.max_skew
    values = totals[present]
    lowest = int(values.min())
    alone = int((values == lowest).sum()) == 1
    if alone:
        # Raising the one domain at the minimum lifts the minimum, up to the next domain.
        lifted = at_node if values.shape[0] == 1 else np.minimum(at_node, np.sort(values)[1])
        raised = (added > 0) & (at_node - added == lowest)
        fewest = np.where(raised, lifted, lowest)
    else:
        fewest = np.full_like(at_node, lowest)
    return at_node + own - fewest - c.max_skew


_AFFINITY = NodeAffinity()
_TAINTS = TaintToleration()
