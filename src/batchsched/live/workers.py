"""A thread pool that remembers what it has in flight, so callers can wait for it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class Workers:
    def __init__(self, count: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(count, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._pending: set[Future[None]] = set()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        future = self._pool.submit(fn, *args)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    def wait(self) -> None:
        """Until everything submitted so far has run (its exceptions are logged by the jobs)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.exception()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
