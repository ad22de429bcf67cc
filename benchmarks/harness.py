"""Workload registry and measurement helpers.

A workload is a function returning its metrics (e.g. `pods_per_second`); the runner adds
`workload` and `peak_rss_mb`. Each workload runs in a fresh process so memory is its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Metrics = dict[str, Any]
WORKLOADS: dict[str, Callable[[], Metrics]] = {}


def workload(name: str) -> Callable[[Callable[[], Metrics]], Callable[[], Metrics]]:
    def register(fn: Callable[[], Metrics]) -> Callable[[], Metrics]:
        if name in WORKLOADS:
            raise ValueError(f"workload {name} registered twice")
        WORKLOADS[name] = fn
        return fn

    return register


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
