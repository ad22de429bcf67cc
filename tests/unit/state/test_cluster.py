"""ClusterState keeps its owners consistent: a pod reported, assumed, confirmed, forgotten
or gone moves its room, its pending status, its nomination and its group together."""

from dataclasses import replace

from batchsched.objects.podgroup import GROUP_ANNOTATION
from batchsched.objects.records import Node, Pod, PodGroup
from batchsched.state.cluster import ClusterState
from tests.unit.state.builders import GI, pending, state_with


def cpu_free(state: ClusterState, pod: Pod) -> int:
    return int(state.free_for(pod)[0, state.nodes.resources.get("cpu") or 0])


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
    assert int(state.nodes.free[0, 0]) == 3000
    # The world still reports the pod unbound (bind in flight): the assumption stands.
    state.upsert_pod(pending("p", 1000, 0))
    assert int(state.nodes.free[0, 0]) == 3000 and "ns/p" not in state.pods.pending
    state.forget(pod.key)
    assert int(state.nodes.free[0, 0]) == 4000 and "ns/p" in state.pods.pending


def test_confirmed_bind_ends_the_assumption() -> None:
    pod = pending("p", 1000, 0)
    state = state_with(pod)
    state.assume(pod.key, "a")
    bound = pending("p", 1000, 0)
    bound.node_name = "a"
    state.upsert_pod(bound)
    assert state.pods.assumed == set()
    state.forget(pod.key)  # no longer assumed: nothing to give back
    assert int(state.nodes.free[0, 0]) == 3000


def test_finished_pods_release_room_and_move_generation() -> None:
    pod = pending("p", 1000, 0)
    pod.node_name = "a"
    state = state_with(pod)
    before = state.generation
    done = pending("p", 1000, 0)
    done.node_name, done.phase = "a", "Succeeded"
    state.upsert_pod(done)
    assert int(state.nodes.free[0, 0]) == 4000 and state.generation > before


def test_removing_a_node_releases_its_pods_and_nominations() -> None:
    pod = pending("p", 1000, 0)
    pod.node_name = "a"
    nominee = pending("n", 1000, 0)
    state = state_with(pod, nominee)
    state.nominate(nominee.key, "a")
    state.remove_node("a")
    assert state.pods.bound == {} and state.nominations == {} and state.nodes.count == 0


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
        state.pods.drain_pending_changes()
        mark, generation = state.nodes.change_mark(), state.generation
        held = state.pods.by_key[first.key]
        confirmed = bound_copy(held) if how == "new object" else held
        confirmed.priority = 9  # a report may carry a new priority
        if how == "confirm_bound":
            state.confirm_bound(confirmed)
        else:
            state.upsert_pod(confirmed)
        assert state.nodes.rows_changed_since(mark)  # the row's pods changed: caches look again
        assert state.generation == generation  # no room came free: no waiting pod is woken
        views.append(
            (
                state.nodes.free.tolist(),
                state.nodes.nonzero_gap.tolist(),
                list(state.nodes.pods_on[0]),
                state.pods.lowest_bound_priority(),
                state.pods.assumed,
                state.pods.drain_pending_changes(),
                dict(state.pods.bound),
            )
        )
    assert views[0] == views[1] == views[2]
    assert views[0][2] == ["ns/second", "ns/first"]  # the confirmed pod goes last
    assert views[0][3] == 7 and views[0][4] == {"ns/second"}


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
        views.append((state.nodes.free.tolist(), dict(state.pods.bound), set(state.pods.pending)))
    assert views[0] == views[1]
    assert views[0][1] == {"ns/p": 0} and not views[0][2]


def test_a_new_pod_group_requeues_its_pending_members_only() -> None:
    """The queue's order of a member reads its PodGroup (creation time, priority); no other
    pod's order or shape does."""
    member, other = pending("member", 100, 0), pending("other", 100, 0)
    member.annotations[GROUP_ANNOTATION] = "g"
    state = state_with(member, other)
    state.pods.drain_pending_changes()
    state.upsert_pod_group(PodGroup(namespace="ns", name="g", min_member=1))
    assert state.pods.drain_pending_changes() == {member.key}


def test_the_group_of_a_pod_is_the_pod_group_it_names_once_that_exists() -> None:
    member, other = pending("member", 100, 0), pending("other", 100, 0)
    member.annotations[GROUP_ANNOTATION] = "g"
    state = state_with(member, other)
    assert state.group_of(member) is None and state.group_of(other) is None
    group = PodGroup(namespace="ns", name="g", min_member=1)
    state.upsert_pod_group(group)
    assert state.group_of(member) is group and state.group_of(other) is None
    assert state.group_of(replace(member, namespace="elsewhere")) is None


def test_a_pods_key_is_its_namespace_and_name_also_when_copied() -> None:
    pod = pending("p", 100, 0)
    assert pod.key == "ns/p"
    assert replace(pod, name="q").key == "ns/q"
    assert replace(pod, namespace="other").key == "other/p"
    assert "key=" not in repr(pod)


def test_a_pod_reported_before_its_node_is_counted_once_the_node_is_listed() -> None:
    # Watch streams do not order a pod's report after its node's (a DaemonSet pod bound to
    # a new node): the node must not look empty when it comes, or it is over-committed.
    state = state_with()
    early = pending("early", 3000, 0)
    early.node_name = "b"
    state.upsert_pod(early)
    assert early.key not in state.pods.pending
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    row = state.nodes.row_of["b"]
    assert state.pods.bound[early.key] == row
    assert int(state.nodes.free[row, 0]) == 1000


def test_a_pod_gone_or_moved_before_its_node_is_listed_is_not_counted_there() -> None:
    state = state_with()
    gone, moved = pending("gone", 3000, 0), pending("moved", 1000, 0)
    gone.node_name = moved.node_name = "b"
    state.upsert_pod(gone)
    state.upsert_pod(moved)
    state.remove_pod(gone.key)
    state.upsert_pod(replace(moved, node_name="a"))
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    row = state.nodes.row_of["b"]
    assert int(state.nodes.free[row, 0]) == 4000 and not state.nodes.pods_on[row]
    assert state.pods.bound[moved.key] == state.nodes.row_of["a"]
    assert not state.pods.on_unlisted_node


def test_a_node_deleted_and_re_created_holds_the_pods_still_bound_to_it() -> None:
    # kube-scheduler's cache keeps a deleted node's pods until their deletions arrive: a node
    # re-created under that name must not look empty, or it is over-committed.
    running, gone = pending("running", 3000, 0), pending("gone", 500, 0)
    running.node_name = gone.node_name = "b"
    state = state_with()
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    state.upsert_pod(running)
    state.upsert_pod(gone)
    state.remove_node("b")
    assert running.key not in state.pods.bound and running.key not in state.pods.pending
    state.remove_pod(gone.key)  # reported gone while its node was away
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    row = state.nodes.row_of["b"]
    assert state.pods.bound == {running.key: row}
    assert int(state.nodes.free[row, 0]) == 1000
    assert not state.pods.on_unlisted_node


def test_an_assumed_pod_whose_node_went_is_not_counted_there_once_forgotten() -> None:
    pod = pending("p", 3000, 0)
    state = state_with(pod)
    state.assume(pod.key, "a")
    state.remove_node("a")
    state.forget(pod.key)  # its bind failed: the node was gone
    assert pod.key in state.pods.pending and not state.pods.on_unlisted_node
    state.upsert_node(Node("a", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    assert int(state.nodes.free[state.nodes.row_of["a"], 0]) == 4000
