"""The node arrays: room on rows, columns for new resources, the change log."""

from batchsched.objects.records import Node, Pod
from batchsched.state.nodes import Nodes
from tests.unit.state.builders import GI, pending, state_with


def test_room_is_counted_in_the_arrays_after_they_grow() -> None:
    """Binding writes single cells through a view of `free`: when `free` is made anew (more
    nodes than its rows, a resource no node had), the view must follow."""
    state = state_with()
    first = pending("first", 1000, 0)
    state.upsert_pod(first)
    state.assume(first.key, "a")
    for i in range(100):  # past the first allocation of rows
        state.upsert_node(Node(f"n{i:03d}", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    fpga = pending("fpga", 500, 0)
    fpga.requests["example.com/fpga"] = 2  # a new column
    state.upsert_pod(fpga)
    state.assume(fpga.key, "n099")
    row, cpu = state.nodes.row_of["n099"], state.nodes.resources.get("cpu") or 0
    column = state.nodes.resources.get("example.com/fpga") or 0
    assert int(state.nodes.free[row, cpu]) == 3500 and int(state.nodes.free[row, column]) == -2
    assert int(state.nodes.free[0, cpu]) == 3000
    state.remove_pod(first.key)
    state.remove_pod(fpga.key)
    assert int(state.nodes.free[0, cpu]) == 4000
    assert int(state.nodes.free[row, cpu]) == 4000 and int(state.nodes.free[row, column]) == 0


def test_take_room_takes_and_gives_back_each_requested_column_of_any_room() -> None:
    """On the state's own room (logged), on a copy (C or Fortran order) and on a slice of
    the state's room that is not contiguous: only the row's requested columns move."""
    state = state_with()
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10, "example.com/x": 2}))
    state.upsert_node(Node("c", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    pod = Pod("ns", "p", requests={"cpu": 300, "memory": GI, "example.com/x": 1, "pods": 0})
    demand = state.pods.demand(pod)
    assert len(demand.key) == 3  # a zero request takes no column
    shared = state.free_for(pod)
    rooms = [shared, shared.copy(), shared.copy(order="F"), state.nodes.free[:2]]
    assert state.nodes.is_shared_free(rooms[3]) and not rooms[3].flags.forc  # a strided view
    for room in rooms:
        before, mark = room.copy(), state.nodes.change_mark()
        state.nodes.take_room(room, 1, demand)
        expected = before.copy()
        for name, amount in pod.requests.items():
            expected[1, state.nodes.resources.get(name)] -= amount
        assert (room == expected).all()
        logged = state.nodes.rows_changed_since(mark)
        assert logged == ([1] if state.nodes.is_shared_free(room) else [])
        state.nodes.take_room(room, 1, demand, sign=-1)
        assert (room == before).all()


def test_a_node_moves_the_node_generation_only_when_what_masks_read_changes() -> None:
    nodes = Nodes()
    assert nodes.upsert(Node("a", {"cpu": 1000}, labels={"zone": "z1"}))
    generation, mark = nodes.generation, nodes.change_mark()
    assert not nodes.upsert(Node("a", {"cpu": 2000}, labels={"zone": "z1"}))  # room only
    assert nodes.generation == generation and nodes.rows_changed_since(mark) == [0]
    assert int(nodes.allocatable[0, 0]) == 2000 == int(nodes.free[0, 0])
    assert not nodes.upsert(Node("a", {"cpu": 2000}, labels={"zone": "z2"}))
    assert nodes.generation == generation + 1


def test_a_cleared_row_stays_in_place_empty() -> None:
    nodes = Nodes()
    for name in ("b", "a"):
        nodes.upsert(Node(name, {"cpu": 1000}))
    assert nodes.name_rank().tolist() == [1, 0] and not nodes.names_in_row_order()
    del nodes.row_of["b"]
    nodes.clear_row(0)
    assert nodes.rows == 2 and nodes.count == 1
    assert nodes.valid[:2].tolist() == [False, True] and int(nodes.free[0, 0]) == 0
    assert [idx for idx, _ in nodes.live()] == [1] and nodes.name(1) == "a"
    assert nodes.name_rank().tolist() == [1, 0]  # the empty row sorts last
