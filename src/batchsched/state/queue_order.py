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
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState

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

    def lane_of(self, pod: Pod) -> str:
        """The leaf queue whose heap holds the pod ("": in none, or in error)."""
        if not self._state.queues.queues:
            return ""
        return self._state.queue_of(pod).queue

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
        usage_moved = state.queue_ledger.drain_usage_moved()
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
            ratio = state.queues.dominant_ratio(
                name, state.queue_usage(), state.queue_fair_shares(), extra
            )
            rating = self._rated[name] = (ratio, name, leaf)
        return rating
