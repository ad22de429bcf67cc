"""ClusterState: the cluster as the scheduler sees it, a facade over the owners of its parts.

Each part has one owner keeping its attributes and its version: `nodes` (arrays of room, rows,
the change log, tentative scopes), `pods` (bound, pending, assumed, terminating, demand),
`policy` (PriorityClasses, PDBs, Namespaces), `groups` (PodGroups and members),
`reservations`, `nominations`, `volumes` and `devices`. Readers use the owners directly
(`state.nodes.free`, `state.pods.bound`); `mark()` is the one view of what changed since.

Worlds (live, simulator, one-shot) feed facts through the `upsert_*` / `remove_*` methods
here, which keep the owners consistent with each other (a pod reported on a node takes room
on its row, joins its group, ends its reservation) and move `generation`; the scheduler
records its own assumptions through `assume`, `forget`, `nominate` and `reserve`. Nothing here
reads a clock or does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Any

from batchsched.objects.podgroup import group_key_of
from batchsched.objects.queue_membership import QUEUE_LABEL, named_queue
from batchsched.objects.queues import Queue
from batchsched.objects.records import (
    IMPLICIT_DEVICE_CLASS,
    DeviceClass,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
)
from batchsched.state.devices import DeviceState, DraObject
from batchsched.state.fair_share import Shares
from batchsched.state.groups import Groups
from batchsched.state.mark import ClusterMark
from batchsched.state.nodes import IntArray, Nodes
from batchsched.state.nominations import Nominations
from batchsched.state.pods import Pods
from batchsched.state.policy import Policy
from batchsched.state.queue_decay import DecayedUsage
from batchsched.state.queue_ledger import Counted, QueueLedger
from batchsched.state.queues import Membership, QueueTree, Usage
from batchsched.state.reservations import (
    Reservation,
    Reservations,
    StartReservation,
    StartReservations,
)
from batchsched.state.volumes import VolumeObject, VolumeObjects


class ClusterState:
    def __init__(self) -> None:
        self.nodes = Nodes()
        self.volumes = VolumeObjects(self.nodes.row_of)
        self.pods = Pods(self.nodes, self.volumes)
        # A nomination holds room on its node for others: its coming and going is a change
        # of that node's room.
        self.nominations = Nominations(self.pods.by_key.get, self.pods.demand, self.nodes.touch)
        self.policy = Policy()
        self.groups = Groups()
        self.reservations = Reservations()
        self.start_reservations = StartReservations()
        # The holders whose start reservation was made or given back since the scheduler
        # last looked: what their pods read of the cluster changed (docs/backfill.md).
        self.moved_holders: set[str] = set()
        self.devices = DeviceState()  # DRA: slices, claims, devices in use
        self.device_classes: dict[str, DeviceClass] = {}
        # Extended resource -> the DeviceClass mapping it (spec.extendedResourceName).
        self.device_class_resources: dict[str, str] = {}
        self.queues = QueueTree()  # Queue objects (state/queues.py)
        # Each queue's usage and pending requests, told of every pod bound or pending.
        self.queue_ledger = QueueLedger(self.queues, self._queue_count)
        self.pods.on_bound = self.queue_ledger.bound_changed
        self.pods.on_pending = self.queue_ledger.pending_changed
        self._queue_labels_version = 0  # moves with a Namespace's or PodGroup's queue label
        self._allocatable: dict[str, int] | None = None  # kept by `_schedulable_allocatable`
        self._requests_by_name: dict[tuple[tuple[int, int], ...], dict[str, int]] = {}
        # Per pod: the pod object, the queues' and labels' versions, its membership and what
        # the ledger counts of it (None until asked): `queue_of`, `_queue_count`.
        self._memberships: dict[str, tuple[Pod, int, int, Membership, Counted | None]] = {}
        # What the queue ledger counts of each distinct demand (`_queue_count`), and of what.
        self._counted_requests: dict[tuple[tuple[int, int], ...], dict[str, int]] = {}
        self._counted_resources: frozenset[str] = frozenset()
        # The decayed usage last pruned of queues no longer in the tree, and the tree's version.
        self._decay_pruned: tuple[DecayedUsage | None, int] = (None, -1)

        # Moves on every change that could let a waiting pod fit.
        self.generation = 0
        self.volume_version = 0  # moves when a PVC, PV, StorageClass or CSINode changes

    # ---- what changed since --------------------------------------------------------------

    def mark(self) -> ClusterMark:
        """Where the cluster stands now: every owner's version and the log position (a
        read of the log, as `nodes.change_mark`)."""
        return self._mark_at(self.nodes.change_mark())

    def changed_since(self, mark: ClusterMark) -> frozenset[str]:
        """The versions (`ClusterMark` field names) that moved since `mark`; which node rows
        changed is `nodes.rows_changed_since(mark.rows)`. Does not read the log."""
        return self._mark_at(mark.rows).changes_from(mark)

    def _mark_at(self, rows: int) -> ClusterMark:
        # `_make` from a plain tuple: the cheapest way to make one (a mark per attempt).
        return ClusterMark._make(
            (
                rows,
                self.nodes.generation,
                self.policy.version,
                self.generation,
                self.groups.version,
                self.volume_version,
                self.devices.epoch,
                self.policy.namespace_version,
            )
        )

    # ---- nodes ---------------------------------------------------------------------------

    def upsert_node(self, node: Node) -> None:
        row = self.nodes.row_of.get(node.name)
        old = self.nodes.by_row[row] if row is not None else None
        if (
            old is None
            or old.allocatable != node.allocatable
            or old.unschedulable != node.unschedulable
        ):
            self._allocatable = None  # what the queues' fair shares divide moved
        if self.nodes.upsert(node):
            self.volumes.node_changed(node.name)
            pods = self.pods
            for key in pods.on_unlisted_node.pop(node.name, {}):
                pods.bind(key, pods.by_key[key])  # reported on it before it was listed
            for pod in pods.pending.values():
                # Pods naming this node may have arrived first: count them now.
                if pod.node_name == node.name:
                    pods.pending_changed(pod.key)
        self.generation += 1

    def remove_node(self, name: str) -> None:
        idx = self.nodes.row_of.pop(name, None)
        if idx is None:
            return
        self._allocatable = None
        pods = self.pods
        for key in list(self.nodes.pods_on[idx]):
            pods.unbind(key)
            # Still bound to that name until the world reports it gone: a node re-created under
            # it holds the pod again, as kube-scheduler's cache keeps a deleted node's pods
            # (docs/live.md).
            pods.wait_for_node(key, name)
        self.volumes.node_changed(name)
        reservation = self.reservations.by_row.get(idx)
        if reservation is not None:
            self.release(reservation.pod)
        for held in list(self.start_reservations.by_row.get(idx, ())):
            self.release_start(held.holder)
        self.nodes.clear_row(idx)
        for key, node in list(self.nominations.items()):
            if node == idx:
                del self.nominations[key]
        self.generation += 1

    def free_for(self, pod: Pod) -> IntArray:
        """Free room as seen by `pod`: nominated pods of priority >= its own hold their room.

        Without such nominations this is a view of `nodes.free` itself (not a copy).
        """
        free = self.nodes.free[: self.nodes.rows]
        adjusted = self.nominations.held_for(pod, free)
        return free if adjusted is None else adjusted

    # ---- policy objects, groups, volumes, devices ----------------------------------------

    def upsert_priority_class(self, pc: PriorityClass) -> None:
        self.policy.upsert_priority_class(pc)
        self.generation += 1

    def remove_priority_class(self, name: str) -> None:
        self.policy.remove_priority_class(name)
        self.generation += 1

    def upsert_pdb(self, pdb: PodDisruptionBudget) -> None:
        self.policy.upsert_pdb(pdb)
        self.generation += 1

    def remove_pdb(self, key: str) -> None:
        self.policy.remove_pdb(key)
        self.generation += 1

    def upsert_namespace(self, namespace: Namespace) -> None:
        self._queue_label_moves(self.policy.namespaces.get(namespace.name), namespace)
        self.policy.upsert_namespace(namespace)
        self.generation += 1

    def remove_namespace(self, name: str) -> None:
        self._queue_label_moves(self.policy.namespaces.get(name), None)
        self.policy.remove_namespace(name)
        self.generation += 1

    def _queue_label_moves(
        self, old: Namespace | PodGroup | None, new: Namespace | PodGroup | None
    ) -> None:
        """A Namespace or PodGroup names another queue for its pods: count them anew."""
        if (old.labels if old else {}).get(QUEUE_LABEL) != (new.labels if new else {}).get(
            QUEUE_LABEL
        ):
            self._queue_labels_version += 1
            self.queue_ledger.invalidate()

    def upsert_queue(self, queue: Queue) -> None:
        if self.queues.upsert(queue):
            self.generation += 1

    def remove_queue(self, name: str) -> None:
        self.queues.remove(name)
        self.generation += 1

    def queue_unreadable(self, name: str, why: str) -> None:
        """The Queue `name` exists but cannot be read (`why`: its field and what is allowed;
        live mode removed it first, as if deleted): its pods wait naming it until a version
        that can be read comes, or it is deleted (docs/queues.md#a-queue-that-cannot-be-read)."""
        self.queues.mark_unreadable(name, why)
        self.generation += 1

    def queue_of(self, pod: Pod) -> Membership:
        """The pod's leaf queue, or why it cannot be placed (docs/queues.md). Kept per pod
        object until the tree or a Namespace's or PodGroup's queue label moves: the queue
        order, the ledger and admission each ask several times per attempt."""
        return self._kept_membership(pod)[3]

    def _kept_membership(self, pod: Pod) -> tuple[Pod, int, int, Membership, Counted | None]:
        kept = self._memberships.get(pod.key)
        version = self.queues.version
        labels = self._queue_labels_version
        if kept is not None and kept[0] is pod and kept[1] == version and kept[2] == labels:
            return kept
        group = self.group_of(pod)
        namespace = self.policy.namespaces.get(pod.namespace)
        member = self.queues.member(named_queue(pod, group, namespace))
        kept = self._memberships[pod.key] = (pod, version, labels, member, None)
        return kept

    def queue_labels_at(self) -> tuple[int, int]:
        """Moves whenever some pod's queue may have: the tree changed, or a Namespace's or
        PodGroup's queue label did (what `queue_of` keeps its answers for)."""
        return (self.queues.version, self._queue_labels_version)

    def membership_version(self) -> tuple[int, int, int]:
        """What `queue_of` reads besides the pod: the queues, Namespaces' labels and PodGroups."""
        return (self.queues.version, self.policy.namespace_version, self.groups.version)

    def requests_by_name(self, pod: Pod) -> dict[str, int]:
        """The pod's requests as NodeResourcesFit counts them, by resource name: one dict
        shared by the pods of equal requests, not to be changed (the queues ask for it per
        pod, several times an attempt)."""
        key = self.pods.demand(pod).key
        found = self._requests_by_name.get(key)
        if found is None:
            if len(self._requests_by_name) >= 4096:  # as many as distinct demands are kept
                self._requests_by_name.clear()
            names = self.nodes.resources.names
            found = self._requests_by_name[key] = {names[col]: amount for col, amount in key}
        return found

    def queue_usage(self) -> Usage:
        """Each queue's usage: its subtree's bound and assumed pods' requests."""
        return self._counted_queues().usage

    def queue_staying_usage(self) -> Usage:
        """Each queue's usage without its terminating pods: room already taken back counts as
        gone, else a wave of reclaims in one pass (or a victim still shutting down at the next
        pass) would each judge the victim's queue as before the first eviction and together
        take it below its guaranteed (docs/queues.md#reclaim). Kept by the ledger as pods bind,
        terminate and go: summing the terminating pods at each attempt made a wave quadratic."""
        return self._counted_queues().staying()

    def _counted_queues(self) -> QueueLedger:
        ledger = self.queue_ledger
        if not ledger.live:
            pods = self.pods
            by_key = pods.by_key
            ledger.ensure((by_key[key] for key in pods.bound), pods.pending.values())
        return ledger

    def _queue_count(self, pod: Pod) -> Counted:
        """What the ledger counts of a pod: its leaf queue, and if it has one its requests of
        the resources whose fair shares are computed (QueueTree.shared: nothing reads the
        others' totals, and each one counted is one more to add per pod, per ancestor). Kept
        with the pod's membership: the ledger asks as the pod is pending, bound, confirmed."""
        kept = self._kept_membership(pod)
        if kept[4] is not None:
            return kept[4]
        counted = self._leaf_requests(pod, kept[3].queue)
        self._memberships[pod.key] = (*kept[:4], counted)
        return counted

    def _leaf_requests(self, pod: Pod, leaf: str) -> Counted:
        if not leaf:
            return leaf, {}
        shared = self.queues.shared()
        if shared is not self._counted_resources:  # (one set per version of the tree)
            self._counted_resources, self._counted_requests = shared, {}
        key = self.pods.demand(pod).key
        found = self._counted_requests.get(key)
        if found is None:
            if len(self._counted_requests) >= 4096:  # as many as distinct demands are kept
                self._counted_requests.clear()
            requests = self.requests_by_name(pod)
            found = {r: amount for r, amount in requests.items() if r in shared}
            self._counted_requests[key] = found
        return leaf, found

    def queue_fair_shares(self) -> Shares:
        """Each queue's fair share of each resource in play (docs/queues.md#fair-share): the
        cluster's allocatable on schedulable nodes, water-filled down the tree by demand."""
        ledger = self._counted_queues()
        cluster = self._schedulable_allocatable()
        return self.queues.fair_shares(
            self._queue_demand_at(), (ledger.usage, ledger.pending), lambda: cluster
        )

    def queue_fair_shares_at(self) -> Hashable:
        """What `queue_fair_shares` would be computed from (equal marks, equal shares),
        without computing them: the queue order rates queues only when two compete."""
        return self.queues.fair_shares_at(self._queue_demand_at())

    def _queue_demand_at(self) -> tuple[dict[str, int], int]:
        """The cluster's allocatable and the queues' demand as of now."""
        return self._schedulable_allocatable(), self._counted_queues().demand_version()

    def advance_queue_usage(self, now: float) -> None:
        """The world's clock reads `now` (seconds): each queue's decayed usage steps forward
        with the usage that held since the last step (docs/queues.md#fairness-over-time)."""
        decayed = self.queues.decayed
        if decayed is None:
            return
        tree = self.queues
        if self._decay_pruned != (decayed, tree.version):  # queues gone since: forgotten
            decayed.forget([name for name in decayed.usage if name not in tree.queues])
            self._decay_pruned = (decayed, tree.version)
        if tree.queues:
            ledger = self._counted_queues()
            decayed.advance(now, ledger.usage, tree.shared(), ledger.drain_usage_changed())

    def _schedulable_allocatable(self) -> dict[str, int]:
        """The allocatable of the nodes pods may be placed on (not cordoned), by resource;
        summed again only when a node comes, goes, or changes its allocatable or cordon (a
        pod's coming and going, an eviction, leave it as it was)."""
        if self._allocatable is None:
            nodes = self.nodes
            rows = [
                idx
                for idx, node in enumerate(nodes.by_row)
                if node is not None and not node.unschedulable
            ]
            totals = nodes.allocatable[rows].sum(axis=0)
            names = nodes.resources.names
            self._allocatable = {
                names[col]: int(amount) for col, amount in enumerate(totals) if amount
            }
        return self._allocatable

    def group_of(self, pod: Pod) -> PodGroup | None:
        """The PodGroup the pod names, if it names one and that object exists."""
        key = group_key_of(pod)
        return self.groups.by_key.get(key) if key is not None else None

    def upsert_pod_group(self, group: PodGroup) -> None:
        old = self.groups.by_key.get(group.key)
        self._queue_label_moves(old, group)
        self.groups.upsert(group)
        self.generation += 1
        # Its pending members are queued anew: their order reads the group (its creation
        # time, its priority). No other pod's order or shape reads it.
        self._members_requeued(group.key)
        if old is not None and old.max_runtime_seconds != group.max_runtime_seconds:
            self._runtime_restated(group.key)

    def pod_group_unreadable(self, key: str, why: str) -> None:
        """The PodGroup `key` exists but cannot be read (`why`: its field and what is
        allowed). It is left out (live mode removed it first, as if deleted); its pending
        members are told why they wait until a version that can be read comes, or it is
        deleted (docs/input-limits.md#live-mode)."""
        self.groups.unreadable[key] = why
        self.groups.changed(key)
        self.generation += 1
        self._members_requeued(key)

    def _members_requeued(self, group_key: str) -> None:
        pods = self.pods
        for key in self.groups.members.get(group_key, ()):
            if key in pods.pending:
                pods.pending_changed(key)

    def _runtime_restated(self, group_key: str) -> None:
        """The group's stated runtime changed, and with it, for its members stating none, the
        expected ends of those running and the stay of a reservation it or they hold: those
        rows are logged as changed, so Backfill reads their pods again and plans its
        reservations anew, and a pod it kept off there is asked again (docs/backfill.md)."""
        self.groups.runtime_version += 1
        pods = self.pods
        held = self.start_reservations.by_holder
        rows = set()
        holders = [f"PodGroup {group_key}"]
        for key in self.groups.members.get(group_key, ()):
            pod = pods.by_key.get(key)
            if pod is None or pod.max_runtime_seconds is not None:
                continue  # its own runtime rules it
            if (idx := pods.bound.get(key)) is not None:
                rows.add(idx)
            holders.append(f"Pod {key}")
        for holder in holders:
            if (reservation := held.get(holder)) is not None:
                rows.update(reservation.shares)
        for row in sorted(rows):
            self.nodes.touch(row)

    def remove_pod_group(self, key: str) -> None:
        self.release_start(f"PodGroup {key}")
        self._queue_label_moves(self.groups.by_key.get(key), None)
        self.groups.remove(key)
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
        self.nodes.generation += 1

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

    # ---- pods ----------------------------------------------------------------------------

    def upsert_pod(self, pod: Pod) -> None:
        """Record a pod as the world reports it.

        A pod this scheduler assumed onto a node keeps that assumption while the world still
        reports it unbound (the bind is in flight); a report with a node confirms it.
        `generation` moves only when room may have been freed, so waiting pods are retried
        when that can help, not on every bind.
        """
        key = pod.key
        pods = self.pods
        if pod.priority is None:
            pod.priority = self.policy.priority_of(pod)
        if pod.preemption_policy is None:
            pod.preemption_policy = self.policy.preemption_policy_of(pod)
        old = pods.by_key.get(key)
        if old is not None and old.node_name:
            pods.off_unlisted_node(key, old.node_name)
        if old is not None and old.requests != pod.requests:
            pods.forget_demand(key)
        if old is not None and old.owner_references:
            pods.count_owner_refs(old, -1)
        if pod.owner_references:
            pods.count_owner_refs(pod, +1)
        terminated = pod.terminated
        if pod.deletion_timestamp is None and pod.node_name and not terminated:
            # A victim whose deletion is on the way: the report of its DisruptionTarget
            # condition (written before the delete) must not show it staying, else a second
            # preemptor would take the room it frees (docs/queues.md#reclaim).
            pod.deletion_timestamp = pod.preempted_since()
        if pod.pod_affinity is not None:
            pods.with_pod_affinity.add(key)
            pods.term_label_keys |= pod.pod_affinity.label_keys()
        else:
            pods.with_pod_affinity.discard(key)
        if key in pods.assumed:
            if not pod.node_name and not terminated:
                pod.node_name = old.node_name if old is not None else ""
            else:
                pods.assumed.discard(key)
                self.volumes.confirm(key)
                self.devices.confirm(key)
        old_node = pods.bound.get(key)
        # The very object already counted on the node it names (a world that updates the
        # pods it reported, as the simulator confirming a bind): its room stays where it is.
        stays = (
            old is pod
            and old_node is not None
            and not terminated
            and not (pod.volumes or pod.disks)
            and self.nodes.row_of.get(pod.node_name) == old_node
        )
        if old_node is not None and not stays:
            pods.unbind(key)
        pods.by_key[key] = pod
        pods.count_extras(key, pod)
        self.groups.index(key, group_key_of(pod))
        was_pending = pods.pending.pop(key, None) is not None
        if terminated:
            self.nominations.pop(key, None)
        elif not pod.node_name:
            pods.pending[key] = pod
            self.sync_nomination(pod)
        elif stays:
            assert old_node is not None
            self.nominations.pop(key, None)
            pods.rebind(key, pod, old_node)
        else:
            self.nominations.pop(key, None)
            pods.bind(key, pod)
        if was_pending or key in pods.pending:
            pods.pending_changed(key)
        if key not in pods.pending:
            self.release(key)
        moved = pods.bound.get(key) != old_node
        resized = old is not None and old.requests != pod.requests
        if old_node is not None and (moved or resized):
            self.generation += 1

    def confirm_bound(self, pod: Pod) -> None:
        """The world reports a pod this scheduler assumed, as the very object it assumed, on
        the node it was assumed to (its status updated in place, as the simulator binds):
        `upsert_pod` for that report, without weighing what else could have changed."""
        key = pod.key
        pods = self.pods
        idx = pods.bound.get(key)
        if (
            idx is None
            or key not in pods.assumed
            or pods.by_key.get(key) is not pod
            or pod.terminated
            or pod.volumes
            or pod.disks
            or self.nodes.row_of.get(pod.node_name) != idx
        ):
            self.upsert_pod(pod)
            return
        pods.assumed.discard(key)
        self.volumes.confirm(key)
        self.devices.confirm(key)
        self.groups.member_changed(key)
        self.nominations.pop(key, None)
        pods.rebind(key, pod, idx)
        self.release(key)

    def remove_pod(self, key: str) -> None:
        pods = self.pods
        pod = pods.by_key.pop(key, None)
        if pod is None:
            return
        if pod.owner_references:
            pods.count_owner_refs(pod, -1)
        if pod.node_name:
            pods.off_unlisted_node(key, pod.node_name)
        pods.with_pod_affinity.discard(key)
        self.release(key)
        if key in pods.bound:
            pods.unbind(key)
        if key in pods.assumed:
            pods.assumed.discard(key)
            self.volumes.revert(key)
        # Claims allocated for its bind in flight: as last reported again (a report of our
        # write, if it came, stands), and not remembered as the pod's.
        self.devices.revert(key)
        self.nominations.pop(key, None)
        self.policy.forget_pod(key)
        self._memberships.pop(key, None)
        self._release_starts_naming(pod)
        self.groups.index(key, None)
        if pods.pending.pop(key, None) is not None:
            pods.pending_changed(key)
        pods.forget(key)
        self.generation += 1

    def assume(self, key: str, node_name: str) -> None:
        """The scheduler decided to bind this pod: count it on the node from now on."""
        pods = self.pods
        pod = pods.pending.pop(key)
        pods.pending_changed(key)
        self.nominations.pop(key, None)
        pod.node_name = node_name
        pod.nominated_node_name = ""
        pods.assumed.add(key)
        pods.bind(key, pod)
        self.release(key)
        self.groups.member_changed(key)

    def forget(self, key: str) -> None:
        """A bind the scheduler assumed failed: give the room back and make the pod pending.
        The devices allocated for it come free even if the pod is gone meanwhile."""
        if self.devices.revert(key):
            self.generation += 1
        pods = self.pods
        if key not in pods.assumed:
            return
        pods.assumed.discard(key)
        self.volumes.revert(key)
        pod = pods.by_key[key]
        if key in pods.bound:
            pods.unbind(key)
        pods.off_unlisted_node(key, pod.node_name)  # its node went meanwhile
        pod.node_name = ""
        pods.pending[key] = pod
        pods.pending_changed(key)
        self.groups.member_changed(key)
        self.generation += 1

    def nominate(self, key: str, node_name: str | None) -> None:
        pod = self.pods.by_key[key]
        if node_name is None:
            self.nominations.pop(key, None)
            pod.nominated_node_name = ""
        else:
            self.nominations[key] = self.nodes.row_of[node_name]
            pod.nominated_node_name = node_name

    def sync_nomination(self, pod: Pod) -> None:
        """Adopt `status.nominatedNodeName` as reported by the world (e.g. after a restart)."""
        row_of = self.nodes.row_of
        if pod.nominated_node_name and pod.nominated_node_name in row_of:
            self.nominations[pod.key] = row_of[pod.nominated_node_name]

    def mark_terminating(self, key: str, when: datetime) -> None:
        """A victim was told to go: it holds its room until the world reports it gone."""
        pods = self.pods
        pod = pods.by_key.get(key)
        if pod is not None and pod.deletion_timestamp is None:
            pod.deletion_timestamp = when
            self.generation += 1
            idx = pods.bound.get(key)
            if idx is not None:
                pods.terminating.add(key)
                self.queue_ledger.terminating_changed(key, pod)
                # Per-node pod indexes (preemption's victim table) see it.
                self.nodes.touch(idx, pod)

    # ---- reservations --------------------------------------------------------------------

    def reserve(self, node_name: str, pod_key: str, since: datetime) -> None:
        """Hold a node for one pending pod: no other pod is placed there until it is released
        (see `Reservations`)."""
        idx = self.nodes.row_of[node_name]
        held = self.reservations.by_row.get(idx)
        if held is not None and held.pod == pod_key:
            return
        if held is not None:
            self.release(held.pod)
        self.release(pod_key)
        self.reservations.hold(idx, Reservation(node_name, pod_key, since))
        self.nodes.touch(idx)

    def release(self, pod_key: str) -> None:
        """End the pod's reservation, if it holds one: the node's room is open to all again."""
        idx = self.reservations.release(pod_key)
        if idx is not None:
            self.nodes.touch(idx)
            self.generation += 1

    def hold_start(self, reservation: StartReservation) -> None:
        """Hold nodes for a waiting pod's or gang's expected start (`StartReservations`):
        other pods go there only as the Backfill plugin allows (docs/backfill.md)."""
        self.release_start(reservation.holder)
        self.start_reservations.hold(reservation)
        self.moved_holders.add(reservation.holder)
        for row in reservation.shares:
            self.nodes.touch(row)

    def _release_starts_naming(self, pod: Pod) -> None:
        """A pod gone: the start reservations it or its gang held, or that waited for it to
        end, are given back (Backfill plans them again at the next pass)."""
        if not self.start_reservations.by_holder:
            return
        key = pod.key
        group = group_key_of(pod)
        for holder, held in list(self.start_reservations.by_holder.items()):
            if key in held.waits_for or holder in (f"Pod {key}", f"PodGroup {group}"):
                self.release_start(holder)

    def release_start(self, holder: str) -> None:
        """End the holder's start reservation, if it holds one: its nodes open to all again."""
        rows = self.start_reservations.release(holder)
        for row in rows:
            self.nodes.touch(row)
        if rows:
            self.generation += 1
            self.moved_holders.add(holder)


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
    "Queue": ClusterState.upsert_queue,
    "PodDisruptionBudget": ClusterState.upsert_pdb,
    "PodGroup": ClusterState.upsert_pod_group,
    "DeviceClass": ClusterState.upsert_device_class,
    "Pod": ClusterState.upsert_pod,
}
_REMOVE: dict[str, Callable[[ClusterState, str], None]] = {
    "PriorityClass": ClusterState.remove_priority_class,
    "Node": ClusterState.remove_node,
    "Namespace": ClusterState.remove_namespace,
    "Queue": ClusterState.remove_queue,
    "PodDisruptionBudget": ClusterState.remove_pdb,
    "PodGroup": ClusterState.remove_pod_group,
    "DeviceClass": ClusterState.remove_device_class,
    "Pod": ClusterState.remove_pod,
}
