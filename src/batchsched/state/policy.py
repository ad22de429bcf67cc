"""The policy objects: PriorityClasses, PodDisruptionBudgets and Namespaces.

Preemption reads the classes and budgets (whose changes move `version`), pod affinity reads
the namespaces' labels (`namespace_version`). `ClusterState` feeds them and moves its own
generation with them.
"""

from __future__ import annotations

from batchsched.objects.records import (
    Namespace,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PreemptionPolicy,
    PriorityClass,
)
from batchsched.objects.system_classes import SYSTEM_CLASSES
from batchsched.state.pdb_index import PdbIndex


class Policy:
    def __init__(self) -> None:
        # The API server's built-in classes exist in every cluster, listed or not.
        self.priority_classes: dict[str, PriorityClass] = dict(SYSTEM_CLASSES)
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        self._pdb_index: PdbIndex | None = None  # None: rebuilt when next asked for
        self.namespaces: dict[str, Namespace] = {}
        self.version = 0  # moves when a PriorityClass or PodDisruptionBudget changes
        self.namespace_version = 0

    def upsert_priority_class(self, pc: PriorityClass) -> None:
        self.priority_classes[pc.name] = pc
        self.version += 1

    def remove_priority_class(self, name: str) -> None:
        builtin = SYSTEM_CLASSES.get(name)  # the API server refuses to delete those
        if builtin is not None:
            self.priority_classes[name] = builtin
        else:
            self.priority_classes.pop(name, None)
        self.version += 1

    def upsert_pdb(self, pdb: PodDisruptionBudget) -> None:
        old = self.pdbs.get(pdb.key)
        self.pdbs[pdb.key] = pdb
        # A new disruptions allowed (the PDB's status) leaves the pods it covers alone.
        if old is None or (old.namespace, old.selector) != (pdb.namespace, pdb.selector):
            self._pdb_index = None
        self.version += 1

    def remove_pdb(self, key: str) -> None:
        if self.pdbs.pop(key, None) is not None:
            self._pdb_index = None
        self.version += 1

    @property
    def pdb_index(self) -> PdbIndex:
        """The PDBs indexed for matching pods; the same object until a selector changes."""
        if self._pdb_index is None:
            self._pdb_index = PdbIndex(self.pdbs.values())
        return self._pdb_index

    def forget_pod(self, key: str) -> None:
        """The pod is gone: the PDB index lets go of its answer for it."""
        if self._pdb_index is not None:
            self._pdb_index.forget(key)

    def upsert_namespace(self, namespace: Namespace) -> None:
        self.namespaces[namespace.name] = namespace
        self.namespace_version += 1

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)
        self.namespace_version += 1

    def priority_of(self, pod: Pod) -> int:
        """spec.priority, else its class's value, else the global default's, else 0."""
        own = self._own_priority(pod.priority, pod.priority_class_name)
        if own is not None:
            return own
        for pc in self.priority_classes.values():
            if pc.global_default:
                return pc.value
        return 0

    def group_priority(self, group: PodGroup) -> int | None:
        """An upstream PodGroup's own priority (spec.priority, else its class's value), or
        None when it names neither (its members' priorities stand)."""
        return self._own_priority(group.priority, group.priority_class_name)

    def _own_priority(self, priority: int | None, class_name: str) -> int | None:
        if priority is not None:
            return priority
        if class_name:
            pc = self.priority_classes.get(class_name)
            return pc.value if pc is not None else 0
        return None

    def preemption_policy_of(self, pod: Pod) -> PreemptionPolicy:
        """spec.preemptionPolicy, else its class's (as admission would have set it)."""
        if pod.preemption_policy is not None:
            return pod.preemption_policy
        pc = self.priority_classes.get(pod.priority_class_name)
        return pc.preemption_policy if pc is not None else "PreemptLowerPriority"
