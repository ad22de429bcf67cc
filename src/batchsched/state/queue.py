"""The scheduling queue, after kube-scheduler's: active, backoff and unschedulable pods.

Order among active pods comes from the profile's QueueSort (by default: higher priority, then
earlier enqueue time, then `namespace/name`). A pod that failed waits in `unschedulable` until
the cluster changes, then backs off (1 s doubling to 10 s per failed attempt) before it is
active again; after `max_unschedulable_seconds` it is retried even if nothing changed.

Queueing hints (upstream's QueueingHints): a pod that failed can be filed under a hint group
(its shape and the plugins that rejected it). Such a pod is retried only when the `Hints` say
a change since its failure may let it pass; each group is asked once per change, for all its
pods. Pods filed without a group are retried after any change, as before.

A new version of a waiting pod itself (other than its status) always brings it back after its
backoff, hints or not: it is the pod's own change (labels, tolerations, smaller requests, the
claims the resourceclaim controller made for it), which no change of the cluster stands for.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, TypeVar

from batchsched.framework.signature import HintGroup
from batchsched.objects.records import Pod
from batchsched.state.shape_group import ShapeGroup

# A timed record: (time, version, pod key) or (time, group id, version).
Timed = TypeVar("Timed", tuple[float, int, str], tuple[float, int, int])

SortKeyValue = tuple[Any, ...]
SortKey = Callable[[Pod, float], SortKeyValue]
# An active entry: (order, version, pod key, group id or -1).
Item = tuple[SortKeyValue, int, str, int]


def default_sort_key(pod: Pod, enqueued: float) -> tuple[Any, ...]:
    return (-(pod.priority or 0), enqueued, pod.key)


# A pod's status as others write it (our own condition and nomination among them): a new
# version differing only there leaves its chances as they were. `resource_claims` stays in:
# the claim names the resourceclaim controller writes to the status are read into it, as
# upstream's isPodUpdated keeps status.resourceClaimStatuses.
_STATUS_FIELDS = frozenset(
    {"phase", "conditions", "start_time", "nominated_node_name", "resource_version"}
)
_SPEC_FIELDS = tuple(f.name for f in fields(Pod) if f.name not in _STATUS_FIELDS)


def spec_changed(old: Pod, new: Pod) -> bool:
    """Whether a new version of a pending pod may be scheduled differently (upstream's
    isPodUpdated)."""
    return old is not new and any(getattr(old, n) != getattr(new, n) for n in _SPEC_FIELDS)


@dataclass(slots=True)
class QueuedPod:
    pod: Pod
    enqueued: float  # seconds since the epoch, by the injected clock
    attempts: int = 0
    failed_at: float = 0.0
    failed_generation: int = -1
    version: int = 0  # heap entries of an older version are stale
    where: str = field(default="active")
    group: HintGroup | None = None  # its hint group while unschedulable, if it has one


class Hints(Protocol):
    """What the queue asks about changes (the scheduler answers from its plugins' hints)."""

    def marks(self) -> Hashable:
        """The cluster's position now: what has changed is measured from such marks."""
        ...

    def moved(self, since: Hashable) -> bool:
        """Whether anything that may let a waiting pod fit happened since `since`."""
        ...

    def wakes(self, asked: Sequence[tuple[HintGroup, Pod, Hashable]]) -> list[str | None]:
        """Per (group, pod, since) asked: the event, if any, since `since` after which pods
        of `group` (like `pod`) may pass a plugin that rejected them; None if every such
        plugin says no. Asked once per refresh, for every group a change may concern."""
        ...

    def failed_as_is(self, pod_key: str) -> bool:
        """Whether the pod just failed in the state as it still is, changing nothing: its
        group's later members would be told the same until the state moves."""
        ...


class Lanes(Protocol):
    """Queue order across lanes (state/queue_order.py): each pod is in a lane, "" for none."""

    def lane_of(self, pod: Pod) -> str: ...

    def version(self) -> Hashable:
        """Moves when pods may belong to other lanes."""
        ...

    def choose(self, heads: Mapping[str, Pod], moved: Iterable[str]) -> str | None:
        """The lane whose next pod goes next, of `heads` (lane -> its next pod); `moved`:
        the lanes whose next pod changed since the last choice."""
        ...


class SchedulingQueue:
    def __init__(
        self,
        sort_key: SortKey = default_sort_key,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable_seconds: float = 300.0,
    ) -> None:
        self._sort_key = sort_key
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable_seconds = max_unschedulable_seconds
        self._entries: dict[str, QueuedPod] = {}
        # (order, version, pod key, group id or -1): pods, and woken groups keyed by the
        # member to try next. With `lanes` (Queue objects exist: docs/queues.md#queue-order)
        # this holds the pods in no queue, which go first, and each leaf queue has a heap of
        # its own in `_lane_heaps`; `lanes` chooses among them by their next pods.
        self._active: list[Item] = []
        self.lanes: Lanes | None = None
        self._lane_heaps: dict[str, list[Item]] = {}
        self._lanes_at: Hashable = None  # `lanes.version()` the heaps were filed at
        self._lane_heads: dict[str, Pod] = {}
        self._lanes_moved: set[str] = set()  # lanes whose next pod may have changed
        self._backoff: list[tuple[float, int, str]] = []
        self._unschedulable: set[str] = set()
        # (time, version, key): unschedulable pods to retry at a time even if nothing changes.
        self._wakeups: list[tuple[float, int, str]] = []
        self.hints: Hints | None = None  # None: every change retries every waiting pod
        self._groups: dict[HintGroup, ShapeGroup] = {}
        self._group_ids: dict[int, ShapeGroup] = {}
        self._next_group_id = 0
        self._unhinted: set[str] = set()  # unschedulable pods outside any shape group
        # (failed_at, version, key) in failure order: the stale retry of grouped pods.
        self._failures: deque[tuple[float, int, str]] = deque()
        # Groups woken and waiting out their backoff: (expiry, group id, group version).
        self._group_backoff: list[tuple[float, int, int]] = []
        # Within a pass: the group whose member is being tried, that member's order, the
        # order of the last entry popped and the state it left, and the groups parked (their
        # member failed, changing nothing: the rest wait until the state moves).
        self._trying: tuple[ShapeGroup, SortKeyValue, str] | None = None
        self._last_orders: dict[str, SortKeyValue] = {}  # per lane
        self._seen: Hashable = None
        self._parked: list[ShapeGroup] = []
        # Pods entering the active or backoff queue, or leaving for unschedulable, by event
        # (upstream's incoming_pods_total): PodAdd, ScheduleAttemptFailure, a cluster event
        # (Node, NodeRoom, Policy, Any), UnschedulablePodUpdate, UnschedulableTimeout,
        # RetryTime, Flush.
        self.incoming: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def entry(self, key: str) -> QueuedPod | None:
        return self._entries.get(key)

    def in_order(self) -> list[str]:
        """Every queued pod's key in QueueSort's order, wherever it waits (active, backoff or
        unschedulable): the line the web UI shows positions in (docs/ui.md)."""
        sort_key = self._sort_key
        ranked = sorted(self._entries.values(), key=lambda e: sort_key(e.pod, e.enqueued))
        return [entry.pod.key for entry in ranked]

    def add(self, pod: Pod, now: float) -> None:
        """A new pending pod, or a new version of one already queued (an unschedulable one
        backs off, then is tried again, if more than its status changed)."""
        entry = self._entries.get(pod.key)
        if entry is not None:
            changed = spec_changed(entry.pod, pod)
            entry.pod = pod
            if entry.where == "active":
                self._push_active(entry)
            elif entry.where == "unschedulable" and changed:
                self._back_off(entry, "UnschedulablePodUpdate")
            return
        enqueued = pod.creation_timestamp.timestamp() if pod.creation_timestamp else now
        entry = QueuedPod(pod=pod, enqueued=enqueued)
        self._entries[pod.key] = entry
        self._count("PodAdd")
        self._push_active(entry)

    def remove(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._set_aside(entry)
            entry.version += 1
            if self._lane_heaps and (lane := self._lane_of(entry.pod)):
                self._lanes_moved.add(lane)  # it may have been its lane's next pod
        if not self._entries:  # every timed record is stale: none is kept
            self._failures.clear()
            self._wakeups.clear()
            self._backoff.clear()

    def ungroup(self, key: str) -> None:
        """A waiting pod left its hint group (its new version has another shape): it is
        retried after any change."""
        entry = self._entries.get(key)
        if entry is not None and entry.group is not None:
            self._leave_group(entry)
            self._unhinted.add(key)

    def ungroup_all(self) -> None:
        """Every waiting pod leaves its hint group (the shapes they were grouped by no longer
        hold): each is retried after any change, and grouped anew when it fails again."""
        for key in list(self._entries):
            self.ungroup(key)

    def _count(self, event: str) -> None:
        self.incoming[event] = self.incoming.get(event, 0) + 1

    def _set_aside(self, entry: QueuedPod) -> None:
        """Forget that the pod is unschedulable (it is woken, or gone)."""
        key = entry.pod.key
        self._unschedulable.discard(key)
        self._unhinted.discard(key)
        self._leave_group(entry)

    def _leave_group(self, entry: QueuedPod) -> None:
        if entry.group is None:
            return
        group = self._groups[entry.group]
        group.discard(entry.pod.key)
        if not group.members and (self._trying is None or self._trying[0] is not group):
            self._drop(group)
        entry.group = None

    def _drop(self, group: ShapeGroup) -> None:
        del self._groups[group.name]
        del self._group_ids[group.id]
        group.version += 1

    def _push_active(self, entry: QueuedPod) -> None:
        entry.version += 1
        entry.where = "active"
        order = self._sort_key(entry.pod, entry.enqueued)
        heapq.heappush(self._heap_for(entry.pod), (order, entry.version, entry.pod.key, -1))

    def _lane_of(self, pod: Pod) -> str:
        return "" if self.lanes is None else self.lanes.lane_of(pod)

    def _heap_for(self, pod: Pod) -> list[Item]:
        lane = self._lane_of(pod)
        if not lane:
            return self._active
        self._lanes_moved.add(lane)
        return self._lane_heaps.setdefault(lane, [])

    def _push_group(self, group: ShapeGroup) -> None:
        """Make the group active from its next member on (dormant again if none is left)."""
        group.version += 1
        head = group.head()
        if head is None:
            group.where = "unschedulable"
            group.after = None
            return
        group.where = "active"
        heap = self._heap_for(self._entries[head[1]].pod)
        heapq.heappush(heap, (head[0], group.version, head[1], group.id))

    def backoff_seconds(self, attempts: int) -> float:
        if attempts <= 0:
            return 0.0
        # The exponent is capped: a pod that failed a thousand times (a long simulation) would
        # overflow a float, and the cap is reached long before that anyway.
        doublings = min(attempts - 1, 62)
        return float(min(self.initial_backoff * 2**doublings, self.max_backoff))

    def pop(self) -> QueuedPod | None:
        self._follow_state()
        item = self._next_item()
        if item is None:
            self._end_pass()
            return None
        order, _, key, group_id = item
        entry = self._entries[key]
        if group_id >= 0:
            group = self._group_ids[group_id]
            group.where = "trying"
            self._trying = (group, order, key)
        entry.where = "in-flight"
        lane = self._lane_of(entry.pod) if self._lane_heaps else ""
        self._last_orders[lane] = order
        return entry

    def _next_item(self) -> Item | None:
        """The next live entry: of the pods in no queue first, then of the lane `lanes`
        chooses."""
        if self.lanes is not None and self.lanes.version() != self._lanes_at:
            self._refile()
        while self._active:
            item = heapq.heappop(self._active)
            if self._live(item):
                return item
        if not self._lane_heaps or self.lanes is None:
            return None
        while True:
            lane = self.lanes.choose(self._lane_heads, self._clean_heads())
            if lane is None:
                return None
            self._lanes_moved.add(lane)
            # Its head was live when its lane last moved; an entry that left since (a gang
            # member bound with its group, say) is skipped and the lanes chosen among again.
            item = heapq.heappop(self._lane_heaps[lane])
            if self._live(item):
                return item

    def _live(self, item: Item) -> bool:
        """Whether an entry taken off a heap still stands (a group whose first member left
        is keyed anew, and this entry is not)."""
        _, version, key, group_id = item
        if group_id < 0:
            entry = self._entries.get(key)
            return entry is not None and entry.version == version and entry.where == "active"
        group = self._group_ids.get(group_id)
        if group is None or group.version != version or group.where != "active":
            return False
        head = group.head()
        if head is None or head[1] != key:
            self._push_group(group)
            return False
        return True

    def _clean_heads(self) -> set[str]:
        """Drop the stale entries atop the lanes that moved and note their next pods; the
        lanes that moved, returned."""
        moved: set[str] = set()
        while self._lanes_moved:
            lane = self._lanes_moved.pop()
            moved.add(lane)
            heap = self._lane_heaps.get(lane, [])
            while heap:
                item = heapq.heappop(heap)
                if self._live(item):
                    heapq.heappush(heap, item)
                    break
            if heap:
                self._lane_heads[lane] = self._entries[heap[0][2]].pod
            else:
                self._lane_heaps.pop(lane, None)
                self._lane_heads.pop(lane, None)
        return moved

    def _refile(self) -> None:
        """Pods may be in other lanes now (the queues changed): file every entry anew."""
        assert self.lanes is not None
        self._lanes_at = self.lanes.version()
        items = [*self._active, *(i for heap in self._lane_heaps.values() for i in heap)]
        self._active, self._lane_heaps, self._lane_heads = [], {}, {}
        for item in items:
            entry = self._entries.get(item[2])
            if entry is not None:
                self._heap_for(entry.pod).append(item)
        for heap in [self._active, *self._lane_heaps.values()]:
            heapq.heapify(heap)
        self._lanes_moved = set(self._lane_heaps)

    def _follow_state(self) -> None:
        """Between attempts of a pass: wake the parked groups if the state moved, and decide
        how the group of the member just tried goes on."""
        hints = self.hints
        if hints is None:
            return
        # The marks are made only while groups are parked (most passes park none); the first
        # group to park notes them.
        if self._parked and (marks := hints.marks()) != self._seen:
            self._seen = marks
            # Their members up to the entry just tried were told at once (nothing had moved);
            # from there on they are tried again.
            for group in self._parked:
                if group.where == "parked":
                    first = next(iter(group.members), None)
                    lane = self._lane_of(self._entries[first].pod) if first else ""
                    group.after = self._last_orders.get(lane)
                    self._push_group(group)
            self._parked = []
        if self._trying is None:
            return
        group, order, key = self._trying
        self._trying = None
        if not group.members:
            self._drop(group)
            return
        group.after = order
        if hints.failed_as_is(key):
            if not self._parked:
                self._seen = hints.marks()  # nothing moved the cluster since this call began
            group.where = "parked"
            group.version += 1
            self._parked.append(group)
        else:
            self._push_group(group)

    def _end_pass(self) -> None:
        """Parked groups' remaining members keep their answer: the state did not move."""
        for group in self._parked:
            if group.where == "parked":
                group.where = "unschedulable"
                group.after = None
        self._parked = []
        self._seen = None  # read only while groups are parked
        self._last_orders = {}
        for group in self._groups.values():
            group.fresh.clear()

    def mark_unschedulable(
        self, key: str, now: float, generation: int, group: HintGroup | None = None
    ) -> None:
        """The pod was tried and did not fit the cluster as of `generation`; with a `group`
        (and hints), only a change its group's hint accepts retries it before it is stale."""
        entry = self._entries.get(key)
        if entry is None:
            return
        self._set_aside(entry)
        entry.attempts += 1
        entry.failed_at = now
        entry.failed_generation = generation
        entry.where = "unschedulable"
        entry.version += 1
        self._unschedulable.add(key)
        self._count("ScheduleAttemptFailure")
        if group is None or self.hints is None:
            self._unhinted.add(key)
            return
        filed = self._groups.get(group)
        if filed is None:
            filed = ShapeGroup(group, self._next_group_id, self.hints.marks())
            self._next_group_id += 1
            self._groups[group] = self._group_ids[filed.id] = filed
        order = self._sort_key(entry.pod, entry.enqueued)
        # A pod tried in this pass is not tried again in it, though its group goes on.
        fresh = filed.where in ("active", "trying", "parked")
        filed.add(key, order, now + self.backoff_seconds(entry.attempts), fresh)
        entry.group = group
        self._failures.append((now, entry.version, key))
        if len(self._failures) > self._stale_limit():
            self._failures = deque(f for f in self._failures if self._current(f))

    def wake_at(self, key: str, when: float) -> None:
        """An unschedulable pod is retried at `when` even if the cluster does not change."""
        entry = self._entries.get(key)
        if entry is not None and entry.where == "unschedulable":
            heapq.heappush(self._wakeups, (when, entry.version, key))
            if len(self._wakeups) > self._stale_limit():
                self._wakeups = self._current_only(self._wakeups)

    def _next_wakeup_entry(self) -> tuple[float, int, str] | None:
        """The earliest wake-up still valid (the pod has not moved since it was set)."""
        while self._wakeups:
            top = self._wakeups[0]
            entry = self._entries.get(top[2])
            if entry is not None and entry.version == top[1] and entry.where == "unschedulable":
                return top
            heapq.heappop(self._wakeups)
        return None

    def refresh(self, now: float, generation: int) -> None:
        """Move pods whose wait is over to the active queue."""
        if not self._entries:
            # Nothing waits (`remove` let the pods' timed records go with the last of them);
            # a group's record left names a group no pod will join again.
            self._group_backoff.clear()
            return
        woken: dict[str, str] = {}
        while (due := self._next_wakeup_entry()) is not None and due[0] <= now:
            woken[heapq.heappop(self._wakeups)[2]] = "RetryTime"
        while self._failures and self._failures[0][0] + self.max_unschedulable_seconds <= now:
            _, version, key = self._failures.popleft()
            entry = self._entries.get(key)
            if entry is not None and entry.version == version:
                woken.setdefault(key, "UnschedulableTimeout")
        for key in self._unhinted:
            entry = self._entries[key]
            if generation > entry.failed_generation:
                woken.setdefault(key, "Any")
            elif now - entry.failed_at >= self.max_unschedulable_seconds:
                woken.setdefault(key, "UnschedulableTimeout")
        for key, event in sorted(woken.items()):
            self._back_off(self._entries[key], event)
        for group in self._hinted_groups(moved_only=True):
            group.where = "backoff"
            group.version += 1
            heapq.heappush(self._group_backoff, (group.expiry, group.id, group.version))
        while self._backoff and self._backoff[0][0] <= now:
            _, version, key = heapq.heappop(self._backoff)
            waiting = self._entries.get(key)
            if waiting is not None and waiting.version == version and waiting.where == "backoff":
                self._push_active(waiting)
        while self._group_backoff and self._group_backoff[0][0] <= now:
            _, group_id, version = heapq.heappop(self._group_backoff)
            ready = self._group_ids.get(group_id)
            if ready is not None and ready.version == version and ready.where == "backoff":
                ready.after = None
                self._push_group(ready)

    def _back_off(self, entry: QueuedPod, event: str) -> None:
        """A waiting pod is woken by `event`: active once its backoff since its failure ends."""
        self._set_aside(entry)
        self._count(event)
        entry.where = "backoff"
        entry.version += 1
        expiry = entry.failed_at + self.backoff_seconds(entry.attempts)
        heapq.heappush(self._backoff, (expiry, entry.version, entry.pod.key))
        if len(self._backoff) > self._stale_limit():
            self._backoff = self._current_only(self._backoff)

    # A timed record (time, version, key) is stale once its pod moved on or left; stale
    # records are skipped where they are met, and swept out once they outnumber the queued
    # pods, so pods gone long ago are not remembered (docs/live.md, memory).

    def _stale_limit(self) -> int:
        return 2 * len(self._entries) + 64

    def _current(self, record: tuple[float, int, str]) -> bool:
        entry = self._entries.get(record[2])
        return entry is not None and entry.version == record[1]

    def _current_only(self, heap: list[tuple[float, int, str]]) -> list[tuple[float, int, str]]:
        kept = [record for record in heap if self._current(record)]
        heapq.heapify(kept)
        return kept

    def _hinted_groups(self, moved_only: bool) -> list[ShapeGroup]:
        """The waiting groups a change since they were last judged may help, as their hint
        says, counted under the event it names. `moved_only`: only once something moved
        the generation (as every retry waits for a change in a cluster)."""
        if self.hints is None or not self._groups:
            return []
        marks = self.hints.marks()
        judged: list[ShapeGroup] = []
        asked: list[tuple[HintGroup, Pod, Hashable]] = []
        # Groups judged at one refresh share one marks object: `moved` is asked once per
        # object (this one is none of theirs).
        last: object = object()
        moved = False
        for name, group in self._groups.items():
            if group.where != "unschedulable" or group.marks == marks:
                continue
            if moved_only:
                if group.marks is not last:
                    last = group.marks
                    moved = self.hints.moved(last)
                if not moved:
                    continue
            judged.append(group)
            asked.append((name, self._entries[next(iter(group.members))].pod, group.marks))
        woken = []
        for group, event in zip(judged, self.hints.wakes(asked) if asked else [], strict=True):
            group.marks = marks
            if event is not None:
                self.incoming[event] = self.incoming.get(event, 0) + len(group.members)
                woken.append(group)
        return woken

    def flush(self) -> None:
        """Everything waiting becomes active now (time does not pass)."""
        for entry in list(self._entries.values()):
            if entry.where not in ("active", "in-flight"):
                self._wake_now(entry, "Flush")
        self._backoff.clear()
        self._group_backoff.clear()
        self._wakeups.clear()

    def settle(self) -> None:
        """One-shot mode, where time does not pass: every waiting pod that a change since
        its failure may help becomes active now, with no backoff (all of them without hints).
        """
        woken = {key: "Any" for key in self._unhinted}
        for entry in self._entries.values():
            if entry.where == "backoff":
                woken.setdefault(entry.pod.key, "Flush")
        for key, event in sorted(woken.items()):
            self._wake_now(self._entries[key], event)
        backing_off = [g for g in self._groups.values() if g.where == "backoff"]
        for group in [*backing_off, *self._hinted_groups(moved_only=False)]:
            group.after = None
            self._push_group(group)

    def _wake_now(self, entry: QueuedPod, event: str) -> None:
        self._set_aside(entry)
        self._count(event)
        self._push_active(entry)

    def next_wakeup(self) -> float | None:
        """When the earliest backing-off or woken pod becomes active (for a simulator's clock)."""
        if not (self._wakeups or self._backoff or self._group_backoff):
            return None  # asked at each instant: most often nothing waits on time
        times = []
        if (wakeup := self._next_wakeup_entry()) is not None:
            times.append(wakeup[0])
        # Asked at each instant: the heap's top, when current, is the earliest without sorting.
        for expiry, version, key in _in_order(self._backoff):
            entry = self._entries.get(key)
            if entry is not None and entry.version == version:
                times.append(expiry)
                break
        for expiry, group_id, version in _in_order(self._group_backoff):
            group = self._group_ids.get(group_id)
            if group is not None and group.version == version:
                times.append(expiry)
                break
        return min(times, default=None)

    def has_groups(self) -> bool:
        """Whether some waiting pods are filed in hint groups (most passes of a replay: none)."""
        return bool(self._groups)

    def group_marks(self) -> Iterator[Hashable]:
        """The marks the waiting groups were last judged at: their hints are asked about the
        changes since (the oldest of them is as far back as any question goes)."""
        return (group.marks for group in self._groups.values())

    def pending_counts(self) -> dict[str, int]:
        counts = {"active": 0, "backoff": 0, "unschedulable": 0}
        for entry in self._entries.values():
            where = entry.where
            if entry.group is not None and where == "unschedulable":
                where = self._groups[entry.group].where
            where = where if where in ("backoff", "unschedulable") else "active"
            counts[where] += 1
        return counts


def _in_order(heap: list[Timed]) -> Iterator[Timed]:
    """A heap's records, earliest first: its top, then (only if read past it) the rest sorted."""
    if heap:
        yield heap[0]
        yield from sorted(heap)[1:]
