"""InterPodAffinity (Filter, Score): pod affinity and anti-affinity over topology domains.

Filter, in upstream's order on each node:
1. The pod's required affinity: for every term, some pod matching all the terms runs in the
   node's domain of the term's topology key (a node missing a key fails). The first-pod rule:
   when no pod anywhere matches all the terms and the pod matches them itself, every node
   carrying the keys passes. Unresolvable: removing pods never helps.
2. The pod's required anti-affinity: no pod matching a term runs in the node's domain.
3. Existing pods' required anti-affinity (symmetry): no pod whose term matches this pod runs
   in the node's domain of that term's key.
2 and 3 are resolvable: preemption must remove every such pod in the domain, from this node.
Terminating pods still count (upstream counts every pod the node holds). Pods nominated to a
node with priority at least the pod's count on that node alone, for 2 and 3: upstream adds
them to that node's filter state only, and requires the node to pass without them too, so a
nominated pod never satisfies an affinity and never keeps the pod out of another node.

Score: per topology domain, the weights of the pod's preferred terms for each matching pod
there (anti-affinity subtracts), plus `hardPodAffinityWeight` for each pod there whose required
affinity term matches this pod, plus the weights of existing pods' preferred terms matching
this pod (unless `ignorePreferredTermsOfExistingPods` and the pod has no preferred terms);
a node scores the sum over its domains, normalised to 0..100 between the lowest and highest
feasible node.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.framework.interface import (
    PREEMPTION_GUARDS,
    ClusterChange,
    ClusterEvent,
    Cycle,
    FilterPlugin,
    QueueingHint,
    Rejection,
    ScorePlugin,
    StillFails,
)
from batchsched.objects.records import Pod
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.interpodaffinity.existing import (
    PREFERRED,
    PREFERRED_ANTI,
    REQUIRED,
    REQUIRED_ANTI,
    ExistingTerms,
)
from batchsched.plugins.interpodaffinity.terms import Term, TermScope, resolve, scope_of
from batchsched.plugins.podtopologyspread.counts import MatchCounts
from batchsched.plugins.podtopologyspread.domains import TopologyDomains
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
MAX_SCORE = 100


class InterPodAffinity(FilterPlugin, ScorePlugin):
    name = "InterPodAffinity"
    skips_by_shape = False  # whether any pod carries terms, or is nominated, matters too

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(
            self.name, args, ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods")
        )
        self.hard_weight = reader.int_in("hardPodAffinityWeight", 1, 0, 100)
        self.ignore_existing = reader.get("ignorePreferredTermsOfExistingPods", bool, False)
        self._state: ClusterState | None = None
        self._domains: TopologyDomains | None = None
        self._counts: MatchCounts | None = None
        self._existing: ExistingTerms | None = None

    def _indexes(self, state: ClusterState) -> tuple[TopologyDomains, MatchCounts, ExistingTerms]:
        if (
            self._state is not state
            or self._domains is None
            or self._counts is None
            or self._existing is None
        ):
            self._state = state
            self._domains = TopologyDomains(state)
            self._counts = MatchCounts(state)
            self._existing = ExistingTerms(state)
        self._existing.sync()
        return self._domains, self._counts, self._existing

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        # Nodes' topology labels and Namespaces' labels (namespace selectors) decide too.
        return {
            ClusterEvent.NODE: None,
            ClusterEvent.NAMESPACE: None,
            ClusterEvent.NODE_ROOM: self._pod_change_may_help,
        }

    @staticmethod
    def _pod_change_may_help(change: ClusterChange, pod: Pod) -> bool:
        """A pod came or went that the pod's required terms select, or that has terms of its
        own (its anti-affinity may have kept this pod out), as upstream's
        isSchedulableAfterPodChange: pods unrelated to either change no verdict."""
        own = pod.pod_affinity
        terms = () if own is None else (*own.required, *own.required_anti)
        selectors = [resolve(term, pod).selector for term in terms]
        return change.pods_where(
            lambda other: (
                other.pod_affinity is not None
                or any(selector.matches_labels(other.labels) for selector in selectors)
            )
        )

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        # Terms (existing pods', and the pod's own for the first-pod rule) read its namespace
        # and the labels under the keys some term names; a label no term names (e.g. a job's
        # own name) must not split pods alike into shapes of one.
        keys = state.pods.term_label_keys
        labels = tuple(sorted((k, v) for k, v in pod.labels.items() if k in keys)) if keys else ()
        return (pod.namespace, labels, pod.pod_affinity)

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        if pod.pod_affinity is not None:
            return False
        if not state.pods.with_pod_affinity:
            return True  # no pod carries terms: nothing to keep this one out or to score
        if any(p.pod_affinity is not None for p, _ in _nominated(state, pod, None)):
            return False  # a nominated pod's anti-affinity may keep this one out
        existing = self._indexes(state)[2]
        if existing.empty:
            return True
        if existing.has(REQUIRED_ANTI):
            return False
        if self.ignore_existing:
            return True
        hard = self.hard_weight > 0 and existing.has(REQUIRED)
        return not (hard or existing.has(PREFERRED) or existing.has(PREFERRED_ANTI))

    # ---- filter --------------------------------------------------------------------------

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        state, pod = cycle.state, cycle.pod
        _, counts, existing = self._indexes(state)
        aff = pod.pod_affinity
        nominated = _nominated(state, pod, cycle.priority)
        remaining = candidates.copy()
        rejections: list[Rejection] = []

        def reject(reason: str, bad: BoolArray, still_fails: StillFails | None) -> None:
            failed = remaining & bad
            if failed.any():
                rejections.append(Rejection(reason, failed, still_fails is not None, still_fails))
                remaining[failed] = False

        if aff is not None and aff.required:
            terms = tuple(resolve(t, pod) for t in aff.required)
            ok, followed = self._affinity_ok(state, pod, terms)
            reject(AFFINITY, ~ok, None)
            if followed is not None:
                cycle.scratch.setdefault(PREEMPTION_GUARDS, []).append(
                    self._affinity_guard(state, terms, followed)
                )
        if aff is not None and aff.required_anti:
            scopes = [
                (t.topology_key, scope_of((resolve(t, pod),), state)) for t in aff.required_anti
            ]
            held = self._nominated_rows(
                nominated, lambda other: [k for k, scope in scopes if scope.includes(other)]
            )
            blocked = held.copy()
            for key, scope in scopes:
                blocked |= self._occupied(key, counts.per_row(scope))
            reject(ANTI_AFFINITY, blocked, self._own_anti_check(state, scopes, held))
        groups = [(t, arr) for t, arr in existing.groups(REQUIRED_ANTI) if t.matches(pod, state)]
        held = self._nominated_rows(
            nominated,
            lambda other: [
                t.topology_key
                for t in (other.pod_affinity.required_anti if other.pod_affinity else ())
                if resolve(t, other).matches(pod, state)
            ],
        )
        if groups or held.any():
            blocked = held.copy()
            for term, arr in groups:
                blocked |= self._occupied(term.topology_key, arr)
            reject(EXISTING_ANTI_AFFINITY, blocked, self._existing_check(state, groups, held))
        return rejections

    def _nominated_rows(
        self, nominated: list[tuple[Pod, int]], keys: Callable[[Pod], list[str]]
    ) -> BoolArray:
        """The rows a nominated pod there keeps the pod out of: those carrying a topology
        key `keys` names for it (each node's nominated pods count on that node alone)."""
        assert self._domains is not None and self._state is not None
        held = np.zeros(self._state.nodes.rows, dtype=np.bool_)
        for other, row in nominated:
            if not held[row] and any(self._domains.of(k)[0][row] >= 0 for k in keys(other)):
                held[row] = True
        return held

    def _domain_totals(self, key: str, per_row: IntArray) -> tuple[IntArray, IntArray]:
        """Each row's domain index for `key`, and per domain the sum of `per_row`."""
        assert self._domains is not None
        dom, values = self._domains.of(key)
        labelled = dom >= 0
        totals = np.bincount(dom[labelled], weights=per_row[labelled], minlength=len(values))
        return dom, totals.astype(np.int64)

    def _occupied(self, key: str, per_row: IntArray) -> BoolArray:
        """Rows whose domain for `key` holds something counted in `per_row`."""
        dom, totals = self._domain_totals(key, per_row)
        return (dom >= 0) & (totals[np.maximum(dom, 0)] > 0)

    def _affinity_ok(
        self,
        state: ClusterState,
        pod: Pod,
        terms: tuple[Term, ...],
    ) -> tuple[BoolArray, TermScope | None]:
        """Nodes where the pod's required affinity holds, and the scope of the pods it
        follows (None under the first-pod rule: no pod to follow, none to lose)."""
        assert self._domains is not None and self._counts is not None
        scope = scope_of(terms, state)
        per_row = self._counts.per_row(scope)
        ok = state.nodes.valid[: state.nodes.rows].copy()
        found = False
        for term in terms:
            dom, totals = self._domain_totals(term.topology_key, per_row)
            found |= bool(totals.any())
            ok &= (dom >= 0) & (totals[np.maximum(dom, 0)] > 0)
        if not found and scope.includes(pod):
            # The first pod of a series with affinity to itself: no pod to follow yet.
            return self._domains.having(tuple(t.topology_key for t in terms)), None
        return ok, scope

    def _affinity_guard(
        self, state: ClusterState, terms: tuple[Term, ...], scope: TermScope
    ) -> StillFails:
        """Whether taking `removed` leaves the node's domains without a pod to follow."""

        pods_on = state.nodes.pods_on

        def still_fails(row: int, removed: Collection[str]) -> bool:
            return not all(
                any(
                    p.key not in removed and scope.includes(p)
                    for r in self._same_domain(term.topology_key, row)
                    for p in pods_on[r].values()
                )
                for term in terms
            )

        return still_fails

    def _own_anti_check(
        self,
        state: ClusterState,
        scopes: list[tuple[str, TermScope]],
        held: BoolArray,
    ) -> StillFails:
        pods_on = state.nodes.pods_on

        def still_fails(row: int, removed: Collection[str]) -> bool:
            if held[row]:
                return True  # preemption does not take nominated pods
            for key, scope in scopes:
                for r in self._same_domain(key, row):
                    for pod in pods_on[r].values():
                        if (
                            pod.key not in removed
                            and pod.deletion_timestamp is None
                            and scope.includes(pod)
                        ):
                            return True
            return False

        return still_fails

    def _existing_check(
        self, state: ClusterState, groups: list[tuple[Term, IntArray]], held: BoolArray
    ) -> StillFails:
        existing = self._indexes(state)[2]

        def still_fails(row: int, removed: Collection[str]) -> bool:
            if held[row]:
                return True  # a nominated pod's term: preemption does not take it
            for term, _ in groups:
                for r in self._same_domain(term.topology_key, row):
                    carriers = existing.carriers(r, REQUIRED_ANTI, term)
                    if any(p.key not in removed and p.deletion_timestamp is None for p in carriers):
                        return True
            return False

        return still_fails

    def _same_domain(self, key: str, row: int) -> list[int]:
        assert self._domains is not None
        dom = self._domains.of(key)[0]
        if dom[row] < 0:
            return []
        return np.flatnonzero(dom == dom[row]).tolist()

    # ---- score ---------------------------------------------------------------------------

    def score(self, cycle: Cycle, feasible: BoolArray) -> IntArray:
        state, pod = cycle.state, cycle.pod
        rows = feasible.shape[0]
        out = np.zeros(rows, dtype=np.int64)
        domains, counts, existing = self._indexes(state)
        aff = pod.pod_affinity
        preferring = aff is not None and bool(aff.preferred or aff.preferred_anti)
        if self.ignore_existing and not preferring:
            return out
        by_key: dict[str, IntArray] = {}

        def add(key: str, per_row: IntArray, weight: int) -> None:
            _, totals = self._domain_totals(key, per_row)
            by_key[key] = by_key.get(key, 0) + totals * weight

        if aff is not None:
            for sign, terms in ((1, aff.preferred), (-1, aff.preferred_anti)):
                for t in terms:
                    scope = scope_of((resolve(t, pod),), state)
                    add(t.topology_key, counts.per_row(scope), sign * t.weight)
        kinds = [(PREFERRED, 1), (PREFERRED_ANTI, -1)]
        if self.hard_weight > 0:
            kinds.append((REQUIRED, self.hard_weight))
        for kind, weight in kinds:
            for term, arr in existing.groups(kind):
                if term.matches(pod, state):
                    add(term.topology_key, arr, weight)
        if not by_key:
            return out
        total = np.zeros(rows, dtype=np.int64)
        for key, sums in by_key.items():
            dom = domains.of(key)[0][:rows]
            total += np.where(dom >= 0, sums[np.maximum(dom, 0)], 0)
        feasible = feasible & state.nodes.valid[:rows]
        if not feasible.any():
            return out
        low, high = int(total[feasible].min()), int(total[feasible].max())
        if high > low:
            out[feasible] = (MAX_SCORE * (total[feasible] - low) / (high - low)).astype(np.int64)
        return out


def _nominated(state: ClusterState, pod: Pod, priority: int | None) -> list[tuple[Pod, int]]:
    """Pods nominated to a node (other than `pod`), with priority at least `priority` (any
    when None), and their rows."""
    out: list[tuple[Pod, int]] = []
    if not len(state.nominations):
        return out
    for key, row in state.nominations.items():
        other = state.pods.by_key.get(key)
        if (
            other is not None
            and key != pod.key
            and (priority is None or (other.priority or 0) >= priority)
        ):
            out.append((other, row))
    return out
