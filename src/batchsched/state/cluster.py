"""ClusterState: nodes as NumPy arrays, pods indexed by node, and the policy objects.

Worlds (live, simulator, one-shot) feed it facts through the `upsert_*` / `remove_*` methods;
the scheduler records its own assumptions (a pod bound, a node nominated) through `assume`,
`forget` and `nominate`. Nothing here reads a clock or does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

import numpy as np
import numpy.typing as npt

from batchsched.objects.podgroup import group_key_of
from batchsched.objects.quantity import CPU, DEFAULT_CPU_REQUEST, DEFAULT_MEMORY_REQUEST, MEMORY
from batchsched.objects.records import (
    IMPLICIT_DEVICE_CLASS,
    DeviceClass,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PreemptionPolicy,
    PriorityClass,
)
from batchsched.objects.system_classes import SYSTEM_CLASSES
from batchsched.state.devices import DeviceState, DraObject
from batchsched.state.nominations import Nominations
from batchsched.state.pdb_index import PdbIndex
from batchsched.state.resources import ResourceIndex
from batchsched.state.volumes import VolumeObject, VolumeObjects

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_CHANGE_LOG_LIMIT = 65_536
_DEMAND_LIMIT = 4096  # distinct request sets remembered (a trace has a few dozen)


@dataclass(frozen=True, slots=True)
class Reservation:
    """A node held for the one pod that may run there (a DaemonSet pod), since `since`."""

    node: str
    pod: str
    since: datetime


@dataclass(frozen=True, slots=True)
class Demand:
    """A pod's request as array columns and amounts, ready for vectorised checks.

    Pods asking for the same requests share one Demand (`ClusterState.demand`), so what a
    plugin derives from a demand can be remembered against the object itself.
    """

    cols: npt.NDArray[np.intp]
    amounts: IntArray
    key: tuple[tuple[int, int], ...]  # (column, amount) pairs: equal keys, equal demands


class ClusterState:
    def __init__(self) -> None:
        self.resources = ResourceIndex()
        self._capacity = 0
        # Column-major: the hot loops read one resource column across all nodes.
        self.allocatable: IntArray = np.zeros((0, len(self.resources)), dtype=np.int64, order="F")
        self.free: IntArray = np.zeros((0, len(self.resources)), dtype=np.int64, order="F")
        self._cells_of, self._cells = self.free, self.free.data  # see `_free_cells`
        self.valid: BoolArray = np.zeros(0, dtype=np.bool_)
        # Per node, what scoring adds to the cpu and memory requested by its pods: the
        # non-zero defaults of pods (containers) that request none (see `nonzero_of`).
        self.nonzero_gap: IntArray = np.zeros((0, 2), dtype=np.int64)
        self.nodes: list[Node | None] = []
        self.node_index: dict[str, int] = {}
        self.node_pods: list[dict[str, Pod]] = []
        # Bumped when node labels, taints, schedulability or membership change: masks derived
        # from static node properties are cached against it.
        self.node_generation = 0
        # Bumped on every change that could let a waiting pod fit.
        self.generation = 0
        self.pods: dict[str, Pod] = {}
        # What a pod's place on a node counts beyond its room, kept per pod as it is reported
        # so that moving a pod on and off its node (`hold`, `unhold`: thousands in one gang
        # search) does not read it again: the non-zero defaults scoring adds for it (cpu,
        # memory; only pods with any), and the pods with volumes or disks.
        self._gaps: dict[str, tuple[int, int]] = {}
        self._with_volumes: set[str] = set()
        self.bound: dict[str, int] = {}
        self.pending: dict[str, Pod] = {}
        self.assumed: set[str] = set()
        # A nomination holds room on its node for others: its coming and going is a change
        # of that node's room.
        self.nominations = Nominations(self.pods.get, self.demand, self._touch)
        # The API server's built-in classes exist in every cluster, listed or not.
        self.priority_classes: dict[str, PriorityClass] = dict(SYSTEM_CLASSES)
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        self._pdb_index: PdbIndex | None = None  # None: rebuilt when next asked for
        self.namespaces: dict[str, Namespace] = {}
        self.pod_groups: dict[str, PodGroup] = {}
        self.device_classes: dict[str, DeviceClass] = {}
        # Extended resource -> the DeviceClass mapping it (spec.extendedResourceName).
        self.device_class_resources: dict[str, str] = {}
        self.devices = DeviceState()  # DRA: slices, claims, devices in use
        # PodGroup key -> keys of every known member pod (any phase), whether or not the
        # PodGroup object exists yet.
        self.group_members: dict[str, set[str]] = {}
        self._member_of: dict[str, str] = {}
        self._groups_dirty: set[str] = set()
        self.group_version = 0  # moves when a PodGroup, or its members' set or binding, does
        # Moves whenever a pod is bound to or unbound from a node (any report of a bound pod
        # re-binds it): results derived from the set of running pods are cached against it.
        self.bound_version = 0
        self._demands: dict[str, Demand] = {}
        self._demand_of: dict[tuple[tuple[str, int], ...], Demand] = {}  # by requests
        self._name_rank: IntArray | None = None
        self._rank_is_identity: bool | None = None
        self._pending_dirty: set[str] = set()
        self._departed: set[str] = set()  # pods removed since `drain_departed`
        # Nodes held for a pending pod (node row -> reservation), the reverse index, and a
        # version that moves whenever either changes (plugins cache masks against it).
        self.reservations: dict[int, Reservation] = {}
        self.reserved_by: dict[str, int] = {}
        self.reservation_version = 0
        # "namespace/name" of pods that other pods name in an ownerReference, with the
        # number of pods naming each (owner pods, e.g. a Spark driver).
        self.owner_refs: dict[str, int] = {}
        # Keys of pods carrying pod (anti-)affinity terms: while there are none, pods without
        # terms skip InterPodAffinity without looking at any node.
        self.with_pod_affinity: set[str] = set()
        # The pod label keys any pod's (anti-)affinity term has read: a pod's other labels
        # cannot change what such terms say of it. It only grows, so a pod's shape computed
        # from it stays valid while its size does.
        self.term_label_keys: set[str] = set()
        # Rows whose free or allocatable room or pods changed, in order: lets cached per-node
        # results be refreshed for those rows only. `_changed_base` is the log position of item 0.
        self._changed_rows: list[int] = []
        # Beside each logged row: the pod that arrived there, left or began terminating (None
        # for any other change of room: nominations, reservations, allocatable). Only the
        # queueing hints read it, from the marks of the pods still waiting: the part older
        # than all of those is dropped (`forget_pods_before`), so pods long gone are not
        # kept alive by the log. `_pods_base` is the log position of its item 0.
        self._changed_pods: list[Pod | None] = []
        self._changed_base = 0
        self._pods_base = 0
        # Reads of that log (marks handed out, changes asked for), and for a `tentative`
        # scope the pods of each row it touched as the scope found them: the row's own
        # mapping, put back at the scope's end (the scope works on a copy).
        self._log_reads = 0
        self._tentative_rows: dict[int, dict[str, Pod]] | None = None
        # Move when a PVC, PV, StorageClass or CSINode changes, or a Namespace.
        self.volume_version = 0
        self.namespace_version = 0
        # Moves when a PriorityClass or PodDisruptionBudget changes (preemption reads them).
        self.policy_version = 0
        # How many bound pods run at each priority (the lowest tells whether anyone can be
        # preempted at all), and the priority each bound pod was counted at.
        self._bound_priorities: dict[int, int] = {}
        # Bound pods told to go (deletion timestamp set): their room comes free.
        self.terminating_bound: set[str] = set()
        self._counted_at: dict[str, int] = {}
        self.volumes = VolumeObjects(self.node_index)

    # ---- nodes -------------------------------------------------------------------------

    @property
    def node_count(self) -> int:
        return len(self.node_index)

    def _grow_rows(self, rows: int) -> None:
        if rows <= self._capacity:
            return
        new_cap = max(rows, self._capacity * 2, 64)
        width = len(self.resources)
        for attr in ("allocatable", "free"):
            old = getattr(self, attr)
            grown = np.zeros((new_cap, width), dtype=np.int64, order="F")
            grown[: old.shape[0]] = old
            setattr(self, attr, grown)
        valid = np.zeros(new_cap, dtype=np.bool_)
        valid[: self.valid.shape[0]] = self.valid
        self.valid = valid
        gap = np.zeros((new_cap, 2), dtype=np.int64)
        gap[: self.nonzero_gap.shape[0]] = self.nonzero_gap
        self.nonzero_gap = gap
        self._capacity = new_cap

    def _ensure_columns(self) -> None:
        width = len(self.resources)
        if self.allocatable.shape[1] == width:
            return
        for attr in ("allocatable", "free"):
            old = getattr(self, attr)
            grown = np.zeros((old.shape[0], width), dtype=np.int64, order="F")
            grown[:, : old.shape[1]] = old
            setattr(self, attr, grown)

    def _vector(self, amounts: dict[str, int]) -> IntArray:
        for name in amounts:
            self.resources.intern(name)
        self._ensure_columns()
        vec = np.zeros(len(self.resources), dtype=np.int64)
        for name, amount in amounts.items():
            vec[self.resources.intern(name)] = amount
        return vec

    def upsert_node(self, node: Node) -> None:
        alloc = self._vector(node.allocatable)
        idx = self.node_index.get(node.name)
        if idx is None:
            idx = len(self.nodes)
            self._grow_rows(idx + 1)
            self.nodes.append(node)
            self.node_pods.append({})
            self.node_index[node.name] = idx
            self.volumes.node_changed(node.name)
            self.valid[idx] = True
            self.allocatable[idx] = alloc
            self.free[idx] = alloc
            self._touch(idx)
            self._name_rank = None
            for pod in self.pending.values():
                # Pods naming this node may have arrived first: count them now.
                if pod.node_name == node.name:
                    self._pending_dirty.add(pod.key)
        else:
            old = self.nodes[idx]
            used = self.allocatable[idx] - self.free[idx]
            self.allocatable[idx] = alloc
            self.free[idx] = alloc - used
            self._touch(idx)
            self.nodes[idx] = node
            if old is not None and (
                old.labels == node.labels
                and old.taints == node.taints
                and old.unschedulable == node.unschedulable
                and old.images == node.images
            ):
                self.generation += 1
                return
        self.node_generation += 1
        self.generation += 1

    def remove_node(self, name: str) -> None:
        idx = self.node_index.pop(name, None)
        if idx is None:
            return
        for key in list(self.node_pods[idx]):
            self._unbind(key)
        self.volumes.node_changed(name)
        reservation = self.reservations.get(idx)
        if reservation is not None:
            self.release(reservation.pod)
        self.nodes[idx] = None
        self.valid[idx] = False
        self.allocatable[idx] = 0
        self.free[idx] = 0
        self.nonzero_gap[idx] = 0
        self._touch(idx)
        for key, node in list(self.nominations.items()):
            if node == idx:
                del self.nominations[key]
        self._name_rank = None
        self.node_generation += 1
        self.generation += 1

    def _touch(self, idx: int, pod: Pod | None = None) -> None:
        # Not within a tentative scope: its entries are to be dropped at its end, and a
        # cache whose mark the log no longer reaches rebuilds from scratch.
        if len(self._changed_rows) >= _CHANGE_LOG_LIMIT and self._tentative_rows is None:
            self._changed_base += len(self._changed_rows)
            self._pods_base = self._changed_base
            self._changed_rows = []
            self._changed_pods = []
        self._changed_rows.append(idx)
        self._changed_pods.append(pod)

    def _touch_all(self, rows: Sequence[int], pods: Sequence[Pod | None]) -> None:
        """`_touch` each row with its pod, in one step unless the log is to roll over."""
        if self._tentative_rows is None and len(self._changed_rows) + len(rows) > _CHANGE_LOG_LIMIT:
            for idx, pod in zip(rows, pods, strict=True):
                self._touch(idx, pod)
        else:
            self._changed_rows += rows
            self._changed_pods += pods

    @contextmanager
    def tentative(self) -> Iterator[None]:
        """A scope for changes that the caller undoes before it ends (a search trying
        placements: `hold` / `unhold`, room taken on the state's own `free`). Each row's pods
        are put back in the order they had, and if nothing read the change log meanwhile
        (`change_mark`, `rows_changed_since`, `pods_changed_since`) the scope's entries are
        dropped: caches following the log then do not refresh rows that end as they were.
        Had anything read the log, it saw the rows change and must see them change back."""
        assert self._tentative_rows is None, "tentative scopes do not nest"
        length, reads = len(self._changed_rows), self._log_reads
        pods_length = len(self._changed_pods)
        rows: dict[int, dict[str, Pod]] = {}
        self._tentative_rows = rows
        try:
            yield
        finally:
            self._tentative_rows = None
        node_pods = self.node_pods
        for idx, pods in rows.items():
            # The same pods (in whatever order): the row's own mapping, in its order, back.
            if node_pods[idx].keys() != pods.keys():
                raise AssertionError(f"row {idx}'s pods were not restored")
            node_pods[idx] = pods
        if self._log_reads == reads:
            del self._changed_rows[length:]
            del self._changed_pods[pods_length:]

    def change_mark(self) -> int:
        """A position in the log of changed node rows."""
        self._log_reads += 1
        return self._changed_base + len(self._changed_rows)

    def rows_changed_since(self, mark: int) -> list[int] | None:
        """Rows whose room changed since `mark`, or None if the log no longer reaches back."""
        self._log_reads += 1
        if mark < self._changed_base:
            return None
        return self._changed_rows[mark - self._changed_base :]

    def pods_changed_since(self, mark: int) -> Iterator[Pod | None] | None:
        """The pods behind the row changes since `mark` (None for a change that came from no
        pod), or None if the log no longer reaches back."""
        self._log_reads += 1
        if mark < self._pods_base:
            return None
        return islice(self._changed_pods, mark - self._pods_base, None)

    def forget_pods_before(self, mark: int | None) -> None:
        """Nothing will ask `pods_changed_since` for a mark before `mark` (None: for any mark
        handed out so far): the pods logged before it may go. Dropped when that is at least
        half of them, so each entry is moved at most twice."""
        end = self._changed_base + len(self._changed_rows)
        if self._tentative_rows is not None:
            return  # the scope puts the log's end back: not a time to move its start
        drop = (end if mark is None else min(mark, end)) - self._pods_base
        if drop > 0 and 2 * drop >= len(self._changed_pods):
            del self._changed_pods[:drop]
            self._pods_base += drop

    def node_name(self, idx: int) -> str:
        node = self.nodes[idx]
        assert node is not None, f"node slot {idx} is empty"
        return node.name

    def live_nodes(self) -> Iterator[tuple[int, Node]]:
        for idx, node in enumerate(self.nodes):
            if node is not None:
                yield idx, node

    @property
    def rows(self) -> int:
        """Rows in use in the node arrays (including slots of removed nodes)."""
        return len(self.nodes)

    def name_rank(self) -> IntArray:
        """Each node row's position in name order: ties between nodes break on name."""
        if self._name_rank is None or self._name_rank.shape[0] != self.rows:
            order = sorted(
                range(self.rows), key=lambda i: (self.nodes[i] is None, self._sort_name(i))
            )
            rank = np.empty(self.rows, dtype=np.int64)
            rank[np.asarray(order, dtype=np.intp)] = np.arange(self.rows, dtype=np.int64)
            self._name_rank = rank
            self._rank_is_identity = None
        return self._name_rank

    def names_in_row_order(self) -> bool:
        """True when rows are in node-name order (nodes added sorted): ties resolve by row."""
        rank = self.name_rank()
        if self._rank_is_identity is None:
            self._rank_is_identity = bool(
                np.array_equal(rank, np.arange(rank.shape[0])) and self.valid[: self.rows].all()
            )
        return self._rank_is_identity

    def _sort_name(self, idx: int) -> str:
        node = self.nodes[idx]
        return node.name if node is not None else ""

    # ---- policy objects ----------------------------------------------------------------

    def upsert_priority_class(self, pc: PriorityClass) -> None:
        self.priority_classes[pc.name] = pc
        self.policy_version += 1
        self.generation += 1

    def remove_priority_class(self, name: str) -> None:
        builtin = SYSTEM_CLASSES.get(name)  # the API server refuses to delete those
        if builtin is not None:
            self.priority_classes[name] = builtin
        else:
            self.priority_classes.pop(name, None)
        self.policy_version += 1
        self.generation += 1

    def upsert_pdb(self, pdb: PodDisruptionBudget) -> None:
        old = self.pdbs.get(pdb.key)
        self.pdbs[pdb.key] = pdb
        # A new disruptions allowed (the PDB's status) leaves the pods it covers alone.
        if old is None or (old.namespace, old.selector) != (pdb.namespace, pdb.selector):
            self._pdb_index = None
        self.policy_version += 1
        self.generation += 1

    def remove_pdb(self, key: str) -> None:
        if self.pdbs.pop(key, None) is not None:
            self._pdb_index = None
        self.policy_version += 1
        self.generation += 1

    @property
    def pdb_index(self) -> PdbIndex:
        """The PDBs indexed for matching pods; the same object until a selector changes."""
        if self._pdb_index is None:
            self._pdb_index = PdbIndex(self.pdbs.values())
        return self._pdb_index

    def upsert_namespace(self, namespace: Namespace) -> None:
        self.namespaces[namespace.name] = namespace
        self.namespace_version += 1
        self.generation += 1

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)
        self.namespace_version += 1
        self.generation += 1

    def upsert_pod_group(self, group: PodGroup) -> None:
        self.pod_groups[group.key] = group
        self._group_changed(group.key)
        self.generation += 1
        # Its pending members are queued anew: their order reads the group (its creation
        # time, its priority). No other pod's order or shape reads it.
        pending = self.pending
        for key in self.group_members.get(group.key, ()):
            if key in pending:
                self._pending_dirty.add(key)

    def remove_pod_group(self, key: str) -> None:
        self.pod_groups.pop(key, None)
        self._group_changed(key)
        self.generation += 1

    def upsert_device_class(self, device_class: DeviceClass) -> None:
        self.device_classes[device_class.name] = device_class
        self._map_device_classes()

    def remove_device_class(self, name: str) -> None:
        self.device_classes.pop(name, None)
        self._map_device_classes()

    def _map_device_classes(self) -> None:
        mapped: dict[str, str] = {}
        for name in sorted(self.device_classes):
            mapped[f"{IMPLICIT_DEVICE_CLASS}{name}"] = name
            resource = self.device_classes[name].extended_resource_name
            if resource:
                mapped.setdefault(resource, name)
        self.device_class_resources = mapped
        self.devices.classes_changed()
        self.generation += 1
        # Which resources NodeResourcesFit leaves to DRA moved: verdicts kept per pod shape
        # (e.g. DynamicResources' "nothing to allocate") are stale.
        self.node_generation += 1

    def upsert_volume_object(self, obj: VolumeObject) -> None:
        """A PVC, PV, StorageClass or CSINode: pods waiting on volumes may fit now."""
        self.volumes.upsert(obj)
        self.volume_version += 1
        self.generation += 1

    def remove_volume_object(self, kind: str, key: str) -> None:
        self.volumes.remove(kind, key)
        self.volume_version += 1
        self.generation += 1

    def upsert_dra_object(self, obj: DraObject) -> None:
        """A ResourceSlice, ResourceClaim or ResourceClaimTemplate: pods waiting on devices
        may fit now."""
        self.devices.upsert(obj)
        self.generation += 1

    def remove_dra_object(self, kind: str, key: str) -> None:
        self.devices.remove(kind, key)
        self.generation += 1

    def apply(self, kind: str, record: Any) -> None:
        """Add or replace one object of `kind`, a name of the kind registry (objects/kinds.py)."""
        if kind in _VOLUME_KINDS:
            self.upsert_volume_object(record)
        elif kind in _DRA_KINDS:
            self.upsert_dra_object(record)
        else:
            _UPSERT[kind](self, record)

    def remove(self, kind: str, key: str) -> None:
        """Forget the object of `kind` held under `key` (a name, or `namespace/name`)."""
        if kind in _VOLUME_KINDS:
            self.remove_volume_object(kind, key)
        elif kind in _DRA_KINDS:
            self.remove_dra_object(kind, key)
        else:
            _REMOVE[kind](self, key)

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

    # ---- pods --------------------------------------------------------------------------

    def demand(self, pod: Pod) -> Demand:
        key = pod.key
        demand = self._demands.get(key)
        if demand is None:
            requests = tuple(pod.requests.items())
            demand = self._demand_of.get(requests)
            if demand is None:
                demand = self._new_demand(requests)
            self._demands[key] = demand
        return demand

    def _new_demand(self, requests: tuple[tuple[str, int], ...]) -> Demand:
        intern = self.resources.intern
        pairs = tuple(sorted((intern(name), amount) for name, amount in requests if amount))
        self._ensure_columns()
        cols = np.array([col for col, _ in pairs], dtype=np.intp)
        amounts = np.array([amount for _, amount in pairs], dtype=np.int64)
        cols.flags.writeable = amounts.flags.writeable = False  # shared by many pods
        demand = Demand(cols, amounts, pairs)
        if len(self._demand_of) >= _DEMAND_LIMIT:
            self._demand_of.clear()
        self._demand_of[requests] = demand
        return demand

    def upsert_pod(self, pod: Pod) -> None:
        """Record a pod as the world reports it.

        A pod this scheduler assumed onto a node keeps that assumption while the world still
        reports it unbound (the bind is in flight); a report with a node confirms it.
        `generation` moves only when room may have been freed, so waiting pods are retried
        when that can help, not on every bind.
        """
        key = pod.key
        if pod.priority is None:
            pod.priority = self.priority_of(pod)
        if pod.preemption_policy is None:
            pod.preemption_policy = self.preemption_policy_of(pod)
        old = self.pods.get(key)
        if old is not None and old.requests != pod.requests:
            self._demands.pop(key, None)
        if old is not None and old.owner_references:
            self._count_owner_refs(old, -1)
        if pod.owner_references:
            self._count_owner_refs(pod, +1)
        terminated = pod.terminated
        if pod.pod_affinity is not None:
            self.with_pod_affinity.add(key)
            self.term_label_keys |= pod.pod_affinity.label_keys()
        else:
            self.with_pod_affinity.discard(key)
        if key in self.assumed:
            if not pod.node_name and not terminated:
                pod.node_name = old.node_name if old is not None else ""
            else:
                self.assumed.discard(key)
                self.volumes.confirm(key)
                self.devices.confirm(key)
        old_node = self.bound.get(key)
        # The very object already counted on the node it names (a world that updates the
        # pods it reported, as the simulator confirming a bind): its room stays where it is.
        stays = (
            old is pod
            and old_node is not None
            and not terminated
            and not (pod.volumes or pod.disks)
            and self.node_index.get(pod.node_name) == old_node
        )
        if old_node is not None and not stays:
            self._unbind(key)
        self.pods[key] = pod
        self._count_extras(key, pod)
        self._index_group(key, group_key_of(pod))
        was_pending = self.pending.pop(key, None) is not None
        if terminated:
            self.nominations.pop(key, None)
        elif not pod.node_name:
            self.pending[key] = pod
            self.sync_nomination(pod)
        elif stays:
            assert old_node is not None
            self.nominations.pop(key, None)
            self._rebind(key, pod, old_node)
        else:
            self.nominations.pop(key, None)
            self._bind(key, pod)
        if was_pending or key in self.pending:
            self._pending_dirty.add(key)
        if key not in self.pending:
            self.release(key)
        moved = self.bound.get(key) != old_node
        resized = old is not None and old.requests != pod.requests
        if old_node is not None and (moved or resized):
            self.generation += 1

    def confirm_bound(self, pod: Pod) -> None:
        """The world reports a pod this scheduler assumed, as the very object it assumed, on
        the node it was assumed to (its status updated in place, as the simulator binds):
        `upsert_pod` for that report, without weighing what else could have changed."""
        key = pod.key
        idx = self.bound.get(key)
        if (
            idx is None
            or key not in self.assumed
            or self.pods.get(key) is not pod
            or pod.terminated
            or pod.volumes
            or pod.disks
            or self.node_index.get(pod.node_name) != idx
        ):
            self.upsert_pod(pod)
            return
        self.assumed.discard(key)
        self.volumes.confirm(key)
        self.devices.confirm(key)
        self._touch_group(key)
        self.nominations.pop(key, None)
        self._rebind(key, pod, idx)
        self.release(key)

    def remove_pod(self, key: str) -> None:
        pod = self.pods.pop(key, None)
        if pod is None:
            return
        if pod.owner_references:
            self._count_owner_refs(pod, -1)
        self.with_pod_affinity.discard(key)
        self.release(key)
        if key in self.bound:
            self._unbind(key)
        if key in self.assumed:
            self.assumed.discard(key)
            self.volumes.revert(key)
        # Claims allocated for its bind in flight: as last reported again (a report of our
        # write, if it came, stands), and not remembered as the pod's.
        self.devices.revert(key)
        self.nominations.pop(key, None)
        self._demands.pop(key, None)
        if self._pdb_index is not None:
            self._pdb_index.forget(key)
        self._index_group(key, None)
        if self.pending.pop(key, None) is not None:
            self._pending_dirty.add(key)
        self._gaps.pop(key, None)
        self._with_volumes.discard(key)
        self._departed.add(key)
        self.generation += 1

    def _bind(self, key: str, pod: Pod) -> None:
        idx = self.node_index.get(pod.node_name)
        if idx is None:
            # Its node is unknown (not yet listed, or gone): the pod holds nothing we can see.
            return
        demand = self.demand(pod)  # first: a new resource widens `free`
        free = self._free_cells()
        for col, amount in demand.key:  # a few columns: cheaper than fancy indexing
            free[idx, col] -= amount
        self._count_gap(idx, key, 1)
        self._touch(idx, pod)
        self.bound[key] = idx
        self.node_pods[idx][key] = pod
        self.bound_version += 1
        self._count_priority(key, pod)
        if pod.deletion_timestamp is not None:
            self.terminating_bound.add(key)
        if pod.volumes or pod.disks:
            self.volumes.place(pod, idx)

    def _rebind(self, key: str, pod: Pod, idx: int) -> None:
        """`_unbind` then `_bind` on the same node for a pod whose requests did not change,
        without taking its room out and back: the pod goes last among the node's pods, and
        its priority and termination are counted anew."""
        pods = self.node_pods[idx]
        del pods[key]
        pods[key] = pod
        self._touch(idx, pod)
        self.bound_version += 1
        self._uncount_priority(key)
        self._count_priority(key, pod)
        self.terminating_bound.discard(key)
        if pod.deletion_timestamp is not None:
            self.terminating_bound.add(key)

    def _count_priority(self, key: str, pod: Pod) -> None:
        priority = pod.priority or 0
        self._counted_at[key] = priority
        self._bound_priorities[priority] = self._bound_priorities.get(priority, 0) + 1

    def _uncount_priority(self, key: str) -> None:
        priority = self._counted_at.pop(key)
        left = self._bound_priorities[priority] - 1
        if left:
            self._bound_priorities[priority] = left
        else:
            del self._bound_priorities[priority]

    def _unbind(self, key: str) -> None:
        idx = self.bound.pop(key)
        pod = self.node_pods[idx].pop(key)
        demand = self.demand(pod)
        free = self._free_cells()
        for col, amount in demand.key:
            free[idx, col] += amount
        self._count_gap(idx, key, -1)
        self._touch(idx, pod)
        self.bound_version += 1
        self._uncount_priority(key)
        self.terminating_bound.discard(key)
        if pod.volumes or pod.disks:
            self.volumes.unplace(pod, idx)

    def lowest_bound_priority(self) -> int | None:
        """The lowest priority of a pod bound to a node, None when none is."""
        return min(self._bound_priorities, default=None)

    def _free_cells(self) -> memoryview:
        """`free` as a memoryview, to read and write single cells without making NumPy
        scalars (a pod's few columns as it binds and leaves); made anew when `free` is."""
        if self._cells_of is not self.free:
            self._cells_of = self.free
            self._cells = self.free.data
        return self._cells

    def _count_extras(self, key: str, pod: Pod) -> None:
        """Keep what the pod's place on a node counts beyond its room (`_gaps`,
        `_with_volumes`): the pod as now reported, before it is counted on a node."""
        cpu, memory = self.nonzero_of(pod)
        cpu -= pod.requests.get(CPU, 0)
        memory -= pod.requests.get(MEMORY, 0)
        if cpu or memory:
            self._gaps[key] = cpu, memory
        else:
            self._gaps.pop(key, None)
        if pod.volumes or pod.disks:
            self._with_volumes.add(key)
        else:
            self._with_volumes.discard(key)

    def _count_gap(self, idx: int, key: str, sign: int) -> None:
        """Add (sign 1) or take off (sign -1) the pod's non-zero defaults on row `idx`."""
        gap = self._gaps.get(key)
        if gap is not None:
            row = self.nonzero_gap[idx]
            row[0] += sign * gap[0]
            row[1] += sign * gap[1]

    @staticmethod
    def nonzero_of(pod: Pod) -> tuple[int, int]:
        """The pod's cpu and memory as scoring counts them (at least the non-zero defaults
        when it requests none); from its containers when it was read from a manifest."""
        if pod.nonzero_requests is not None:
            return pod.nonzero_requests
        return (
            pod.requests.get(CPU) or DEFAULT_CPU_REQUEST,
            pod.requests.get(MEMORY) or DEFAULT_MEMORY_REQUEST,
        )

    def assume(self, key: str, node_name: str) -> None:
        """The scheduler decided to bind this pod: count it on the node from now on."""
        pod = self.pending.pop(key)
        self._pending_dirty.add(key)
        self.nominations.pop(key, None)
        pod.node_name = node_name
        pod.nominated_node_name = ""
        self.assumed.add(key)
        self._bind(key, pod)
        self.release(key)
        self._touch_group(key)

    def hold(self, key: str, idx: int) -> None:
        """Show a pod on a node for a tentative placement: a pending member while its group
        is placed, so that the rules reading a node's pods (host ports, spread, inter-pod
        affinity) see it; the caller takes its room (`take_room`). `unhold` takes a pod off
        (also a would-be victim while a gang tries placing without it); `hold` puts it back.
        The pod's non-zero defaults count on the node meanwhile, as for a bound pod: upstream
        assumes each member in its cache, so the resource scores of later members see them."""
        self.hold_all(((key, idx),))

    def unhold(self, key: str, idx: int) -> None:
        self.unhold_all(((key, idx),))

    def hold_all(self, placed: Iterable[tuple[str, int]]) -> None:
        """`hold` each (pod key, node row): a gang search puts many victims back at once."""
        kept, gaps, with_volumes = self._tentative_rows, self._gaps, self._with_volumes
        node_pods, rows = self.node_pods, []
        logged: list[Pod | None] = []
        for key, idx in placed:
            pods = node_pods[idx]
            if kept is not None and idx not in kept:
                kept[idx], pods = pods, dict(pods)
                node_pods[idx] = pods
            pod = pods.get(key)
            if pod is None:
                pod = pods[key] = self.pods[key]
                if key in gaps:
                    self._count_gap(idx, key, 1)
                if key in with_volumes:  # its claims, disks and attachments count too
                    self.volumes.place(pod, idx)
            rows.append(idx)
            logged.append(pod)
        self._touch_all(rows, logged)

    def unhold_all(self, placed: Iterable[tuple[str, int]]) -> None:
        """`unhold` each (pod key, node row)."""
        kept, gaps, with_volumes = self._tentative_rows, self._gaps, self._with_volumes
        node_pods, rows = self.node_pods, []
        logged: list[Pod | None] = []
        for key, idx in placed:
            pods = node_pods[idx]
            if kept is not None and idx not in kept:
                kept[idx], pods = pods, dict(pods)
                node_pods[idx] = pods
            pod = pods.pop(key, None)
            if pod is not None:
                if key in gaps:
                    self._count_gap(idx, key, -1)
                if key in with_volumes:
                    self.volumes.unplace(pod, idx)
            rows.append(idx)
            logged.append(pod)
        self._touch_all(rows, logged)

    def forget(self, key: str) -> None:
        """A bind the scheduler assumed failed: give the room back and make the pod pending.
        The devices allocated for it come free even if the pod is gone meanwhile."""
        if self.devices.revert(key):
            self.generation += 1
        if key not in self.assumed:
            return
        self.assumed.discard(key)
        self.volumes.revert(key)
        pod = self.pods[key]
        if key in self.bound:
            self._unbind(key)
        pod.node_name = ""
        self.pending[key] = pod
        self._pending_dirty.add(key)
        self._touch_group(key)
        self.generation += 1

    def nominate(self, key: str, node_name: str | None) -> None:
        pod = self.pods[key]
        if node_name is None:
            self.nominations.pop(key, None)
            pod.nominated_node_name = ""
        else:
            self.nominations[key] = self.node_index[node_name]
            pod.nominated_node_name = node_name

    def sync_nomination(self, pod: Pod) -> None:
        """Adopt `status.nominatedNodeName` as reported by the world (e.g. after a restart)."""
        if pod.nominated_node_name and pod.nominated_node_name in self.node_index:
            self.nominations[pod.key] = self.node_index[pod.nominated_node_name]

    def mark_terminating(self, key: str, when: datetime) -> None:
        """A victim was told to go: it holds its room until the world reports it gone."""
        pod = self.pods.get(key)
        if pod is not None and pod.deletion_timestamp is None:
            pod.deletion_timestamp = when
            self.generation += 1
            idx = self.bound.get(key)
            if idx is not None:
                self.terminating_bound.add(key)
                self._touch(idx, pod)  # per-node pod indexes (preemption's victim table) see it

    def _index_group(self, key: str, group: str | None) -> None:
        old = self._member_of.get(key)
        if old is not None:
            self._group_changed(old)
            if old != group:
                members = self.group_members[old]
                members.discard(key)
                if not members:
                    del self.group_members[old]
                del self._member_of[key]
        if group is not None:
            self._member_of[key] = group
            self.group_members.setdefault(group, set()).add(key)
            self._group_changed(group)

    def _touch_group(self, key: str) -> None:
        group = self._member_of.get(key)
        if group is not None:
            self._group_changed(group)

    def _group_changed(self, group: str) -> None:
        self._groups_dirty.add(group)
        self.group_version += 1

    def drain_group_changes(self) -> set[str]:
        """PodGroup keys whose object or members changed since the last call."""
        dirty = self._groups_dirty
        self._groups_dirty = set()
        return dirty

    def drain_departed(self) -> set[str]:
        """Keys of the pods removed since the last call (for what is kept per pod outside the
        state: the scheduler's plugins forget them)."""
        departed = self._departed
        self._departed = set()
        return departed - self.pods.keys()

    def drain_pending_changes(self) -> set[str]:
        """Keys whose pending status changed since the last call (for the scheduling queue)."""
        dirty = self._pending_dirty
        self._pending_dirty = set()
        return dirty

    def free_for(self, pod: Pod) -> IntArray:
        """Free room as seen by `pod`: nominated pods of priority >= its own hold their room.

        Without such nominations this is a view of `free` itself (not a copy).
        """
        free = self.free[: self.rows]
        adjusted = self.nominations.held_for(pod, free)
        return free if adjusted is None else adjusted

    def is_shared_free(self, free: IntArray) -> bool:
        """Whether `free` (from `free_for`) is a view of the state's own room, not adjusted."""
        return free.base is self.free

    # ---- reservations and owners --------------------------------------------------------

    def reserve(self, node_name: str, pod_key: str, since: datetime) -> None:
        """Hold a node for one pending pod: no other pod is placed there until it is released.

        A pod holds at most one node and a node is held for at most one pod; the reservation
        ends when the pod binds, stops pending or goes away, or the node goes away.
        """
        idx = self.node_index[node_name]
        held = self.reservations.get(idx)
        if held is not None and held.pod == pod_key:
            return
        if held is not None:
            self.release(held.pod)
        self.release(pod_key)
        self.reservations[idx] = Reservation(node_name, pod_key, since)
        self.reserved_by[pod_key] = idx
        self.reservation_version += 1
        self._touch(idx)

    def release(self, pod_key: str) -> None:
        """End the pod's reservation, if it holds one: the node's room is open to all again."""
        idx = self.reserved_by.pop(pod_key, None)
        if idx is None:
            return
        del self.reservations[idx]
        self.reservation_version += 1
        self._touch(idx)
        self.generation += 1

    def reservation_of(self, pod_key: str) -> Reservation | None:
        idx = self.reserved_by.get(pod_key)
        return None if idx is None else self.reservations[idx]

    def _count_owner_refs(self, pod: Pod | None, step: int) -> None:
        if pod is None:
            return
        for ref in pod.owner_references:
            if ref.kind != "Pod":
                continue
            owner = f"{pod.namespace}/{ref.name}"
            count = self.owner_refs.get(owner, 0) + step
            if count > 0:
                self.owner_refs[owner] = count
            else:
                self.owner_refs.pop(owner, None)

    def is_owner(self, pod: Pod) -> bool:
        """Whether another pod names this pod in an ownerReference (same namespace)."""
        return pod.key in self.owner_refs

    def take_room(self, free: IntArray, idx: int, demand: Demand, sign: int = 1) -> None:
        """Take (sign 1) or give back (sign -1) a demand's room on one row of `free`.

        For tentative placements that are undone or made real within one scheduling step;
        when `free` is the state's own room the change is logged like any other, so cached
        per-node results are refreshed for that row.
        """
        shared = self.is_shared_free(free)
        cells = self._free_cells() if shared else free.data
        for col, amount in demand.key:  # a few columns: cheaper than fancy indexing
            cells[idx, col] -= sign * amount
        if shared:
            self._touch(idx)


