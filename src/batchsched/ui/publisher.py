"""The board the web pages read, handed from the thread that owns the state to the HTTP
threads (docs/ui.md).

The owner asks `due()` between its passes and, when it is, builds a new board and `publish`es
it; readers `take()` the last one. A board is built only while someone reads the pages (a
read in the last `idle_after` seconds), at most every `interval` seconds, and never more
often than keeps its cost under `budget` of the owner's time: on a big cluster the board
comes less often rather than slowing scheduling.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from batchsched.ui.board import Board


class Publisher:
    def __init__(
        self,
        interval: float = 1.0,
        idle_after: float = 30.0,
        budget: float = 0.02,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.idle_after = idle_after
        self.budget = budget
        self._clock = clock
        self._board: Board | None = None
        self._published_at = -float("inf")
        self._build_seconds = 0.0
        self._read_at = -float("inf")
        self._changed = threading.Condition()
        self.version = 0

    def take(self) -> Board | None:
        """The last board (None before the first), and a sign that someone reads."""
        self._read_at = self._clock()
        return self._board

    def due(self) -> bool:
        """Whether the owner should build a board now."""
        now = self._clock()
        if now - self._read_at > self.idle_after and self._board is not None:
            return False
        wait = max(self.interval, self._build_seconds / self.budget)
        return now - self._published_at >= wait

    def next_version(self) -> int:
        self.version += 1
        return self.version

    def publish(self, board: Board, build_seconds: float = 0.0) -> None:
        """Hand over `board`; `build_seconds`: what building it cost the owner."""
        with self._changed:
            self._board = board
            self._published_at = self._clock()
            self._build_seconds = build_seconds
            self._changed.notify_all()

    def wait_newer(self, version: int, timeout: float) -> Board | None:
        """The board once it is newer than `version`, or the last one after `timeout`."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._board is not None and self._board.version > version, timeout
            )
            return self._board
