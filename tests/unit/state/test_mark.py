"""ClusterMark: each owner's version by name, and what moved between two marks."""

import pytest

from batchsched.objects.records import Namespace, Node, Pod, PodGroup, PriorityClass
from batchsched.state.cluster import ClusterState
from batchsched.state.mark import VERSIONS, ClusterMark

GI = 2**30


def test_a_mark_names_the_version_that_moved() -> None:
    state = ClusterState()
    before = state.mark()
    state.upsert_priority_class(PriorityClass("high", 100))
    assert state.changed_since(before) == {"policy", "generation"}
    after_policy = state.mark()
    state.upsert_namespace(Namespace("team"))
    assert state.changed_since(after_policy) == {"namespaces", "generation"}
    after_namespace = state.mark()
    state.upsert_pod_group(PodGroup("ns", "gang", min_member=2))
    assert state.changed_since(after_namespace) == {"groups", "generation"}
    after_group = state.mark()
    state.upsert_node(Node("a", {"cpu": 1000}))
    assert state.changed_since(after_group) == {"nodes", "generation"}
    assert state.nodes.rows_changed_since(after_group.rows) == [0]
    assert state.changed_since(state.mark()) == frozenset()


def test_marks_compare_by_value_and_cannot_change() -> None:
    state = ClusterState()
    first, second = state.mark(), state.mark()
    assert first == second and hash(first) == hash(second)
    with pytest.raises(AttributeError):
        first.policy = 3  # type: ignore[misc]
    assert set(VERSIONS) == set(ClusterMark._fields) - {"rows"}


def test_changes_from_lists_every_moved_version() -> None:
    earlier = ClusterMark(0, 0, 0, 0, 0, 0, 0, 0)
    later = ClusterMark(5, 1, 0, 2, 0, 0, 3, 0)
    assert later.changes_from(earlier) == {"nodes", "generation", "devices"}
    assert earlier.changes_from(earlier) == frozenset()


def test_changed_since_does_not_read_the_log() -> None:
    """A tentative scope's rows are dropped when nothing read the log meanwhile: asking
    which versions moved must not count as such a read."""
    state = ClusterState()
    state.upsert_node(Node("a", {"cpu": 1000}))
    mark = state.mark()
    demand = state.pods.demand(Pod("ns", "p", requests={"cpu": 100}))
    with state.nodes.tentative():
        state.nodes.take_room(state.nodes.free, 0, demand)
        assert state.changed_since(mark) == frozenset()
        state.nodes.take_room(state.nodes.free, 0, demand, sign=-1)
    assert state.nodes.rows_changed_since(mark.rows) == []
