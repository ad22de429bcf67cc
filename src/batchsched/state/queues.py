"""The queue tree as the scheduler sees it (docs/queues.md): the Queue records by name, their
children, and each queue's path to its root. This module owns them; ClusterState forwards the
Queue objects of every world here.

(Not to be confused with state/queue.py, the scheduling queue of pending pods.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace

from batchsched.objects.quantity import format_amount
from batchsched.objects.queue_membership import NamedQueue
from batchsched.objects.queues import Queue
from batchsched.state.fair_share import Shares, fair_shares


@dataclass(frozen=True, slots=True)
class Membership:
    """A pod's leaf queue ("": in none), or why it cannot be placed ("": it can)."""

    queue: str = ""
    problem: str = ""


Usage = Mapping[str, Mapping[str, int]]  # queue -> resource -> amount in use (its subtree)


@dataclass(frozen=True, slots=True)
class _Kept:
    version: int  # the tree's version it was derived at
    children: dict[str, list[str]]  # parent ("": none) -> children by name
    paths: dict[str, list[Queue]]  # filled as asked


class QueueTree:
    """Queues by name. A set that is not a tree (an unknown parent, a cycle) is refused before
    it gets here in one-shot commands (objects/queues.check_queue_tree); the walks below stop
    at an unknown parent or a repeat all the same, since live objects arrive one by one."""

    def __init__(self) -> None:
        self.queues: dict[str, Queue] = {}
        self.version = 0  # bumped on every change: what caches of the tree compare
        self._derived = _Kept(-1, {}, {})
        self._shares: Shares = {}
        self._shares_at: Hashable = None

    def upsert(self, queue: Queue) -> None:
        old = self.queues.get(queue.name)
        self.queues[queue.name] = queue
        # A new version that differs only in its resourceVersion (its status was written)
        # changes nothing of the tree: what is kept for the tree stays.
        if old is None or replace(old, resource_version=queue.resource_version) != queue:
            self.version += 1

    def remove(self, name: str) -> None:
        if self.queues.pop(name, None) is not None:
            self.version += 1

    def __len__(self) -> int:
        return len(self.queues)

    def children(self, name: str) -> list[str]:
        """The queues whose parent is `name`, by name ("": the roots)."""
        return self._kept().children.get(name, [])

    def roots(self) -> list[str]:
        """The queues without a (known) parent, by name."""
        return self.children("")

    def is_leaf(self, name: str) -> bool:
        return name in self.queues and not self.children(name)

    def path(self, name: str) -> list[Queue]:
        """`name`'s queue, then its parent, up to its root (empty if it is not a queue)."""
        kept = self._kept()
        found = kept.paths.get(name)
        if found is None:
            found = kept.paths[name] = self._walk_up(name)
        return found

    def _kept(self) -> _Kept:
        """What is derived from the tree as it is now (asked per pod: a scan of every queue
        each time would cost as much as the queues)."""
        if self._derived.version != self.version:
            children: dict[str, list[str]] = {}
            for queue in sorted(self.queues.values(), key=lambda q: q.name):
                parent = queue.parent if queue.parent in self.queues else ""
                children.setdefault(parent, []).append(queue.name)
            self._derived = _Kept(self.version, children, {})
        return self._derived

    def _walk_up(self, name: str) -> list[Queue]:
        out: list[Queue] = []
        seen: set[str] = set()
        queue = self.queues.get(name)
        while queue is not None and queue.name not in seen:
            out.append(queue)
            seen.add(queue.name)
            queue = self.queues.get(queue.parent) if queue.parent else None
        return out

    def member(self, named: NamedQueue) -> Membership:
        """Where a pod naming `named` belongs: a leaf, none, or a problem naming the queue."""
        if named.conflict:
            return Membership(problem=named.conflict)
        if not named.name:
            return Membership()
        where = f" ({named.where})" if named.where else " (the default queue)"
        if named.name not in self.queues:
            if not named.where:
                return Membership()  # no Queue `default`: the pod is in no queue
            return Membership(problem=f"queue {named.name!r}{where} does not exist")
        children = self.children(named.name)
        if children:
            return Membership(
                problem=f"queue {named.name!r}{where} has child queues ({', '.join(children)}): "
                "only leaf queues hold pods"
            )
        return Membership(named.name)

    def fair_shares(
        self, at: Hashable, demand: Callable[[], Usage], cluster: Callable[[], Mapping[str, int]]
    ) -> Shares:
        """Every queue's fair share of every resource in play (state/fair_share.py), from each
        queue's `demand` (its subtree's usage and pending requests) and the `cluster`'s
        allocatable; computed again only when `at` (what the caller's pods and nodes are as
        of) or the tree moves."""
        if self._shares_at != (at, self.version):
            self._shares = fair_shares(self.queues, demand(), cluster())
            self._shares_at = (at, self.version)
        return self._shares

    def dominant_ratio(
        self,
        queue: str,
        usage: Usage,
        shares: Mapping[str, Mapping[str, int]],
        extra: Mapping[str, int],
    ) -> float:
        """The largest, over the resources `queue` names, of (usage + extra) / fair share:
        infinite where its fair share is 0 and it would use some, 0 where it would use none
        (docs/queues.md#queue-order)."""
        used = usage.get(queue, {})
        share = shares.get(queue, {})
        ratio = 0.0
        for resource in self.queues[queue].resources:
            amount = used.get(resource, 0) + extra.get(resource, 0)
            if amount <= 0:
                continue
            fair = share.get(resource, 0)
            if fair <= 0:
                return math.inf
            ratio = max(ratio, amount / fair)
        return ratio

    def blocking(self, leaf: str, usage: Usage, asks: Mapping[str, int]) -> str:
        """Why `asks` more at `leaf` would take it or an ancestor over a limit ("" if it would
        not): the lowest such level, its resources by name."""
        for queue in self.path(leaf):
            used = usage.get(queue.name, {})
            for resource, quota in sorted(queue.resources.items()):
                asked = asks.get(resource, 0)
                if quota.limit is None or not asked:
                    continue
                in_use = used.get(resource, 0)
                if in_use + asked > quota.limit:
                    return (
                        f"queue {queue.name}: {resource} limit "
                        f"{format_amount(resource, quota.limit)}, in use "
                        f"{format_amount(resource, in_use)}, asks {format_amount(resource, asked)}"
                    )
        return ""