def rows_differ(a: IntArray, b: IntArray, cols: list[int] | None = None) -> BoolArray:
    """Rows where `a` (its columns `cols`, all if None) and `b` differ; column by column,
    which is several times faster than `(a != b).any(axis=1)` on a few columns of a
    column-major array."""
    differ: BoolArray = np.zeros(a.shape[0], dtype=np.bool_)
    for i, col in enumerate(range(a.shape[1]) if cols is None else cols):
        differ |= a[:, col] != b[:, i]
    return differ


_VOLUME_KINDS = frozenset(
    {
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "CSINode",
        "VolumeAttachment",
        "CSIDriver",
        "CSIStorageCapacity",
    }
)
_DRA_KINDS = frozenset({"ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"})
_UPSERT: dict[str, Callable[[ClusterState, Any], None]] = {
    "PriorityClass": ClusterState.upsert_priority_class,
    "Node": ClusterState.upsert_node,
    "Namespace": ClusterState.upsert_namespace,
    "PodDisruptionBudget": ClusterState.upsert_pdb,
    "PodGroup": ClusterState.upsert_pod_group,
    "DeviceClass": ClusterState.upsert_device_class,
    "Pod": ClusterState.upsert_pod,
}
_REMOVE: dict[str, Callable[[ClusterState, str], None]] = {
    "PriorityClass": ClusterState.remove_priority_class,
    "Node": ClusterState.remove_node,
    "Namespace": ClusterState.remove_namespace,
    "PodDisruptionBudget": ClusterState.remove_pdb,
    "PodGroup": ClusterState.remove_pod_group,
    "DeviceClass": ClusterState.remove_device_class,
    "Pod": ClusterState.remove_pod,
}
