"""Queue order (docs/queues.md#queue-order): which leaf queue's next pod the scheduling queue
hands out next, when there are Queue objects.

At each level of the tree, among the children with pending work, the child with the lowest
dominant ratio once its next pod is placed goes next (ties by name); within a leaf, the
profile's queue sort (the scheduling queue keeps one heap per leaf, state/queue.py). Pods in
no queue (DaemonSet and system-critical pods, pods naming none without a `default` queue, and
pods whose queue is in error, which are told so at once) go before queued ones.

A choice reads, per queue, its usage and fair share and the requests of the pod its subtree
would hand out next. These are kept per queue and computed again only for the queues whose
part moved: the path of a leaf whose next pod or usage changed, or everything when the fair
shares or the tree did. A pick costs the children with work along one path, not the queues.
A level where one child has work needs no rating: the fair shares are computed, and whether
they moved asked, only when two children compete (on a busy trace most picks have one; with
decayed usage the shares move at every pass, and computing them anyway was most of the cost
of the queues).

The same order serves a walk that places nothing (`QueueWalk`): Backfill hands out its
candidates for reservations in it (docs/backfill.md#rules), each counted in its queue's usage
once it holds one.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Iterator, Mapping

from batchsched.objects.queues import Queue
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.fair_share import Shares
from batchsched.state.queues import Usage

# (dominant ratio once the next pod is placed, queue name, the leaf whose pod that is)
Rating = tuple[float, str, str]


class QueueOrder:
    def __init__(self, state: ClusterState) -> None:
        self._state = state
        self._shares_at: Hashable = None  # what the fair shares the ratings read are as of
        self._filed_at = (-1, -1)  # `version()` the lanes were last looked at for
        self._rated: dict[str, Rating] = {}  # per queue with work, kept while clean
        self._with_work: dict[str, set[str]] = {}  # parent ("": the top) -> children with work
        # Per leaf, kept for the tree's version: each queue on its path with its parent.
        self._links: dict[str, tuple[tuple[str, str], ...]] = {}
        self._heads: Mapping[str, Pod] = {}
        self._shares_checked = False  # whether this choice compared `_shares_at` yet
        self._shares: Shares | None = None  # the fair shares, read once per choice

    @property
    def state(self) -> ClusterState:
        return self._state

    def lane_of(self, pod: Pod) -> str:
        """The leaf queue whose heap holds the pod ("": in none, or in error)."""
        return lane_of(self._state, pod)

    def version(self) -> Hashable:
        """Moves when pods may belong to other lanes (the tree, or a Namespace's or PodGroup's
        queue label, changed): the scheduling queue files them anew."""
        return self._state.queue_labels_at()

    def choose(self, heads: Mapping[str, Pod], moved: Iterable[str]) -> str | None:
        """The leaf to take the next pod from, of those with a next pod (`heads`: leaf ->
        its next pod); `moved`: the leaves whose next pod changed since the last choice."""
        state = self._state
        self._heads = heads
        self._shares_checked = False
        self._shares = None
        usage_moved = self._usage_moved()
        filed_at = state.queue_labels_at()
        if filed_at != self._filed_at:  # the lanes were filed anew: every one is looked at
            if filed_at[0] != self._filed_at[0]:
                self._links = {}
            self._filed_at = filed_at
            self._rated.clear()
            self._with_work = {}
            moved, usage_moved = heads, frozenset()
        if usage_moved:  # (most often the leaf whose pod was just taken: moved too)
            moved = {*moved, *usage_moved}
        # (In any order, each level ends up with the children that have work, as the last
        # leaf followed under it sees.)
        for leaf in moved:
            self._follow(leaf, leaf in heads)
        return self._pick("")

    def _usage(self) -> Usage:
        """Each queue's usage, as the ratings read it."""
        return self._state.queue_usage()

    def _usage_moved(self) -> Collection[str]:
        """The leaves whose usage moved since the last choice."""
        return self._state.queue_ledger.drain_usage_moved()

    def _follow(self, leaf: str, has_work: bool) -> None:
        """The leaf's next pod or usage moved: its path is rated again, and joins or leaves
        the children with work of each level."""
        links = self._links.get(leaf)
        if links is None:
            path = self._state.queues.path(leaf)
            parents = [queue.name for queue in path[1:]] + [""]
            links = self._links[leaf] = tuple(zip((q.name for q in path), parents, strict=True))
        rated, with_work, heads = self._rated, self._with_work, self._heads
        for name, parent in links:
            rated.pop(name, None)
            siblings = with_work.get(parent)
            if siblings is None:
                siblings = with_work[parent] = set()
            if has_work:
                siblings.add(name)
            elif not with_work.get(name) and name not in heads:
                siblings.discard(name)

    def _pick(self, parent: str) -> str | None:
        """The leaf, under `parent`, whose next pod goes next."""
        children = self._with_work.get(parent, ())
        if len(children) == 1:  # nothing to compare it with
            (child,) = children
            return child if child in self._heads else self._pick(child)
        if not children:  # (asked at the end of each pass: what the shares are as of is not)
            return None
        if not self._shares_checked:  # the ratings kept read fair shares that since moved
            self._shares_checked = True
            shares_at = self._state.queue_fair_shares_at()
            if shares_at != self._shares_at:
                self._shares_at = shares_at
                self._rated.clear()
        best: Rating | None = None
        rated = self._rated
        for child in children:
            rating = rated.get(child) or self._rate(child)  # (kept ratings looked up here)
            if rating is not None and (best is None or rating < best):
                best = rating
        return None if best is None else best[2]

    def _rate(self, name: str) -> Rating | None:
        rating = self._rated.get(name)
        if rating is None:
            leaf = name if name in self._heads else self._pick(name)
            if leaf is None:
                return None
            state = self._state
            extra = state.requests_by_name(self._heads[leaf])
            shares = self._shares
            if shares is None:
                shares = self._shares = state.queue_fair_shares()
            ratio = state.queues.dominant_ratio(name, self._usage(), shares, extra)
            rating = self._rated[name] = (ratio, name, leaf)
        return rating


