"""What the live loop does for the web UI (docs/ui.md): record each pass's decisions (the
events and preemptions the pages list) and, when the publisher says a board is due, build
one from the state it owns and publish it. Both run on the loop's thread, between passes:
the HTTP threads never touch the state.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime

from batchsched.decisions import Decision
from batchsched.scheduling.scheduler import Scheduler
from batchsched.ui.board import build_board
from batchsched.ui.history import History
from batchsched.ui.publisher import Publisher


class Feed:
    def __init__(self, scheduler: Scheduler, publisher: Publisher) -> None:
        self.scheduler = scheduler
        self.publisher = publisher
        self.history = History()

    def record(self, decisions: Iterable[Decision], now: datetime) -> None:
        self.history.record(decisions, self.scheduler.state, now)

    def publish_if_due(self, now: datetime) -> None:
        if not self.publisher.due():
            return
        started = time.perf_counter()
        board = build_board(
            self.scheduler,
            self.publisher.next_version(),
            now,
            "the cluster",
            self.scheduler.messages,
            self.history.preemptions(),
            self.history.events(),
        )
        self.publisher.publish(board, time.perf_counter() - started)
