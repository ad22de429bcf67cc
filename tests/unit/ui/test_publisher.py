"""Boards are built only while someone reads, at most every `interval`, and no more often than
keeps their cost within `budget` of the owner's time."""

from __future__ import annotations

from datetime import UTC, datetime

from batchsched.ui.board import Board
from batchsched.ui.publisher import Publisher

NOW = datetime(2026, 11, 22, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_boards_come_while_someone_reads_at_most_every_interval() -> None:
    clock = Clock()
    publisher = Publisher(interval=1.0, idle_after=30.0, budget=0.02, clock=clock)
    assert publisher.take() is None
    assert publisher.due()  # the first board
    publisher.publish(Board(publisher.next_version(), NOW, "x"), build_seconds=0.001)
    assert not publisher.due()
    clock.now += 1.0
    assert publisher.due()
    publisher.publish(Board(publisher.next_version(), NOW, "x"), build_seconds=0.001)
    clock.now += 31.0  # nobody read for longer than idle_after
    assert not publisher.due()
    board = publisher.take()
    assert board is not None and board.version == 2
    assert publisher.due()


def test_a_costly_board_comes_less_often() -> None:
    clock = Clock()
    publisher = Publisher(interval=1.0, budget=0.02, clock=clock)
    publisher.take()
    publisher.publish(Board(publisher.next_version(), NOW, "x"), build_seconds=0.1)
    clock.now += 4.9
    assert not publisher.due()  # 0.1 s is 2% of 5 s
    clock.now += 0.1
    assert publisher.due()
