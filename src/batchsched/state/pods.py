"""The pods: every known pod by key, which are bound (to which row) and which pending, the
ones this scheduler assumed, the bound ones terminating, and each pod's demand.

Binding a pod takes its room on its node's row (`Nodes`) and places its volumes
(`VolumeObjects`); `ClusterState` decides when a reported pod binds, moves or goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from batchsched.framework.signature import Requests, nonzero_of, requests_of
from batchsched.objects.quantity import CPU, MEMORY
from batchsched.objects.records import Pod
from batchsched.state.nodes import Nodes
from batchsched.state.resources import Demand
from batchsched.state.volumes import VolumeObjects

_DEMAND_LIMIT = 4096  # distinct request sets remembered (a trace has a few dozen)


class Pods:
    def __init__(self, nodes: Nodes, volumes: VolumeObjects) -> None:
        self._nodes = nodes
        self._volumes = volumes
        self.by_key: dict[str, Pod] = {}
        self.bound: dict[str, int] = {}  # key -> node row
        self.pending: dict[str, Pod] = {}
        self.assumed: set[str] = set()
        # Pods reported on a node not listed (yet), per node name: counted there once it is
        # (watch streams do not order a pod's report after its node's).
        self.on_unlisted_node: dict[str, dict[str, None]] = {}
        # Bound pods told to go (deletion timestamp set): their room comes free.
        self.terminating: set[str] = set()
        # Moves whenever a pod is bound to or unbound from a node (any report of a bound pod
        # re-binds it): results derived from the set of running pods are cached against it.
        self.bound_version = 0
        # How many bound pods run at each priority (the lowest tells whether anyone can be
        # preempted at all), and the priority each bound pod was counted at.
        self._bound_priorities: dict[int, int] = {}
        self._counted_at: dict[str, int] = {}
        self._demands: dict[str, Demand] = {}
        self._demand_of: dict[Requests, Demand] = {}  # by requests (framework/signature.py)
        # What a pod's place on a node counts beyond its room, kept per pod as it is reported
        # so that moving a pod on and off its node (`hold`, `unhold`: thousands in one gang
        # search) does not read it again: the non-zero defaults scoring adds for it (cpu,
        # memory; only pods with any), and the pods with volumes or disks.
        self._gaps: dict[str, tuple[int, int]] = {}
        self._with_volumes: set[str] = set()
        self._pending_changed: set[str] = set()
        # Told of every pod bound (as it is now) or unbound (None), and of every pod whose
        # pending status changed (as it is now pending, or None): the queues' ledger.
        self.on_bound: Callable[[str, Pod | None], None] = _ignore
        self.on_pending: Callable[[str, Pod | None], None] = _ignore
        self._departed: set[str] = set()  # pods removed since `drain_departed`
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

    # ---- demand --------------------------------------------------------------------------

    def demand(self, pod: Pod) -> Demand:
        key = pod.key
        demand = self._demands.get(key)
        if demand is None:
            requests = requests_of(pod)
            demand = self._demand_of.get(requests)
            if demand is None:
                demand = self._new_demand(requests)
            self._demands[key] = demand
        return demand

    def _new_demand(self, requests: Requests) -> Demand:
        intern = self._nodes.resources.intern
        pairs = tuple(sorted((intern(name), amount) for name, amount in requests if amount))
        self._nodes.ensure_columns()
        cols = np.array([col for col, _ in pairs], dtype=np.intp)
        amounts = np.array([amount for _, amount in pairs], dtype=np.int64)
        cols.flags.writeable = amounts.flags.writeable = False  # shared by many pods
        demand = Demand(cols, amounts, pairs)
        if len(self._demand_of) >= _DEMAND_LIMIT:
            self._demand_of.clear()
        self._demand_of[requests] = demand
        return demand

    def forget_demand(self, key: str) -> None:
        """The pod's requests changed, or it is gone: its demand is read anew."""
        self._demands.pop(key, None)

    # ---- what a pod counts beyond its room -----------------------------------------------

    def count_extras(self, key: str, pod: Pod) -> None:
        """Keep what the pod's place on a node counts beyond its room (`_gaps`,
        `_with_volumes`): the pod as now reported, before it is counted on a node."""
        cpu, memory = nonzero_of(pod)
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

    def forget(self, key: str) -> None:
        """The pod is gone (already out of `by_key`, off its node, not pending): what is
        kept for it goes, and it is told to `drain_departed`."""
        self._demands.pop(key, None)
        self._gaps.pop(key, None)
        self._with_volumes.discard(key)
        self._departed.add(key)

    def _count_gap(self, idx: int, key: str, sign: int) -> None:
        """Add (sign 1) or take off (sign -1) the pod's non-zero defaults on row `idx`."""
        gap = self._gaps.get(key)
        if gap is not None:
            cells = self._nodes.gap_cells()
            cells[idx, 0] += sign * gap[0]
            cells[idx, 1] += sign * gap[1]

    def count_owner_refs(self, pod: Pod, step: int) -> None:
        """Count (step 1) or uncount (step -1) the owner pods `pod` names."""
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

    # ---- binding -------------------------------------------------------------------------

    def bind(self, key: str, pod: Pod) -> None:
        """Count the pod on the node it names: its room, its non-zero defaults, its volumes."""
        nodes = self._nodes
        idx = nodes.row_of.get(pod.node_name)
        if idx is None:
            self.wait_for_node(key, pod.node_name)
            return
        demand = self.demand(pod)  # first: a new resource widens `free`
        free = nodes.free_cells()
        for col, amount in demand.key:  # a few columns: cheaper than fancy indexing
            free[idx, col] -= amount
        self._count_gap(idx, key, 1)
        nodes.touch(idx, pod)
        self.bound[key] = idx
        nodes.pods_on[idx][key] = pod
        self.bound_version += 1
        self.on_bound(key, pod)
        self._count_priority(key, pod)
        if pod.deletion_timestamp is not None:
            self.terminating.add(key)
        if pod.volumes or pod.disks:
            self._volumes.place(pod, idx)

    def wait_for_node(self, key: str, node_name: str) -> None:
        """The pod's node `node_name` is not listed (not yet, or no longer): it is counted
        there once a node of that name is."""
        self.on_unlisted_node.setdefault(node_name, {})[key] = None

    def off_unlisted_node(self, key: str, node_name: str) -> None:
        """The pod is no longer waiting to be counted on the unlisted node `node_name`."""
        waiting = self.on_unlisted_node.get(node_name)
        if waiting is not None and waiting.pop(key, 0) is None and not waiting:
            del self.on_unlisted_node[node_name]

    def rebind(self, key: str, pod: Pod, idx: int) -> None:
        """`unbind` then `bind` on the same node for a pod whose requests did not change,
        without taking its room out and back: the pod goes last among the node's pods, and
        its priority and termination are counted anew."""
        pods = self._nodes.pods_on[idx]
        del pods[key]
        pods[key] = pod
        self._nodes.touch(idx, pod)
        self.bound_version += 1
        self.on_bound(key, pod)
        if self._counted_at[key] != (pod.priority or 0):  # (a bind confirmed: it did not)
            self._uncount_priority(key)
            self._count_priority(key, pod)
        self.terminating.discard(key)
        if pod.deletion_timestamp is not None:
            self.terminating.add(key)

    def unbind(self, key: str) -> None:
        nodes = self._nodes
        idx = self.bound.pop(key)
        pod = nodes.pods_on[idx].pop(key)
        demand = self.demand(pod)
        free = nodes.free_cells()
        for col, amount in demand.key:
            free[idx, col] += amount
        self._count_gap(idx, key, -1)
        nodes.touch(idx, pod)
        self.bound_version += 1
        self.on_bound(key, None)
        self._uncount_priority(key)
        self.terminating.discard(key)
        if pod.volumes or pod.disks:
            self._volumes.unplace(pod, idx)

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

    def lowest_bound_priority(self) -> int | None:
        """The lowest priority of a pod bound to a node, None when none is."""
        return min(self._bound_priorities, default=None)

    # ---- tentative placements ------------------------------------------------------------

    def hold(self, key: str, idx: int) -> None:
        """Show a pod on a node for a tentative placement: a pending member while its group
        is placed, so that the rules reading a node's pods (host ports, spread, inter-pod
        affinity) see it; the caller takes its room (`Nodes.take_room`). `unhold` takes a pod
        off (also a would-be victim while a gang tries placing without it); `hold` puts it
        back. The pod's non-zero defaults count on the node meanwhile, as for a bound pod:
        upstream assumes each member in its cache, so the resource scores of later members
        see them."""
        self.hold_all(((key, idx),))

    def unhold(self, key: str, idx: int) -> None:
        self.unhold_all(((key, idx),))

    def hold_all(self, placed: Iterable[tuple[str, int]]) -> None:
        """`hold` each (pod key, node row): a gang search puts many victims back at once."""
        nodes = self._nodes
        gaps, with_volumes = self._gaps, self._with_volumes
        pods_to_change, rows = nodes.pods_to_change, []
        logged: list[Pod | None] = []
        for key, idx in placed:
            pods = pods_to_change(idx)
            pod = pods.get(key)
            if pod is None:
                pod = pods[key] = self.by_key[key]
                if key in gaps:
                    self._count_gap(idx, key, 1)
                if key in with_volumes:  # its claims, disks and attachments count too
                    self._volumes.place(pod, idx)
            rows.append(idx)
            logged.append(pod)
        nodes.touch_all(rows, logged)

    def unhold_all(self, placed: Iterable[tuple[str, int]]) -> None:
        """`unhold` each (pod key, node row)."""
        nodes = self._nodes
        gaps, with_volumes = self._gaps, self._with_volumes
        pods_to_change, rows = nodes.pods_to_change, []
        logged: list[Pod | None] = []
        for key, idx in placed:
            pods = pods_to_change(idx)
            pod = pods.pop(key, None)
            if pod is not None:
                if key in gaps:
                    self._count_gap(idx, key, -1)
                if key in with_volumes:
                    self._volumes.unplace(pod, idx)
            rows.append(idx)
            logged.append(pod)
        nodes.touch_all(rows, logged)

    # ---- the scheduling queue's feed -----------------------------------------------------

    def pending_changed(self, key: str) -> None:
        """The pod's pending status, or what orders it in the queue, changed."""
        self._pending_changed.add(key)
        self.on_pending(key, self.pending.get(key))

    def drain_departed(self) -> set[str]:
        """Keys of the pods removed since the last call (for what is kept per pod outside the
        state: the scheduler's plugins forget them)."""
        departed = self._departed
        if not departed:
            return set()
        self._departed = set()
        # Each key looked up: `set - dict.keys()` walks every known pod (each pass).
        by_key = self.by_key
        return {key for key in departed if key not in by_key}

    def drain_pending_changes(self) -> set[str]:
        """Keys whose pending status changed since the last call (for the scheduling queue)."""
        changed = self._pending_changed
        self._pending_changed = set()
        return changed


def _ignore(key: str, pod: Pod | None) -> None:
    """No one listens."""
