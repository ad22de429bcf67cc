"""What each queue's pods take and ask, kept as pods come and go (docs/queues.md#admission).

Per queue, the requests of its subtree's bound (and assumed) pods, its *usage*, of those of
them terminating (reclaim counts their room as already taken back), and of its subtree's
pending pods, of the resources whose fair shares are computed (QueueTree.shared: some queue
names them, or the simulator measures them; no reader looks at the others). A pod is counted
once in each, under the leaf it was in when counted, and taken off by that same record, so
the totals always equal a recount; everything is recounted when what decides a pod's queue or
what is counted moves (the tree and its resources, a Namespace's or a PodGroup's queue label:
`invalidate`). Binding a pod costs a walk up its leaf's path, not a recount of every pod: the
recount was quadratic over a pass that binds thousands of pods. Pending pods are counted when
the pending totals or the demand are read (most pods of a busy trace are pending only within
the pass that binds them, and nothing reads those totals in between).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet

from batchsched.objects.records import Pod
from batchsched.state.queues import QueueTree, Usage

# A pod's leaf queue ("" for none) and its requests by resource name.
Counted = tuple[str, Mapping[str, int]]
# A pod object as last told, and what it was counted as (None: in no queue, not counted).
Told = tuple[Pod, Counted | None]
_NOTHING: frozenset[str] = frozenset()
_NONE: Mapping[str, int] = {}
_TOLD_KEPT = 4096  # pending pods told before they are counted anyway (bounds memory)


class QueueLedger:
    def __init__(self, tree: QueueTree, count_of: Callable[[Pod], Counted]) -> None:
        self._tree = tree
        self._count_of = count_of
        self.usage: dict[str, dict[str, int]] = {}  # queue -> resource -> its subtree's
        self._pending: dict[str, dict[str, int]] = {}
        # Pod key -> as it was last told pending (None: not pending), since `pending` was
        # last counted: a pod pending only between two readings (told, then bound in the same
        # pass, as most are) costs no count.
        self._told_pending: dict[str, Pod | None] = {}
        self.leaving: dict[str, dict[str, int]] = {}  # of `usage`: the terminating pods'
        # Pod key -> the pod object last told as bound, as pending, and what it was counted
        # as: told again (a binding confirmed, a pending pod reported anew), it is counted as
        # it was, unasked.
        self._bound: dict[str, Told] = {}
        self._waiting: dict[str, Told] = {}
        self._terminating: dict[str, Counted] = {}
        self._paths: dict[str, tuple[str, ...]] = {}  # leaf -> the names on its path
        # The leaves whose demand (usage + pending) may have moved since `demand_version` was
        # read, and each one's demand then: binding a pending pod moves it by nothing.
        self._demand_dirty: set[str] = set()
        self._demand_seen: dict[str, dict[str, int]] = {}
        self._demand_version = 0
        self._usage_moved: set[str] = set()  # leaves whose usage moved since drained
        # The queues (every level) whose usage moved since drained, for decay (None: any).
        self._usage_changed: set[str] | None = None
        self._counted_at = -1  # the tree's version the totals hold for; -1: none

    @property
    def live(self) -> bool:
        """Whether the totals are kept: counted for the tree as it is (only a tree with
        queues is counted, and emptying it moves its version)."""
        return self._counted_at == self._tree.version

    def invalidate(self) -> None:
        """What decides which queue pods are in moved: count everything again when asked."""
        self._counted_at = -1

    def ensure(self, bound: Iterable[Pod], pending: Iterable[Pod]) -> None:
        """Count `bound` and `pending` pods from scratch unless the totals are live (without
        queues there is nothing to count)."""
        if self.live:
            return
        self.usage, self._pending, self._bound, self._waiting = {}, {}, {}, {}
        self._told_pending = {}
        self.leaving, self._terminating = {}, {}
        self._paths = {}
        self._demand_dirty, self._demand_seen = set(), {}
        self._demand_version += 1
        self._usage_changed = None
        if not self._tree.queues:
            return
        self._counted_at = self._tree.version
        for pod in bound:
            self.bound_changed(pod.key, pod)
        for pod in pending:
            self.pending_changed(pod.key, pod)

    @property
    def pending(self) -> dict[str, dict[str, int]]:
        """Per queue, the requests of its subtree's pending pods."""
        if self._told_pending:
            self._count_pending()
        return self._pending

    def demand_version(self) -> int:
        """A number that moves whenever some queue's demand moved since it was last read."""
        if self._told_pending:
            self._count_pending()
        dirty = self._demand_dirty
        if dirty:
            seen = self._demand_seen
            for leaf in dirty:
                demand = self._demand_of(leaf)
                if demand != seen.get(leaf, _NONE):
                    seen[leaf] = demand
                    self._demand_version += 1
            dirty.clear()
        return self._demand_version

    def _demand_of(self, leaf: str) -> dict[str, int]:
        demand = dict(self.usage.get(leaf, _NONE))
        for resource, amount in self._pending.get(leaf, _NONE).items():
            demand[resource] = demand.get(resource, 0) + amount
        return demand

    def bound_changed(self, key: str, pod: Pod | None) -> None:
        """The pod `key` is bound now as `pod`, or not bound (None)."""
        if self._counted_at != self._tree.version:  # not live: without queues, nothing is kept
            return
        told = self._bound.get(key)
        if pod is None:
            if told is not None:
                del self._bound[key]
                if told[1] is not None:
                    self._usage_moves(told[1], -1)
        elif told is None or told[0] is not pod:
            new = self._counted(pod)
            self._bound[key] = pod, new
            old = None if told is None else told[1]
            if old == new:  # a new version counted as the last: no change, but looked at
                if new is not None:
                    self._usage_looked_at(new[0])
            else:
                if old is not None:
                    self._usage_moves(old, -1)
                if new is not None:
                    self._usage_moves(new, 1)
        terminating = pod is not None and pod.deletion_timestamp is not None
        if terminating or key in self._terminating:
            self.terminating_changed(key, pod if terminating else None)

    def _usage_moves(self, counted: Counted, sign: int) -> None:
        self._demand_dirty.add(counted[0])
        self._usage_looked_at(counted[0], self._add(self.usage, counted, sign))

    def _usage_looked_at(self, leaf: str, path: tuple[str, ...] = ()) -> None:
        """Queue order rates the leaf's path anew, decay reads its usage again (`path`: the
        leaf's, if at hand)."""
        self._usage_moved.add(leaf)
        changed = self._usage_changed
        if changed is not None:
            changed.update(path or self._path_of(leaf))

    def terminating_changed(self, key: str, pod: Pod | None) -> None:
        """The bound pod `key` is terminating now as `pod`, or not (None)."""
        if not self.live:
            return
        old = self._terminating.get(key)
        new = self._counted(pod) if pod is not None else None
        if old == new:
            return
        if old is not None:
            del self._terminating[key]
            self._add(self.leaving, old, -1)
        if new is not None:
            self._terminating[key] = new
            self._add(self.leaving, new, 1)

    def staying(self) -> Usage:
        """Each queue's usage without its terminating pods (zero where all of it leaves)."""
        if not self.leaving:
            return self.usage
        out = {name: dict(amounts) for name, amounts in self.usage.items()}
        for name, amounts in self.leaving.items():
            used = out[name]
            for resource, amount in amounts.items():
                used[resource] -= amount
        return out

    def drain_usage_moved(self) -> AbstractSet[str]:
        """The leaves whose usage moved since the last call (queue order rates them anew)."""
        moved = self._usage_moved
        if not moved:  # (asked at each pick: most find none)
            return _NOTHING
        self._usage_moved = set()
        return moved

    def drain_usage_changed(self) -> AbstractSet[str] | None:
        """The queues (every level) whose usage moved since the last call; None: any may have
        (counted again since). Decayed usage steps only those (state/queue_decay.py)."""
        changed = self._usage_changed
        if changed is None or changed:
            self._usage_changed = set()
            return changed
        return _NOTHING

    def pending_changed(self, key: str, pod: Pod | None) -> None:
        """The pod `key` is pending now as `pod`, or not pending (None): counted when
        `pending` or the demand is next read."""
        if self._counted_at != self._tree.version:
            return
        told = self._told_pending
        told[key] = pod
        if len(told) >= _TOLD_KEPT:
            self._count_pending()

    def _count_pending(self) -> None:
        """Count each pod told pending or not since the last count, as it was last told."""
        told_pending, self._told_pending = self._told_pending, {}
        for key, pod in told_pending.items():
            told = self._waiting.get(key)
            if pod is None:
                if told is None:
                    continue
                del self._waiting[key]
                old, new = told[1], None
            elif told is not None and told[0] is pod:
                continue  # the very object counted: as it was
            else:
                new = self._counted(pod)
                self._waiting[key] = pod, new
                old = None if told is None else told[1]
            if old != new:
                if old is not None:
                    self._add(self._pending, old, -1)
                    self._demand_dirty.add(old[0])
                if new is not None:
                    self._add(self._pending, new, 1)
                    self._demand_dirty.add(new[0])

    def _counted(self, pod: Pod) -> Counted | None:
        """What is counted of `pod` (None: it is in no queue)."""
        counted = self._count_of(pod)
        return counted if counted[0] else None

    def _add(
        self, totals: dict[str, dict[str, int]], counted: Counted, sign: int
    ) -> tuple[str, ...]:
        """Add (sign 1) or take off (-1) what is counted on its leaf's path, returned."""
        leaf, requests = counted
        path = self._paths.get(leaf) or self._path_of(leaf)
        for name in path:
            total = totals.get(name)
            if total is None:
                total = totals[name] = {}
            for resource, amount in requests.items():
                left = total.get(resource, 0) + sign * amount
                if left:
                    total[resource] = left
                else:
                    del total[resource]
        return path

    def _path_of(self, leaf: str) -> tuple[str, ...]:
        """The names of `leaf` and its ancestors, kept while the tree stays as counted."""
        names = self._paths.get(leaf)
        if names is None:
            names = self._paths[leaf] = tuple(queue.name for queue in self._tree.path(leaf))
        return names
