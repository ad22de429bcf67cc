"""The policy objects: PriorityClasses resolve pods' priorities and preemption policies."""

from batchsched.objects.records import Pod, PodGroup, PriorityClass
from batchsched.state.cluster import ClusterState
from batchsched.state.policy import Policy


def test_priority_resolution_order() -> None:

    state = ClusterState()
    state.upsert_priority_class(PriorityClass("default", 7, global_default=True))
    state.upsert_priority_class(PriorityClass("high", 100))
    assert state.policy.priority_of(Pod("ns", "a", priority=3, priority_class_name="high")) == 3
    assert state.policy.priority_of(Pod("ns", "b", priority_class_name="high")) == 100
    assert state.policy.priority_of(Pod("ns", "c")) == 7
    assert state.policy.priority_of(Pod("ns", "d", priority_class_name="missing")) == 0


def test_a_class_gives_its_preemption_policy_unless_the_pod_says_its_own() -> None:
    policy = Policy()
    policy.upsert_priority_class(PriorityClass("polite", 10, preemption_policy="Never"))
    assert policy.preemption_policy_of(Pod("ns", "a", priority_class_name="polite")) == "Never"
    own = Pod("ns", "b", priority_class_name="polite", preemption_policy="PreemptLowerPriority")
    assert policy.preemption_policy_of(own) == "PreemptLowerPriority"
    assert policy.preemption_policy_of(Pod("ns", "c")) == "PreemptLowerPriority"


def test_a_group_has_its_own_priority_only_when_it_names_one() -> None:
    policy = Policy()
    policy.upsert_priority_class(PriorityClass("high", 100))
    assert policy.group_priority(PodGroup("ns", "g", 2)) is None
    assert policy.group_priority(PodGroup("ns", "g", 2, priority_class_name="high")) == 100
    assert policy.group_priority(PodGroup("ns", "g", 2, priority=5)) == 5


def test_classes_and_budgets_move_the_policy_version_namespaces_their_own() -> None:
    policy = Policy()
    policy.upsert_priority_class(PriorityClass("high", 100))
    policy.remove_priority_class("high")
    assert (policy.version, policy.namespace_version) == (2, 0)
