"""The decision dispatcher (controllers/dispatch.py): handlers by decision type, in order."""

from __future__ import annotations

from datetime import UTC, datetime

from batchsched.controllers import Dispatcher
from batchsched.decisions import Bind, Decision, Evict, Nominate, Reserve, Unschedulable


def test_each_decision_goes_to_its_type_s_handlers_in_order() -> None:
    seen: list[tuple[str, Decision]] = []
    dispatcher = Dispatcher()
    dispatcher.on(Bind, lambda d: seen.append(("bind", d)))
    dispatcher.on(Evict, lambda d: seen.append(("evict", d)))
    dispatcher.on(Bind, lambda d: seen.append(("bind again", d)))
    bind = Bind("ns/a", "n1")
    evict = Evict("ns/b", "n1", "ns/a", "preempted")
    dispatcher.dispatch([evict, Nominate("ns/a", "n1"), bind])
    assert seen == [("evict", evict), ("bind", bind), ("bind again", bind)]


def test_decisions_a_world_registered_nothing_for_are_left_alone() -> None:
    dispatcher = Dispatcher()
    told: list[Decision] = []
    dispatcher.on(Unschedulable, told.append)
    reserve = Reserve("n1", "ns/ds", datetime(2026, 11, 22, tzinfo=UTC))
    dispatcher.dispatch([reserve, Unschedulable("ns/a", "no room")])
    assert told == [Unschedulable("ns/a", "no room")]
