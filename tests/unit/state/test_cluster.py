from dataclasses import replace

import pytest

from batchsched.objects.podgroup import GROUP_ANNOTATION
from batchsched.objects.records import Node, Pod, PodGroup
from batchsched.state import cluster
from batchsched.state.cluster import ClusterState

GI = 2**30


def state_with(*pods: Pod) -> ClusterState:
    state = ClusterState()
    state.upsert_node(Node("a", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    for pod in pods:
        state.upsert_pod(pod)
    return state


def pending(name: str, cpu: int, priority: int) -> Pod:
    return Pod("ns", name, requests={"cpu": cpu, "pods": 1}, priority=priority)


def cpu_free(state: ClusterState, pod: Pod) -> int:
    return int(state.free_for(pod)[0, state.resources.get("cpu") or 0])


def test_nominated_pods_hold_room_against_lower_or_equal_priority_only() -> None:
    nominee = pending("nominee", 3000, priority=10)
    state = state_with(nominee)
    state.nominate(nominee.key, "a")
    assert cpu_free(state, pending("low", 1, 5)) == 1000
    assert cpu_free(state, pending("same", 1, 10)) == 1000
    assert cpu_free(state, pending("high", 1, 11)) == 4000
    assert cpu_free(state, nominee) == 4000  # a pod does not hold room against itself


def test_assume_counts_the_pod_until_forgotten() -> None:
    pod = pending("p", 1000, 0)
    state = state_with(pod)
    state.assume(pod.key, "a")
    assert int(state.free[0, 0]) == 3000
    # The world still reports the pod unbound (bind in flight): the assumption stands.
    state.upsert_pod(pending("p", 1000, 0))
    assert int(state.free[0, 0]) == 3000 and "ns/p" not in state.pending
    state.forget(pod.key)
    assert int(state.free[0, 0]) == 4000 and "ns/p" in state.pending


def test_confirmed_bind_ends_the_assumption() -> None:
    pod = pending("p", 1000, 0)
    state = state_with(pod)
    state.assume(pod.key, "a")
    bound = pending("p", 1000, 0)
    bound.node_name = "a"
    state.upsert_pod(bound)
    assert state.assumed == set()
    state.forget(pod.key)  # no longer assumed: nothing to give back
    assert int(state.free[0, 0]) == 3000


def test_finished_pods_release_room_and_move_generation() -> None:
    pod = pending("p", 1000, 0)
    pod.node_name = "a"
    state = state_with(pod)
    before = state.generation
    done = pending("p", 1000, 0)
    done.node_name, done.phase = "a", "Succeeded"
    state.upsert_pod(done)
    assert int(state.free[0, 0]) == 4000 and state.generation > before


def test_priority_resolution_order() -> None:
    from batchsched.objects.records import PriorityClass

    state = ClusterState()
    state.upsert_priority_class(PriorityClass("default", 7, global_default=True))
    state.upsert_priority_class(PriorityClass("high", 100))
    assert state.priority_of(Pod("ns", "a", priority=3, priority_class_name="high")) == 3
    assert state.priority_of(Pod("ns", "b", priority_class_name="high")) == 100
    assert state.priority_of(Pod("ns", "c")) == 7
    assert state.priority_of(Pod("ns", "d", priority_class_name="missing")) == 0


def test_removing_a_node_releases_its_pods_and_nominations() -> None:
    pod = pending("p", 1000, 0)
    pod.node_name = "a"
    nominee = pending("n", 1000, 0)
    state = state_with(pod, nominee)
    state.nominate(nominee.key, "a")
    state.remove_node("a")
    assert state.bound == {} and state.nominations == {} and state.node_count == 0


def test_pods_asking_alike_share_one_read_only_demand() -> None:
    one, two = pending("one", 1000, 0), pending("two", 1000, 0)
    state = state_with(one, two)
    demand = state.demand(one)
    assert state.demand(two) is demand
    assert state.demand(pending("three", 2000, 0)) is not demand
    assert demand.key == tuple(zip(demand.cols.tolist(), demand.amounts.tolist(), strict=True))
    try:
        demand.amounts[0] = 1
    except ValueError:
        pass
    else:
        raise AssertionError("a shared demand must not be writable")


def test_a_pod_asking_a_new_resource_widens_the_room_before_it_is_counted() -> None:
    pod = pending("p", 1000, 0)
    pod.requests["example.com/fpga"] = 1
    pod.node_name = "a"
    state = state_with(pod)  # the node has no such column yet
    assert int(state.free[0, state.resources.get("example.com/fpga") or 0]) == -1


def bound_copy(pod: Pod) -> Pod:
    again = Pod(pod.namespace, pod.name, requests=dict(pod.requests), priority=pod.priority)
    again.node_name = pod.node_name
    return again


def test_confirming_an_assumed_pod_in_place_is_the_same_as_a_new_report() -> None:
    """The simulator confirms a bind by updating the pod object the state holds
    (`confirm_bound`): the state must end as it does when the world sends a new object
    (room, pods' order, priorities, what the queue is told)."""
    views = []
    for how in ("same object", "new object", "confirm_bound"):
        first, second = pending("first", 1000, 5), pending("second", 500, 7)
        state = state_with(first, second)
        state.assume(first.key, "a")
        state.assume(second.key, "a")
        state.drain_pending_changes()
        mark, generation = state.change_mark(), state.generation
        held = state.pods[first.key]
        confirmed = bound_copy(held) if how == "new object" else held
        confirmed.priority = 9  # a report may carry a new priority
        if how == "confirm_bound":
            state.confirm_bound(confirmed)
        else:
            state.upsert_pod(confirmed)
        assert state.rows_changed_since(mark)  # the row's pods changed: caches look again
        assert state.generation == generation  # no room came free: no waiting pod is woken
        views.append(
            (
                state.free.tolist(),
                state.nonzero_gap.tolist(),
                list(state.node_pods[0]),
                state.lowest_bound_priority(),
                state.assumed,
                state.drain_pending_changes(),
                dict(state.bound),
            )
        )
    assert views[0] == views[1] == views[2]
    assert views[0][2] == ["ns/second", "ns/first"]  # the confirmed pod goes last
    assert views[0][3] == 7 and views[0][4] == {"ns/second"}


def _on_a(*names: str) -> ClusterState:
    pods = [pending(name, 100, 0) for name in names]
    for pod in pods:
        pod.node_name = "a"
    return state_with(*pods)


def test_a_tentative_scope_nobody_read_leaves_no_trace() -> None:
    state = _on_a("x", "y", "z")
    mark = state.change_mark()
    with state.tentative():
        state.unhold("ns/x", 0)
        state.unhold("ns/y", 0)
        state.hold("ns/x", 0)  # back, but after z
        state.hold("ns/y", 0)
    assert list(state.node_pods[0]) == ["ns/x", "ns/y", "ns/z"]
    assert state.rows_changed_since(mark) == []
    assert state.change_mark() == mark


def test_a_tentative_scope_someone_read_keeps_its_changes_logged() -> None:
    state = _on_a("x", "y")
    mark = state.change_mark()
    with state.tentative():
        state.unhold("ns/x", 0)
        seen = state.change_mark()  # e.g. a cache refreshed on the changed row meanwhile
        state.hold("ns/x", 0)
    assert seen == mark + 1
    assert state.rows_changed_since(mark) == [0, 0]  # the reader must see the row go back
    assert list(state.node_pods[0]) == ["ns/x", "ns/y"]


def test_a_tentative_scope_left_by_an_error_keeps_its_changes_logged() -> None:
    state = _on_a("x")
    mark = state.change_mark()
    try:
        with state.tentative():
            state.unhold("ns/x", 0)
            raise RuntimeError("a plugin failed")
    except RuntimeError:
        pass
    assert state.rows_changed_since(mark) == [0]
    assert "ns/x" not in state.node_pods[0]


def test_a_tentative_scope_longer_than_the_log_still_leaves_no_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log does not roll over within a scope (a rollover would make every cache
    following the log rebuild from scratch)."""
    monkeypatch.setattr(cluster, "_CHANGE_LOG_LIMIT", 4)
    state = _on_a("x")
    mark = state.change_mark()
    with state.tentative():
        for _ in range(5):
            state.unhold("ns/x", 0)
            state.hold("ns/x", 0)
    assert state.rows_changed_since(mark) == []


def _on_two_nodes() -> ClusterState:
    """Node a with x, y, z (y without requests: it counts the non-zero defaults); node b
    with v, w (w as read from a manifest, with its own non-zero requests)."""
    state = state_with()
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    pods = [pending("x", 100, 0), Pod("ns", "y", priority=0), pending("z", 100, 0)]
    pods += [pending("v", 100, 0), replace(pending("w", 100, 0), nonzero_requests=(300, GI))]
    for pod in pods:
        pod.node_name = "a" if pod.name in "xyz" else "b"
        state.upsert_pod(pod)
    return state


def test_a_tentative_scope_puts_back_each_row_as_it_found_it() -> None:
    """Victims taken off and put back in one call each, a pending pod shown on a row and
    taken off again: every row ends with its pods in their order and its non-zero defaults,
    and within the scope the defaults follow each pod as it moves."""
    state = _on_two_nodes()
    gaps = state.nonzero_gap[:2].tolist()
    default_memory = 200 * 2**20  # every pod here but y and w requests cpu only
    assert gaps == [[100, 3 * default_memory], [200, GI + default_memory]]
    state.upsert_pod(pending("member", 100, 0))
    with state.tentative():
        state.unhold_all([("ns/x", 0), ("ns/y", 0), ("ns/w", 1), ("ns/v", 1)])
        assert state.nonzero_gap[:2].tolist() == [[0, default_memory], [0, 0]]
        state.hold("ns/member", 1)
        state.hold_all([("ns/v", 1), ("ns/w", 1), ("ns/y", 0)])
        assert state.nonzero_gap[:2].tolist() == [
            [100, 2 * default_memory],
            [200, GI + 2 * default_memory],
        ]
        assert list(state.node_pods[0]) == ["ns/z", "ns/y"]
        assert list(state.node_pods[1]) == ["ns/member", "ns/v", "ns/w"]
        state.hold("ns/x", 0)
        state.hold("ns/x", 0)  # already there: it stays where it is
        state.unhold("ns/member", 1)
    assert [list(pods) for pods in state.node_pods] == [["ns/x", "ns/y", "ns/z"], ["ns/v", "ns/w"]]
    assert state.nonzero_gap[:2].tolist() == gaps
    assert all(state.node_pods[state.bound[key]][key] is state.pods[key] for key in state.bound)


def test_a_pod_reported_anew_counts_the_non_zero_defaults_of_its_new_report() -> None:
    """A running pod re-reported with requests, then without, then gone: its node's
    non-zero defaults follow each report, and a tentative scope moves the ones it has now."""
    state = _on_two_nodes()
    default_memory = 200 * 2**20
    a = state.nonzero_gap[0].tolist()
    assert a == [100, 3 * default_memory]
    requested = replace(state.pods["ns/y"], requests={"cpu": 100, "memory": GI})
    state.upsert_pod(requested)
    assert state.nonzero_gap[0].tolist() == [0, 2 * default_memory]
    with state.tentative():
        state.unhold_all([("ns/y", 0), ("ns/x", 0)])
        assert state.nonzero_gap[0].tolist() == [0, default_memory]
        state.hold_all([("ns/x", 0), ("ns/y", 0)])
    state.upsert_pod(replace(requested, requests={}))
    assert state.nonzero_gap[0].tolist() == a
    with state.tentative():
        state.unhold("ns/y", 0)
        assert state.nonzero_gap[0].tolist() == [0, 2 * default_memory]
        state.hold("ns/y", 0)
    state.remove_pod("ns/y")
    assert state.nonzero_gap[0].tolist() == [0, 2 * default_memory]
    state.upsert_pod(replace(requested, node_name=""))  # pending again, with requests
    state.hold("ns/y", 0)
    assert state.nonzero_gap[0].tolist() == [0, 2 * default_memory]


@pytest.mark.parametrize("left", ["a pod off", "another pod on", "a pod swapped"])
def test_a_tentative_scope_that_leaves_a_row_changed_says_so(left: str) -> None:
    state = _on_two_nodes()
    state.upsert_pod(pending("member", 100, 0))
    raised = pytest.raises(AssertionError, match="row 0's pods were not restored")
    with raised, state.tentative():
        state.unhold("ns/y", 1)  # not there: changes nothing
        state.unhold("ns/v", 1)
        state.hold("ns/v", 1)
        if left != "another pod on":
            state.unhold("ns/x", 0)
        if left != "a pod off":
            state.hold("ns/member", 0)  # the same number of pods, another one among them


def test_moves_logged_together_roll_the_log_over_as_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Out of a tentative scope, a call moving several pods logs each as `hold` would, and
    the log rolls over where it would have: a mark from before then reaches back no more."""
    monkeypatch.setattr(cluster, "_CHANGE_LOG_LIMIT", 8)
    for calls in ("one by one", "together"):
        state = _on_two_nodes()  # 7 rows logged: 2 nodes and 5 pods
        mark = state.change_mark()
        placed = [("ns/x", 0), ("ns/v", 1)]
        if calls == "together":
            state.unhold_all(placed)
        else:
            for key, idx in placed:
                state.unhold(key, idx)
        assert state.rows_changed_since(mark) is None
        mark = state.change_mark()
        state.hold_all(placed)
        assert state.rows_changed_since(mark) == [0, 1]
        assert [pod.key if pod else None for pod in state.pods_changed_since(mark) or ()] == [
            "ns/x",
            "ns/v",
        ]


def test_confirm_bound_of_a_pod_never_assumed_is_a_plain_report() -> None:
    """A Bind the simulator did not get from this state's scheduler (a test injects one):
    the pod is counted on its node as `upsert_pod` counts it."""
    views = []
    for confirm in (True, False):
        pod = pending("p", 1000, 0)
        state = state_with(pod)
        pod.node_name = "a"
        if confirm:
            state.confirm_bound(pod)
        else:
            state.upsert_pod(pod)
        views.append((state.free.tolist(), dict(state.bound), set(state.pending)))
    assert views[0] == views[1]
    assert views[0][1] == {"ns/p": 0} and not views[0][2]


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
    row, cpu = state.node_index["n099"], state.resources.get("cpu") or 0
    column = state.resources.get("example.com/fpga") or 0
    assert int(state.free[row, cpu]) == 3500 and int(state.free[row, column]) == -2
    assert int(state.free[0, cpu]) == 3000
    state.remove_pod(first.key)
    state.remove_pod(fpga.key)
    assert int(state.free[0, cpu]) == 4000
    assert int(state.free[row, cpu]) == 4000 and int(state.free[row, column]) == 0


def test_a_new_pod_group_requeues_its_pending_members_only() -> None:
    """The queue's order of a member reads its PodGroup (creation time, priority); no other
    pod's order or shape does."""
    member, other = pending("member", 100, 0), pending("other", 100, 0)
    member.annotations[GROUP_ANNOTATION] = "g"
    state = state_with(member, other)
    state.drain_pending_changes()
    state.upsert_pod_group(PodGroup(namespace="ns", name="g", min_member=1))
    assert state.drain_pending_changes() == {member.key}


def test_a_pods_key_is_its_namespace_and_name_also_when_copied() -> None:
    pod = pending("p", 100, 0)
    assert pod.key == "ns/p"
    assert replace(pod, name="q").key == "ns/q"
    assert replace(pod, namespace="other").key == "other/p"
    assert "key=" not in repr(pod)


def test_take_room_takes_and_gives_back_each_requested_column_of_any_room() -> None:
    """On the state's own room (logged), on a copy (C or Fortran order) and on a slice of
    the state's room that is not contiguous: only the row's requested columns move."""
    state = state_with()
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10, "example.com/x": 2}))
    state.upsert_node(Node("c", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    pod = Pod("ns", "p", requests={"cpu": 300, "memory": GI, "example.com/x": 1, "pods": 0})
    demand = state.demand(pod)
    assert len(demand.key) == 3  # a zero request takes no column
    shared = state.free_for(pod)
    rooms = [shared, shared.copy(), shared.copy(order="F"), state.free[:2]]
    assert state.is_shared_free(rooms[3]) and not rooms[3].flags.forc  # a strided view
    for room in rooms:
        before, mark = room.copy(), state.change_mark()
        state.take_room(room, 1, demand)
        expected = before.copy()
        for name, amount in pod.requests.items():
            expected[1, state.resources.get(name)] -= amount
        assert (room == expected).all()
        logged = state.rows_changed_since(mark)
        assert logged == ([1] if state.is_shared_free(room) else [])
        state.take_room(room, 1, demand, sign=-1)
        assert (room == before).all()
