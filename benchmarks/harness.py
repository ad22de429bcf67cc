"""Workload registry and measurement helpers.

A workload is a function returning its metrics (e.g. `pods_per_second`); the runner adds
`workload` and `peak_rss_mb`. Each workload runs in a fresh process so memory is its own.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from batchsched.decisions import Bind, Decision, Evict
from batchsched.scheduling.scheduler import Scheduler

Metrics = dict[str, Any]
WORKLOADS: dict[str, Callable[[], Metrics]] = {}


def workload(name: str) -> Callable[[Callable[[], Metrics]], Callable[[], Metrics]]:
    def register(fn: Callable[[], Metrics]) -> Callable[[], Metrics]:
        if name in WORKLOADS:
            raise ValueError(f"workload {name} registered twice")
        WORKLOADS[name] = fn
        return fn

    return register


def decision_hash(lines: Iterable[object]) -> str:
    """A short digest of a run's decisions, one line each in order: a change meant to leave
    decisions alone must leave it equal (docs/benchmarks.md)."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(repr(line).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


class Stopwatch:
    def __init__(self) -> None:
        self.seconds = 0.0


@contextmanager
def timed() -> Iterator[Stopwatch]:
    watch = Stopwatch()
    start = time.perf_counter()
    try:
        yield watch
    finally:
        watch.seconds = time.perf_counter() - start


def one_pass(scheduler: Scheduler, now: datetime, pods: int) -> Metrics:
    """Time one scheduling pass that must bind `pods` pods (decisions applied in memory)."""
    with timed() as watch:
        decisions = scheduler.schedule_pass(now)
    bound = sum(isinstance(d, Bind) for d in decisions)
    if bound != pods:
        raise RuntimeError(f"expected {pods} bindings, got {bound}")
    return {
        "pods": pods,
        "seconds": round(watch.seconds, 3),
        "pods_per_second": round(bound / watch.seconds),
        "decision_hash": decision_hash(decisions),
    }


def settle(scheduler: Scheduler, now: datetime) -> list[list[Decision]]:
    """Scheduling passes as `batchsched schedule` runs them (victims leave at once, time
    stands still) until a pass binds and evicts nothing; each pass's decisions."""
    passes: list[list[Decision]] = []
    while True:
        scheduler.queue.settle()
        decisions = scheduler.schedule_pass(now)
        passes.append(decisions)
        changed = False
        for decision in decisions:
            if isinstance(decision, Evict):
                scheduler.state.remove_pod(decision.pod)
                changed = True
            elif isinstance(decision, Bind):
                changed = True
        if not changed:
            return passes
