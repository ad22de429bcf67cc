"""PodDisruptionBudgets indexed by namespace and the label pairs their selectors require.

A pod is matched only against the PDBs that could cover it (its namespace, and either a
selector requiring nothing the index can look up, or one whose chosen pairs the pod carries)
rather than against every PDB in the cluster. Each PDB is filed under the requirement its
selector shares with the fewest other PDBs: a matchLabels pair, or the pairs an `In`
expression allows. Selectors commonly repeat one pair (`app: trainer`) and tell their pods
apart by another (`shard In [...]`); filed under the common pair, every pod of the
namespace would be matched against every PDB. A pod's answer is kept until the pod record
changes or leaves, so a preemption search asks again at the cost of a lookup (see
docs/preemption.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from batchsched.objects.records import LabelSelector, Pod, PodDisruptionBudget

Pair = tuple[str, str]


def covers(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """The PDB protects the pod: same namespace and a non-empty selector matching its labels
    (kube-scheduler's preemption skips PDBs whose selector is empty)."""
    return (
        not pdb.selector.empty
        and pod.namespace == pdb.namespace
        and pdb.selector.matches(pod.labels)
    )


def _requirements(selector: LabelSelector) -> list[tuple[Pair, ...]]:
    """Each requirement the selector makes that a matching pod's labels must show as one of
    a few pairs: a matchLabels pair, or an `In` expression's values."""
    found: list[tuple[Pair, ...]] = [(pair,) for pair in sorted(selector.match_labels.items())]
    for req in selector.match_expressions:
        if req.operator == "In":
            # Without values an `In` matches nothing: filed under no pair, never looked up.
            found.append(tuple(sorted({(req.key, value) for value in req.values})))
    return found


class PdbIndex:
    """Built from the PDBs once; ClusterState builds a new one when a selector changes and
    tells it when a pod leaves (`forget`)."""

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        filed = [pdb for pdb in pdbs if not pdb.selector.empty]
        options = {pdb.key: _requirements(pdb.selector) for pdb in filed}
        # How many PDBs of a namespace require each pair (once per PDB).
        shared = Counter(
            (pdb.namespace, *pair)
            for pdb in filed
            for pair in {pair for option in options[pdb.key] for pair in option}
        )
        # (namespace, label key, label value) -> PDBs filed under that pair.
        self._by_label: dict[tuple[str, str, str], list[PodDisruptionBudget]] = {}
        # namespace -> PDBs whose selector requires no pair (matchExpressions without `In`).
        self._by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in filed:
            if not options[pdb.key]:
                self._by_namespace.setdefault(pdb.namespace, []).append(pdb)
                continue
            # The requirement fewest other PDBs share; ties by its pairs, to stay the same
            # from run to run.
            best = min(
                options[pdb.key],
                key=lambda option: (sum(shared[(pdb.namespace, *p)] for p in option), option),
            )
            for key, value in best:
                self._by_label.setdefault((pdb.namespace, key, value), []).append(pdb)
        # Pod key -> (the pod as matched, the keys of the PDBs covering it).
        self._memo: dict[str, tuple[Pod, tuple[str, ...]]] = {}

    def covering(self, pod: Pod) -> tuple[str, ...]:
        """Keys of the PDBs that cover `pod`, each once, in key order."""
        kept = self._memo.get(pod.key)
        if kept is not None and kept[0] is pod:
            return kept[1]
        candidates = list(self._by_namespace.get(pod.namespace, ()))
        for key, value in pod.labels.items():
            # A pod has one value per key: a PDB filed under an `In` expression's pairs is
            # found at most once.
            candidates.extend(self._by_label.get((pod.namespace, key, value), ()))
        found = tuple(sorted(pdb.key for pdb in candidates if covers(pdb, pod)))
        self._memo[pod.key] = (pod, found)
        return found

    def forget(self, key: str) -> None:
        """The pod `key` left the cluster: its kept answer goes with it."""
        self._memo.pop(key, None)
