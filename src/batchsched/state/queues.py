"""The queue tree as the scheduler sees it (docs/queues.md): the Queue records by name, their
children, and each queue's path to its root. This module owns them; ClusterState forwards the
Queue objects of every world here.

(Not to be confused with state/queue.py, the scheduling queue of pending pods.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from batchsched.objects.errors import ManifestError, unreadable_message
from batchsched.objects.quantity import format_amount
from batchsched.objects.queue_membership import NamedQueue
from batchsched.objects.queues import Queue, queue_tree_errors
from batchsched.state.fair_share import FairSharePlan, Shares
from batchsched.state.queue_decay import Decay, DecayedUsage


@dataclass(frozen=True, slots=True)
class Membership:
    """A pod's leaf queue ("": in none), and why it cannot be placed ("": it can). A pod whose
    leaf is ignored (its tree breaks the rules) has both: it counts where it is, and waits."""

    queue: str = ""
    problem: str = ""


Usage = Mapping[str, Mapping[str, int]]  # queue -> resource -> amount in use (its subtree)


@dataclass(frozen=True, slots=True)
class _Kept:
    version: int  # the tree's version it was derived at
    children: dict[str, list[str]]  # parent ("": none) -> children by name
    paths: dict[str, list[Queue]]  # filled as asked
    limited: dict[str, bool]  # filled as asked: whether some queue on the path has a limit
    named: frozenset[str]  # the resources some queue names
    shared: frozenset[str]  # those and the measured ones: whose fair shares are computed
    members: dict[NamedQueue, Membership]  # filled as asked: where a pod naming it belongs


class QueueTree:
    """Queues by name. A set that is not a tree (an unknown parent, a cycle, children
    guaranteed more than their parent) is refused before it gets here in one-shot commands
    (objects/queues.check_queue_tree); live objects arrive one by one, so the tree also says
    which queues break the rules (`problems`) and holds back the pods below them, and the
    walks below stop at an unknown parent or a repeat."""

    def __init__(self) -> None:
        self.queues: dict[str, Queue] = {}
        # Queue name -> why its object cannot be read (its field and what is allowed): live
        # mode leaves such an object out, and the pods in it wait naming it, as pods below it
        # do (docs/queues.md#a-queue-that-cannot-be-read).
        self.unreadable: dict[str, str] = {}
        self.version = 0  # bumped on every change: what caches of the tree compare
        self._derived = _Kept(-1, {}, {}, {}, frozenset(), frozenset(), {})
        self._shares: Shares = {}
        self._fair_share_plan: tuple[int, frozenset[str], FairSharePlan] | None = None
        self._shares_at: Hashable = None
        self._problems: dict[str, ManifestError] = {}
        self._problems_at = -1
        # Each queue's usage over time, when a profile's Queues plugin asks for it.
        self.decayed: DecayedUsage | None = None
        self._measured: frozenset[str] = frozenset()

    @property
    def measured(self) -> frozenset[str]:
        """Resources whose fair shares are computed though no queue may name them (the
        simulator measures queues' shares of one)."""
        return self._measured

    @measured.setter
    def measured(self, resources: frozenset[str]) -> None:
        if resources != self._measured:
            self._measured = resources
            self.version += 1  # the ledger counts these too: it counts again

    def upsert(self, queue: Queue) -> bool:
        """Keep `queue`; False if only its status or resourceVersion changed (the tree and
        everything kept for it stay as they were: a status write is not a change)."""
        old = self.queues.get(queue.name)
        self.queues[queue.name] = queue
        fixed = self.unreadable.pop(queue.name, None) is not None
        if (
            not fixed
            and old is not None
            and replace(old, resource_version=queue.resource_version) == queue
        ):
            return False
        self.version += 1
        return True

    def remove(self, name: str) -> None:
        gone = self.queues.pop(name, None) is not None
        if self.unreadable.pop(name, None) is not None or gone:
            self.version += 1

    def mark_unreadable(self, name: str, why: str) -> None:
        """The Queue `name` exists but cannot be read (`why`: its field and what is allowed):
        its pods wait until a version that can be read comes, or it is deleted."""
        self.unreadable[name] = why
        self.version += 1

    def __len__(self) -> int:
        """The Queue objects, those that cannot be read included: one such is enough for
        queues to be on, so that its pods wait rather than run with no quota at all
        (docs/queues.md#a-queue-that-cannot-be-read)."""
        unread = self.unreadable
        if not unread:
            return len(self.queues)
        return len(self.queues) + sum(1 for name in unread if name not in self.queues)

    def children(self, name: str) -> list[str]:
        """The queues whose parent is `name`, by name ("": the roots)."""
        return self._kept().children.get(name, [])

    def roots(self) -> list[str]:
        """The queues without a (known) parent, by name."""
        return self.children("")

    def in_tree_order(self) -> list[tuple[str, int]]:
        """Every queue reachable from a root with its depth, parents before their children,
        siblings by name: the order in which the tree is shown."""
        out: list[tuple[str, int]] = []
        stack = [(root, 0) for root in reversed(self.roots())]
        while stack:
            name, depth = stack.pop()
            out.append((name, depth))
            stack.extend((child, depth + 1) for child in reversed(self.children(name)))
        return out

    def is_leaf(self, name: str) -> bool:
        return name in self.queues and not self.children(name)

    def path(self, name: str) -> list[Queue]:
        """`name`'s queue, then its parent, up to its root (empty if it is not a queue)."""
        kept = self._kept()
        found = kept.paths.get(name)
        if found is None:
            found = kept.paths[name] = self._walk_up(name)
        return found

    def limited(self, leaf: str) -> bool:
        """Whether some queue from `leaf` up to its root has a `limit` (else nothing it asks
        is ever held back: admission has nothing to add up)."""
        kept = self._kept()
        found = kept.limited.get(leaf)
        if found is None:
            quotas = (quota for queue in self.path(leaf) for quota in queue.resources.values())
            found = kept.limited[leaf] = any(quota.limit is not None for quota in quotas)
        return found

    def _kept(self) -> _Kept:
        """What is derived from the tree as it is now (asked per pod: a scan of every queue
        each time would cost as much as the queues)."""
        if self._derived.version != self.version:
            children: dict[str, list[str]] = {}
            for queue in sorted(self.queues.values(), key=lambda q: q.name):
                parent = queue.parent if queue.parent in self.queues else ""
                children.setdefault(parent, []).append(queue.name)
            named = frozenset(r for q in self.queues.values() for r in q.resources)
            self._derived = _Kept(self.version, children, {}, {}, named, named | self._measured, {})
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

    def problems(self) -> dict[str, ManifestError]:
        """The queues that break the tree's rules, by name, with what is wrong (naming the
        queue and the field)."""
        if self._problems_at != self.version:
            errors = queue_tree_errors(list(self.queues.values()), self.unreadable)
            self._problems = {err.obj.removeprefix("Queue "): err for err in errors}
            self._problems_at = self.version
        return self._problems

    def ignored(self, name: str) -> ManifestError | None:
        """Why `name` is ignored for admission: the error of the lowest queue on its path that
        breaks the rules (itself or an ancestor), None if none does."""
        problems = self.problems()
        if problems:
            for queue in self.path(name):
                if queue.name in problems:
                    return problems[queue.name]
        return None

    def member(self, named: NamedQueue) -> Membership:
        """Where a pod naming `named` belongs: a leaf, none, or a problem naming the queue
        (kept per tree: asked once for each pod)."""
        members = self._kept().members
        found = members.get(named)
        if found is None:
            found = members[named] = self._member(named)
        return found

    def _member(self, named: NamedQueue) -> Membership:
        if named.conflict:
            return Membership(problem=named.conflict)
        if not named.name:
            return Membership()
        if named.name not in self.queues:
            why = self.unreadable.get(named.name)
            if why:  # (the `default` Queue too: its pods must not run without its quotas)
                return Membership(problem=f"{_said(named)} {unreadable_message(why)}")
            if not named.where:
                return Membership()  # no Queue `default`: the pod is in no queue
            return Membership(problem=f"{_said(named)} does not exist")
        children = self.children(named.name)
        if children:
            return Membership(
                problem=f"{_said(named)} has child queues ({', '.join(children)}): "
                "only leaf queues hold pods"
            )
        broken = self.ignored(named.name)
        if broken is not None:
            return Membership(
                named.name,
                f"{_said(named)} is ignored while its tree breaks the rules: {broken}",
            )
        return Membership(named.name)

    def fair_shares(
        self, at: Hashable, demand: Sequence[Usage], cluster: Callable[[], Mapping[str, int]]
    ) -> Shares:
        """Every queue's fair share (state/fair_share.py) of each resource some queue names
        (only those are read: dominant ratios, reclaim, status) and of the `measured` ones,
        from each queue's `demand` (its subtree's usage and pending requests, in parts) and the
        `cluster`'s allocatable; computed again only when `at` (what the caller's pods and
        nodes are as of), the tree or the decayed usage (its effective weights) moves."""
        decayed = self.decayed
        key = self.fair_shares_at(at)
        if self._shares_at != key:
            resources = self.shared()
            weights = None if decayed is None else decayed.effective_weights(self.queues, resources)
            self._shares = self._plan(resources).shares(demand, cluster(), weights)
            self._shares_at = key
        return self._shares

    def fair_shares_at(self, at: Hashable) -> Hashable:
        """What `fair_shares` given `at` would be computed from: equal marks, equal shares
        (a reader may tell whether they moved without computing them)."""
        decayed = self.decayed
        return (at, self.version, None if decayed is None else decayed.version)

    def shared(self) -> frozenset[str]:
        """The resources whose fair shares are computed: those some queue names and the
        `measured` ones (one set per version of the tree)."""
        return self._kept().shared

    def _plan(self, resources: frozenset[str]) -> FairSharePlan:
        """The tree's water-filling plan for `resources`, derived again when either moves."""
        plan = self._fair_share_plan
        if plan is None or plan[:2] != (self.version, resources):
            plan = self._fair_share_plan = (
                self.version,
                resources,
                FairSharePlan(self.queues, resources),
            )
        return plan[2]

    def use_decay(self, decay: Decay) -> None:
        """Keep decayed usage with this half-life and k (docs/queues.md#fairness-over-time);
        the tree is the cluster's, so one decay holds for every profile."""
        if self.decayed is None or self.decayed.decay != decay:
            self.decayed = DecayedUsage(decay)

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

    def blocking(
        self, leaf: str, usage: Usage, asks: Mapping[str, int], reserved: Usage | None = None
    ) -> str:
        """Why `asks` more at `leaf` would take it or an ancestor over a limit ("" if it would
        not): the lowest such level, its resources by name. `reserved`: what reservations
        hold per queue, counted as usage (docs/backfill.md#queue-limits)."""
        for queue in self.path(leaf):
            used = usage.get(queue.name, {})
            held = reserved.get(queue.name, {}) if reserved else {}
            for resource, quota in sorted(queue.resources.items()):
                asked = asks.get(resource, 0)
                if quota.limit is None or not asked:
                    continue
                in_use = used.get(resource, 0)
                kept = held.get(resource, 0)
                if in_use + kept + asked > quota.limit:
                    said = f", reserved {format_amount(resource, kept)}" if kept else ""
                    return (
                        f"queue {queue.name}: {resource} limit "
                        f"{format_amount(resource, quota.limit)}, in use "
                        f"{format_amount(resource, in_use)}{said}, asks "
                        f"{format_amount(resource, asked)}"
                    )
        return ""


def _said(named: NamedQueue) -> str:
    """The queue a pod names and where, for a message (built only when one is written)."""
    where = f" ({named.where})" if named.where else " (the default queue)"
    return f"queue {named.name!r}{where}"
