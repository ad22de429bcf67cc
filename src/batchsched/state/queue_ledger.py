"""What each queue's pods take and ask, kept as pods come and go (docs/queues.md#admission).

Per queue, the requests of its subtree's bound (and assumed) pods, its *usage*, of those of
them terminating (reclaim counts their room as already taken back), and of its subtree's
pending pods, of the resources whose fair shares are computed (QueueTree.shared: some queue
names them, or the simulator measures them; no reader looks at the others). A pod is counted
once in each, under the leaf it was in when counted, and taken off by that same record, so
the totals always equal a recount; everything is recounted when what decides a pod's queue or
what is counted moves (the tree and its resources, a Namespace's or a PodGroup's queue label:
`invalidate`). Binding a pod costs a walk up its leaf's path, not a recount of every pod: the
recount was quadratic over a pass that binds thousands of pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet

from batchsched.objects.records import Pod
from batchsched.state.queues import QueueTree, Usage

# A pod's leaf queue ("" for none) and its requests by resource name.
Counted = tuple[str, Mapping[str, int]]
_NOTHING: frozenset[str] = frozenset()


class QueueLedger:
    def __init__(self, tree: QueueTree, count_of: Callable[[Pod], Counted]) -> None:
        self._tree = tree
        self._count_of = count_of
        self.usage: dict[str, dict[str, int]] = {}  # queue -> resource -> its subtree's
        self.pending: dict[str, dict[str, int]] = {}
        self.leaving: dict[str, dict[str, int]] = {}  # of `usage`: the terminating pods'
        self._bound: dict[str, Counted] = {}  # pod key -> what it was counted as
        self._terminating: dict[str, Counted] = {}
        self._waiting: dict[str, Counted] = {}
        # Pod key -> the pod object last told as bound, as pending: told again (a binding
        # confirmed, a pending pod reported anew), it is counted as it was, unasked.
        self._bound_pods: dict[str, Pod] = {}
        self._waiting_pods: dict[str, Pod] = {}
        self._paths: dict[str, tuple[str, ...]] = {}  # leaf -> the names on its path
        # Per leaf, how its demand (usage + pending) moved since `demand_version` was read:
        # binding a pending pod moves it by nothing.
        self._drift: dict[str, dict[str, int]] = {}
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
        self.usage, self.pending, self._bound, self._waiting = {}, {}, {}, {}
        self.leaving, self._terminating = {}, {}
        self._bound_pods, self._waiting_pods, self._paths = {}, {}, {}
        self._drift = {}
        self._demand_version += 1
        self._usage_changed = None
        if not self._tree.queues:
            return
        self._counted_at = self._tree.version
        for pod in bound:
            self.bound_changed(pod.key, pod)
        for pod in pending:
            self.pending_changed(pod.key, pod)

    def demand_version(self) -> int:
        """A number that moves whenever some queue's demand moved since it was last read."""
        if self._drift:
            if any(amount for amounts in self._drift.values() for amount in amounts.values()):
                self._demand_version += 1
            self._drift.clear()
        return self._demand_version

    def bound_changed(self, key: str, pod: Pod | None) -> None:
        """The pod `key` is bound now as `pod`, or not bound (None)."""
        if self._counted_at != self._tree.version:  # not live: without queues, nothing is kept
            return
        known = self._bound_pods
        if pod is None or known.get(key) is not pod:
            if pod is None:
                known.pop(key, None)
            else:
                known[key] = pod
            old = self._bound.get(key)
            self._recount(self._bound, self.usage, key, pod)
            new = self._bound.get(key)
            changed = self._usage_changed
            for counted in (old, new):
                if counted is not None:
                    self._usage_moved.add(counted[0])
                    if changed is not None:
                        changed.update(self._path_of(counted[0]))
        terminating = pod is not None and pod.deletion_timestamp is not None
        if terminating or key in self._terminating:
            self.terminating_changed(key, pod if terminating else None)

    def terminating_changed(self, key: str, pod: Pod | None) -> None:
        """The bound pod `key` is terminating now as `pod`, or not (None)."""
        if self.live:
            self._recount(self._terminating, self.leaving, key, pod, moves_demand=False)

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
        """The pod `key` is pending now as `pod`, or not pending (None)."""
        if self._counted_at != self._tree.version:
            return
        known = self._waiting_pods
        if pod is None:
            known.pop(key, None)
        elif known.get(key) is pod:
            return  # the very object counted: as it was
        else:
            known[key] = pod
        self._recount(self._waiting, self.pending, key, pod)

    def _recount(
        self,
        counted: dict[str, Counted],
        totals: dict[str, dict[str, int]],
        key: str,
        pod: Pod | None,
        moves_demand: bool = True,
    ) -> None:
        """Count the pod `key` in `totals` as `pod` (the ledger live), not as before."""
        new = self._count_of(pod) if pod is not None else None
        old = counted.get(key)
        if old == new:  # a new version counted as the last (a binding confirmed): no change
            return
        if old is not None:
            del counted[key]
            self._add(totals, old, -1, moves_demand)
        if new is not None and new[0]:
            counted[key] = new
            self._add(totals, new, 1, moves_demand)

    def _add(
        self, totals: dict[str, dict[str, int]], counted: Counted, sign: int, moves_demand: bool
    ) -> None:
        leaf, requests = counted
        if moves_demand:
            drift = self._drift.get(leaf)
            if drift is None:
                drift = self._drift[leaf] = {}
            for resource, amount in requests.items():
                drift[resource] = drift.get(resource, 0) + sign * amount
        for name in self._paths.get(leaf) or self._path_of(leaf):
            total = totals.get(name)
            if total is None:
                total = totals[name] = {}
            for resource, amount in requests.items():
                left = total.get(resource, 0) + sign * amount
                if left:
                    total[resource] = left
                else:
                    del total[resource]

    def _path_of(self, leaf: str) -> tuple[str, ...]:
        """The names of `leaf` and its ancestors, kept while the tree stays as counted."""
        names = self._paths.get(leaf)
        if names is None:
            names = self._paths[leaf] = tuple(queue.name for queue in self._tree.path(leaf))
        return names
