"""Reservations: a node held for one pending pod, ended by the pod or the node."""

from datetime import UTC, datetime

from batchsched.objects.records import Node
from batchsched.state.reservations import Reservation, Reservations
from tests.unit.state.builders import GI, pending, state_with

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_pod_holds_one_node_and_a_node_is_held_for_one_pod() -> None:
    state = state_with(pending("p", 100, 0), pending("q", 100, 0))
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    state.reserve("a", "ns/p", NOW)
    state.reserve("b", "ns/p", NOW)  # moves: a is open again
    assert state.reservations.by_row == {1: Reservation("b", "ns/p", NOW)}
    state.reserve("b", "ns/q", NOW)  # takes b from p
    assert state.reservations.by_pod == {"ns/q": 1} and state.reservations.of("ns/p") is None


def test_a_reservation_ends_when_its_pod_binds_or_its_node_goes() -> None:
    state = state_with(pending("p", 100, 0), pending("q", 100, 0))
    state.reserve("a", "ns/p", NOW)
    mark, generation = state.nodes.change_mark(), state.generation
    state.assume("ns/p", "a")
    assert state.reservations.of("ns/p") is None and state.generation == generation + 1
    assert state.nodes.rows_changed_since(mark) == [0, 0]  # the pod's room, the node opened
    state.reserve("a", "ns/q", NOW)
    state.remove_node("a")
    assert state.reservations.by_row == {} and state.reservations.by_pod == {}


def test_versions_move_with_each_change() -> None:
    reservations = Reservations()
    reservations.hold(3, Reservation("n", "ns/p", NOW))
    assert reservations.release("ns/q") is None and reservations.version == 1
    assert reservations.release("ns/p") == 3 and reservations.version == 2
