"""Per-queue measurement of a run (docs/simulate.md#queues-many-tenants): each queue's share of
the cluster over time against its fair share, Jain's index of the queues' shares relative to
their fair shares, waits, and what reclaim cost each queue.

Shares are of one resource: the cluster's GPUs when it has any, else its CPU. A queue's
allocated amount is what the bound pods of its subtree request of it. The fair share is the
scheduler's own (the state's water-filling, docs/queues.md#fair-share), read at every instant;
in a run without the queues in its cluster, the same water-filling over the same queues and
the run's demand (allocated plus pending requests), so that runs with and without queues are
measured against the same yardstick.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from batchsched.objects.queues import Queue
from batchsched.sim.stats import spread, time_average
from batchsched.state.fair_share import fair_shares

if TYPE_CHECKING:
    from batchsched.sim.metrics import JobRecord


@dataclass
class QueueTimeline:
    """Each queue's allocated amount, fair share and pending pods, sampled when they change.

    `queues` lists every queue, parents before children; `allocated[k][i]` is queue i's
    (its subtree's) at `times[k]`, `fair[k][i]` its fair share then.
    """

    resource: str
    queues: list[str]
    parents: list[str]  # "" for a root
    leaves: list[bool]
    capacity: int  # the cluster's allocatable of `resource`
    since: float = 0.0  # where the time averages start (the scenario's queues.measureFrom)
    times: list[float] = field(default_factory=list)
    allocated: list[list[int]] = field(default_factory=list)
    fair: list[list[int] | None] = field(default_factory=list)
    pending: list[list[int]] = field(default_factory=list)

    def record(self, t: float, allocated: list[int], pending: list[int], fair: list[int]) -> None:
        """Sample at `t`; values are copied only when kept, as Timeline.record does."""
        if (
            self.times
            and self.allocated[-1] == allocated
            and self.pending[-1] == pending
            and self.fair[-1] == fair
        ):
            return
        if self.times and self.times[-1] == t:
            self.allocated[-1], self.pending[-1] = list(allocated), list(pending)
            self.fair[-1] = list(fair)
            return
        self.times.append(t)
        self.allocated.append(list(allocated))
        self.pending.append(list(pending))
        self.fair.append(list(fair))


class QueueMeter:
    """Keeps each queue's allocated amount and pending pods as the engine binds and removes
    pods; a job's pods count in its leaf and every ancestor."""

    def __init__(
        self,
        queues: list[Queue],
        resource: str,
        capacity: int,
        scheduler: Callable[[], list[int]] | None = None,
    ) -> None:
        """`scheduler` gives the scheduler's fair shares of these queues, in this order, when
        they are in its cluster; without it the meter water-fills them itself."""
        by_name = {q.name: q for q in queues}
        self._queues = by_name
        order = _tree_order(queues)
        self.index = {name: i for i, name in enumerate(order)}
        parents = [by_name[n].parent if by_name[n].parent in by_name else "" for n in order]
        self.paths: dict[str, list[int]] = {}
        for name in order:
            path, up = [], name
            while up:
                path.append(self.index[up])
                up = parents[self.index[up]]
            self.paths[name] = path
        self.allocated = [0] * len(order)  # in the resource's units, as requests are
        self.pending = [0] * len(order)  # pods
        self.asked = [0] * len(order)  # what the pending pods ask of the resource
        self._scheduler = scheduler
        quotas = [by_name[n].resources.get(resource) for n in order]
        self._limits = [None if q is None else q.limit for q in quotas]
        self._parent = [self.index[p] if p else -1 for p in parents]
        self._has_children = [False] * len(order)
        for parent in self._parent:
            if parent >= 0:
                self._has_children[parent] = True
        # Kept as demand (allocated plus asked) moves, queue by queue: each queue's cap (its
        # demand within its limit), the roots' caps added up, each parent's children's, and
        # the parents whose children's caps add up to more than its own.
        self._caps = [0] * len(order)
        self._roots_capped = 0
        self._children_capped = [0] * len(order)
        self._overfull: set[int] = set()
        self._filled: tuple[list[int], list[int]] | None = None  # (demand, water-filled)
        self.timeline = QueueTimeline(
            resource,
            order,
            parents,
            [not has for has in self._has_children],
            capacity,
        )

    def path(self, queue: str) -> list[int]:
        """The indexes of `queue` and its ancestors ([] for no queue or an unknown one)."""
        return self.paths.get(queue, [])

    def bound(self, path: list[int], amount: int) -> None:
        allocated = self.allocated
        for i in path:
            allocated[i] += amount
            self._demand_moved(i)

    def waiting(self, path: list[int], change: int, amount: int) -> None:
        pending, asked = self.pending, self.asked
        for i in path:
            pending[i] += change
            asked[i] += change * amount
            self._demand_moved(i)

    def started(self, path: list[int], amount: int) -> None:
        """A pending pod bound: what it asks is allocated now (its queues' demand stays)."""
        allocated, pending, asked = self.allocated, self.pending, self.asked
        for i in path:
            allocated[i] += amount
            pending[i] -= 1
            asked[i] -= amount

    def _demand_moved(self, i: int) -> None:
        demand = self.allocated[i] + self.asked[i]
        limit = self._limits[i]
        cap = demand if limit is None or demand < limit else limit
        moved = cap - self._caps[i]
        if not moved:
            return
        self._caps[i] = cap
        parent = self._parent[i]
        if parent < 0:
            self._roots_capped += moved
        else:
            self._children_capped[parent] += moved
            self._check_family(parent)
        if self._has_children[i]:
            self._check_family(i)

    def _check_family(self, parent: int) -> None:
        if self._children_capped[parent] > self._caps[parent]:
            self._overfull.add(parent)
        else:
            self._overfull.discard(parent)

    def everyone_capped(self) -> bool:
        """Whether there is room for every queue's cap at every level of the tree."""
        return self._roots_capped <= self.timeline.capacity and not self._overfull

    def fair_shares(self) -> list[int]:
        """The fair shares of this instant's demand (allocated plus what pending pods ask):
        each queue's cap (its demand within its limit) when there is room for every cap at
        every level, which is what water-filling gives then (a cluster with room to spare);
        else the scheduler's (read at every sample: decayed usage moves it with time), or
        without the queues in its cluster the same water-filling over these queues."""
        if self.everyone_capped():
            return list(self._caps)
        if self._scheduler is not None:
            return self._scheduler()
        demand = [a + b for a, b in zip(self.allocated, self.asked, strict=True)]
        if self._filled is None or self._filled[0] != demand:
            tl = self.timeline
            found = fair_shares(
                self._queues,
                {name: {tl.resource: d} for name, d in zip(tl.queues, demand, strict=True)},
                {tl.resource: tl.capacity},
            )
            self._filled = (
                demand,
                [found.get(q, {}).get(tl.resource, 0) for q in tl.queues],
            )
        return self._filled[1]

    def sample(self, t: float) -> None:
        # (The caps as they are when they are the fair shares: `record` copies what it keeps.)
        fair = self._caps if self.everyone_capped() else self.fair_shares()
        self.timeline.record(t, self.allocated, self.pending, fair)


def _tree_order(queues: list[Queue]) -> list[str]:
    """Queue names, parents before children, siblings by name."""
    names = {q.name for q in queues}
    children: dict[str, list[str]] = {}
    for q in queues:
        children.setdefault(q.parent if q.parent in names else "", []).append(q.name)
    out: list[str] = []
    stack = sorted(children.get("", []), reverse=True)
    while stack:
        name = stack.pop()
        out.append(name)
        stack.extend(sorted(children.get(name, []), reverse=True))
    return out


def queue_summary(timeline: QueueTimeline, jobs: list[JobRecord], end: float) -> dict[str, Any]:
    """Per queue: jobs, time-averaged share and fair share (% of the cluster), the
    time-averaged |allocated - fair share| / fair share, waits, reclaims and the GPU-hours
    reclaim lost; for the run: Jain's index over the leaves, time-averaged. The time averages
    start at the timeline's `since`; the job figures are of every job."""
    tl = timeline
    n = len(tl.queues)
    times, kept = _window(tl.times, tl.since)
    allocated = np.asarray(tl.allocated[kept:], dtype=np.float64).reshape(len(times), n)
    scale = 100.0 / tl.capacity if tl.capacity else 0.0
    share = time_average(times, allocated, end) * scale
    fair = np.asarray(tl.fair[kept:], dtype=np.float64).reshape(len(times), n)
    fair_share = time_average(times, fair, end) * scale
    deviation = _deviation(times, allocated, fair, end)
    leaves = [i for i in range(n) if tl.leaves[i]]
    jain = _jain(times, allocated[:, leaves], fair[:, leaves], end)
    by_queue: dict[str, list[JobRecord]] = {}
    for job in jobs:
        by_queue.setdefault(job.queue, []).append(job)
    subtree = {name: {name} for name in tl.queues}
    for i in reversed(range(n)):  # children after parents: add each to its ancestors
        parent = tl.parents[i]
        if parent:
            subtree[parent] |= subtree[tl.queues[i]]
    per_queue: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(tl.queues):
        mine = [j for q in sorted(subtree[name]) for j in by_queue.get(q, [])]
        waits = [w for j in mine if (w := j.wait) is not None]
        per_queue[name] = {
            "parent": tl.parents[i] or None,
            "leaf": tl.leaves[i],
            "jobs": len(mine),
            "submitted": sum(1 for j in mine if j.submit <= end),
            "started": len(waits),
            "finished": sum(1 for j in mine if j.end is not None),
            "share_percent": float(share[i]) if times else 0.0,
            "fair_share_percent": float(fair_share[i]) if times else 0.0,
            "deviation_percent": _maybe(deviation[i]) if times else None,
            "wait_seconds": spread(waits),
            "reclaims": sum(j.reclaims for j in mine),
            "reclaim_lost_gpu_hours": sum(j.reclaim_lost_gpu_seconds for j in mine) / 3600.0,
        }
    leaf_deviations = [
        d for i in leaves if (d := per_queue[tl.queues[i]]["deviation_percent"]) is not None
    ]
    return {
        "resource": tl.resource,
        "measured_from_seconds": tl.since,
        "jain_index_mean": jain,
        "deviation_percent_mean": float(np.mean(leaf_deviations)) if leaf_deviations else None,
        "reclaims": sum(j.reclaims for j in jobs),
        "reclaim_lost_gpu_hours": sum(j.reclaim_lost_gpu_seconds for j in jobs) / 3600.0,
        "queues": per_queue,
    }


def _window(times: list[float], since: float) -> tuple[list[float], int]:
    """The sample times of a step function from `since` on (the value in force at `since`
    starting there), and the index of its first sample kept."""
    if not times or since <= times[0]:
        return times, 0
    first = bisect.bisect_right(times, since) - 1  # the sample in force at `since`
    return [since, *times[first + 1 :]], first


def _maybe(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _deviation(
    times: list[float],
    allocated: np.ndarray[Any, Any],
    fair: np.ndarray[Any, Any],
    end: float,
) -> np.ndarray[Any, Any]:
    """Per queue, the time average of |allocated - fair| / fair (in %) over the time its fair
    share was above 0 (NaN for a queue whose fair share never was)."""
    t = np.asarray([*times, end], dtype=np.float64)
    widths = np.clip(np.diff(t), 0.0, None)[:, None]
    counted = fair > 0
    ratio = np.where(counted, np.abs(allocated - fair) / np.where(counted, fair, 1.0), 0.0)
    weight = (widths * counted).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray[Any, Any] = 100.0 * (ratio * widths).sum(axis=0) / weight
    return out


def jain_series(
    allocated: np.ndarray[Any, Any], fair: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Jain's index (sum x)^2 / (n sum x^2) of x = allocated / fair share over the queues
    whose fair share is above 0, per sample (1: every queue holds its fair share in the same
    proportion; 1/n: one queue holds everything); NaN where no queue has a fair share."""
    counted = fair > 0
    x = np.where(counted, allocated / np.where(counted, fair, 1.0), 0.0)
    n = counted.sum(axis=1)
    total = x.sum(axis=1)
    squares = (x * x).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray[Any, Any] = np.where(
            squares > 0, total * total / (n * squares), np.where(n > 0, 1.0, np.nan)
        )
    return out


def _jain(
    times: list[float],
    allocated: np.ndarray[Any, Any],
    fair: np.ndarray[Any, Any],
    end: float,
) -> float | None:
    """Jain's index averaged over the time some queue had a fair share."""
    if not times or end <= times[0]:
        return None
    series = jain_series(allocated, fair)
    t = np.asarray([*times, end], dtype=np.float64)
    widths = np.clip(np.diff(t), 0.0, None)
    known = ~np.isnan(series)
    total = float(widths[known].sum())
    return float((series[known] * widths[known]).sum() / total) if total > 0 else None
