"""PodDisruptionBudgets indexed by namespace and one label pair of their selector.

A pod is matched only against the PDBs that could cover it (its namespace, and either a
selector without matchLabels or one whose chosen pair the pod carries) rather than against
every PDB in the cluster: matching stays per pod, not per pod and PDB.
"""

from __future__ import annotations

from collections.abc import Iterable

from batchsched.objects.records import Pod, PodDisruptionBudget


def covers(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """The PDB protects the pod: same namespace and a non-empty selector matching its labels
    (kube-scheduler's preemption skips PDBs whose selector is empty)."""
    return (
        not pdb.selector.empty
        and pod.namespace == pdb.namespace
        and pdb.selector.matches(pod.labels)
    )


class PdbIndex:
    """Built from the PDBs once; ClusterState builds a new one when a selector changes."""

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        # (namespace, label key, label value) -> PDBs whose matchLabels hold that pair; any
        # pair they require serves, the smallest keeps the index deterministic.
        self._by_label: dict[tuple[str, str, str], list[PodDisruptionBudget]] = {}
        # namespace -> PDBs selecting by matchExpressions alone.
        self._by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in pdbs:
            if pdb.selector.empty:
                continue
            if pdb.selector.match_labels:
                key, value = min(pdb.selector.match_labels.items())
                self._by_label.setdefault((pdb.namespace, key, value), []).append(pdb)
            else:
                self._by_namespace.setdefault(pdb.namespace, []).append(pdb)

    def covering(self, pod: Pod) -> tuple[str, ...]:
        """Keys of the PDBs that cover `pod`, each once."""
        candidates = list(self._by_namespace.get(pod.namespace, ()))
        for key, value in pod.labels.items():
            candidates.extend(self._by_label.get((pod.namespace, key, value), ()))
        return tuple(pdb.key for pdb in candidates if covers(pdb, pod))
