"""The pods: shared demands, bound and pending pods, owners and affinity carriers."""

from batchsched.objects.records import OwnerReference, Pod
from tests.unit.state.builders import pending, state_with


def test_pods_asking_alike_share_one_read_only_demand() -> None:
    one, two = pending("one", 1000, 0), pending("two", 1000, 0)
    state = state_with(one, two)
    demand = state.pods.demand(one)
    assert state.pods.demand(two) is demand
    assert state.pods.demand(pending("three", 2000, 0)) is not demand
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
    assert int(state.nodes.free[0, state.nodes.resources.get("example.com/fpga") or 0]) == -1


def test_the_lowest_bound_priority_follows_binds_and_departures() -> None:
    low, high = pending("low", 100, 1), pending("high", 100, 9)
    state = state_with(low, high)
    assert state.pods.lowest_bound_priority() is None  # pending pods do not count
    state.assume(low.key, "a")
    state.assume(high.key, "a")
    assert state.pods.lowest_bound_priority() == 1 and state.pods.bound == {low.key: 0, high.key: 0}
    state.remove_pod(low.key)
    assert state.pods.lowest_bound_priority() == 9


def test_owner_pods_are_counted_while_a_pod_names_them() -> None:
    driver = pending("driver", 100, 0)
    ref = OwnerReference(kind="Pod", name="driver", uid="u", controller=True)
    executor = Pod("ns", "executor", requests={"cpu": 100}, owner_references=(ref,))
    state = state_with(driver, executor)
    assert state.pods.is_owner(driver) and not state.pods.is_owner(executor)
    state.remove_pod(executor.key)
    assert not state.pods.is_owner(driver)


def test_departed_pods_are_those_removed_and_not_back_each_told_once() -> None:
    gone, back, staying = pending("gone", 100, 0), pending("back", 100, 0), pending("stay", 100, 0)
    state = state_with(gone, back, staying)
    assert state.pods.drain_departed() == set()
    state.remove_pod(gone.key)
    state.remove_pod(back.key)
    state.upsert_pod(pending("back", 100, 0))  # reported again before the pass: not departed
    assert state.pods.drain_departed() == {gone.key}
    assert state.pods.drain_departed() == set()


def test_a_confirmed_bind_counts_the_priority_the_pod_has_then() -> None:
    # A bind confirmed as the very object assumed (the simulator's) counts its priority
    # anew only when it moved: skipping the recount must not keep a stale one.
    low, other = pending("low", 100, 1), pending("other", 100, 9)
    state = state_with(low, other)
    state.assume(low.key, "a")
    state.assume(other.key, "a")
    state.confirm_bound(low)
    assert state.pods.lowest_bound_priority() == 1
    low.priority = 5
    state.confirm_bound(low)
    assert state.pods.lowest_bound_priority() == 5
    state.remove_pod(low.key)
    assert state.pods.lowest_bound_priority() == 9