def lane_of(state: ClusterState, pod: Pod) -> str:
    """The pod's leaf queue in the queue order ("": in none, or in error, or no Queue
    objects)."""
    if not state.queues.queues:
        return ""
    return state.queue_of(pod).queue


class QueueWalk(QueueOrder):
    """The queue order of walks that place nothing (Backfill's candidates): usage is the
    state's as of the walk's `start` plus what the walk counted (`count`). It leaves the
    ledger's note of the queues whose usage moved to the scheduling queue's order, which
    reads it. What is kept per tree (each leaf's path) serves every walk."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(state)
        self._counted = _Counted({})
        self._counted_moved: set[str] = set()

    def start(self) -> None:
        """A new walk: nothing rated, no queue with work, usage as of now."""
        self._rated.clear()
        self._with_work = {}
        self._counted = _Counted(self._state.queue_usage())
        self._counted_moved = set()

    def count(self, leaf: str, requests: Mapping[str, int]) -> None:
        """What was handed out of `leaf` counts in its queues' usage from now on."""
        if leaf:
            self._counted.add(self._state.queues.path(leaf), requests)
            self._counted_moved.add(leaf)

    def _usage(self) -> Usage:
        return self._counted

    def _usage_moved(self) -> Collection[str]:
        moved, self._counted_moved = self._counted_moved, set()
        return moved


class _Counted(Mapping[str, Mapping[str, int]]):
    """Usage as of a moment, plus amounts counted since on some queues (copied on their
    first count: the state's own is not changed)."""

    def __init__(self, base: Usage) -> None:
        self._base = base
        self._added: dict[str, dict[str, int]] = {}

    def add(self, path: Iterable[Queue], requests: Mapping[str, int]) -> None:
        for queue in path:
            total = self._added.get(queue.name)
            if total is None:
                total = self._added[queue.name] = dict(self._base.get(queue.name, {}))
            for resource, amount in requests.items():
                total[resource] = total.get(resource, 0) + amount

    def __getitem__(self, queue: str) -> Mapping[str, int]:
        added = self._added.get(queue)
        return self._base[queue] if added is None else added

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from (queue for queue in self._added if queue not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(1 for queue in self._added if queue not in self._base)
