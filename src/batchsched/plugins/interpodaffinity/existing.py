"""The affinity terms of bound pods, grouped, as per-node-row weights.

A group is (kind, resolved term); its array holds, per node row, how many pods there carry the
term (the summed weights, for preferred terms). Rows are recounted as ClusterState logs them
changed, so the symmetric rules (an existing pod's anti-affinity keeps a new pod out; existing
pods' terms score it) cost one array pass per group, not a scan of every pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np

from batchsched.objects.records import AffinityTerm, Pod
from batchsched.plugins.interpodaffinity.terms import Term, resolve
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray

REQUIRED_ANTI = "required-anti"
REQUIRED = "required"
PREFERRED = "preferred"
PREFERRED_ANTI = "preferred-anti"

Group = tuple[str, Term]


def terms_of(pod: Pod) -> Iterator[tuple[str, AffinityTerm]]:
    aff = pod.pod_affinity
    if aff is None:
        return
    for kind, terms in (
        (REQUIRED_ANTI, aff.required_anti),
        (REQUIRED, aff.required),
        (PREFERRED, aff.preferred),
        (PREFERRED_ANTI, aff.preferred_anti),
    ):
        for term in terms:
            yield kind, term


class ExistingTerms:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._mark = -1
        self._by_row: dict[int, Counter[Group]] = {}
        self._weights: dict[Group, IntArray] = {}
        self._totals: Counter[Group] = Counter()
        self._kinds: Counter[str] = Counter()

    def sync(self) -> None:
        state = self.state
        if self._mark == state.nodes.change_mark():
            return
        changed = state.nodes.rows_changed_since(self._mark) if self._mark >= 0 else None
        if changed is None:
            self._by_row.clear()
            self._weights.clear()
            self._totals.clear()
            self._kinds.clear()
            rows: range | set[int] = range(state.nodes.rows)
        else:
            rows = set(changed)
        pods_on = state.nodes.pods_on
        for row in rows:
            old = self._by_row.pop(row, None)
            carriers = [p for p in pods_on[row].values() if p.pod_affinity is not None]
            if old is None and not carriers:
                continue  # the common case: no pod there has affinity terms
            for group, weight in (old or {}).items():
                self._add(group, row, -weight)
            found: Counter[Group] = Counter()
            for pod in carriers:
                for kind, term in terms_of(pod):
                    found[(kind, resolve(term, pod))] += max(term.weight, 1)
            for group, weight in found.items():
                self._add(group, row, weight)
            if found:
                self._by_row[row] = found
        self._mark = state.nodes.change_mark()

    def _add(self, group: Group, row: int, weight: int) -> None:
        rows = self.state.nodes.rows
        array = self._weights.get(group)
        if array is None:
            array = self._weights[group] = np.zeros(rows, dtype=np.int64)
            self._kinds[group[0]] += 1
        elif array.shape[0] < rows:
            array = self._weights[group] = np.concatenate(
                [array, np.zeros(rows - array.shape[0], dtype=np.int64)]
            )
        array[row] += weight
        self._totals[group] += weight
        if self._totals[group] == 0:
            del self._weights[group], self._totals[group]
            self._kinds[group[0]] -= 1

    @property
    def empty(self) -> bool:
        return not self._weights

    def has(self, kind: str) -> bool:
        return self._kinds[kind] > 0

    def groups(self, kind: str) -> list[tuple[Term, IntArray]]:
        rows = self.state.nodes.rows
        out = []
        for (k, term), array in self._weights.items():
            if k == kind:
                if array.shape[0] < rows:
                    array = np.concatenate([array, np.zeros(rows - array.shape[0], np.int64)])
                out.append((term, array[:rows]))
        return out

    def carriers(self, row: int, kind: str, term: Term) -> list[Pod]:
        """The pods on `row` carrying the term."""
        return [
            pod
            for pod in self.state.nodes.pods_on[row].values()
            if any(k == kind and resolve(t, pod) == term for k, t in terms_of(pod))
        ]
