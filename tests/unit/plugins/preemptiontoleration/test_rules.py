"""The preemption toleration rules (docs/preemption-toleration.md), one by one, through the
default profile (PreemptionToleration)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from batchsched.commands.schedule import run
from batchsched.config import default_config
from batchsched.decisions import Evict, Nominate, Warn
from batchsched.framework.interface import Cycle, Diagnosis
from batchsched.objects.load import Objects
from batchsched.objects.records import (
    NodeSelectorTerm,
    OwnerReference,
    PodCondition,
    PriorityClass,
    Requirement,
)
from batchsched.plugins.args import ConfigError
from batchsched.plugins.defaultpreemption.plugin import DefaultPreemption
from batchsched.plugins.preemptiontoleration.plugin import PreemptionToleration
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.preemption_world import (
    NOW,
    SIGS,
    X_K8S,
    bound,
    evicted,
    node,
    pod,
    priority_class,
    schedule,
    state_of,
)


def classes(guarded: PriorityClass) -> list[PriorityClass]:
    return [
        priority_class("system-critical", 10000),
        priority_class("high", 9000),
        priority_class("low", 8000),
        guarded,
    ]


def guarded(minimum: str | None = "10000", seconds: str | None = "600", **kw: Any) -> PriorityClass:
    return priority_class("guarded", 8000, minimum, seconds, **kw)


def preempts(
    klass: PriorityClass, preemptor: str = "high", victim: dict[str, Any] | None = None
) -> bool:
    """Whether a `preemptor`-class pod evicts the one `guarded` pod filling the only node."""
    result = schedule(
        node("n1"),
        *classes(klass),
        pod("victim", 4000, on="n1", klass="guarded", **(victim or {})),
        pod("preemptor", 4000, klass=preemptor),
    )
    return "default/victim" in evicted(result)


# ---- the toleration rule -------------------------------------------------------------------


def test_minimum_is_inclusive() -> None:
    assert preempts(guarded("9000", "-1"))
    assert not preempts(guarded("9001", "-1"))


def test_expiry_is_strict() -> None:
    # Scheduled exactly 600 s ago: since + 600 > now is false, so no longer tolerated.
    assert preempts(guarded(seconds="600"), victim={"scheduled": timedelta(seconds=600)})
    assert not preempts(guarded(seconds="600"), victim={"scheduled": timedelta(seconds=599)})


def test_a_preemptor_at_the_minimum_preempts_at_once() -> None:
    assert preempts(guarded(seconds="-1"), preemptor="system-critical")
    young = {"scheduled": timedelta(seconds=1)}
    assert preempts(guarded(seconds="600"), preemptor="system-critical", victim=young)


def test_negative_seconds_tolerate_forever() -> None:
    assert not preempts(guarded(seconds="-5"), victim={"scheduled": timedelta(days=365)})


def test_unset_seconds_mean_no_toleration() -> None:
    assert preempts(guarded(seconds=None), victim={"scheduled": timedelta(seconds=1)})


def test_unset_minimum_is_plain_priority() -> None:
    assert preempts(guarded(minimum=None, seconds="-1"))


@pytest.mark.parametrize(
    "conditions",
    [(), (PodCondition("PodScheduled", "False", NOW - timedelta(hours=2)),)],
    ids=["missing", "false"],
)
def test_victim_without_true_pod_scheduled_is_exempt(conditions: tuple[PodCondition, ...]) -> None:
    victim = pod("victim", 4000, on="n1", klass="guarded")
    victim.conditions = conditions
    state = state_of(
        node("n1"), *classes(guarded(seconds="600")), victim, pod("preemptor", 4000, klass="high")
    )
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    assert not any(isinstance(d, Evict) for d in decisions)


def test_old_prefix_works_and_current_prefix_wins() -> None:
    assert not preempts(guarded(seconds="-1", prefix=SIGS))
    both = guarded(seconds="-1", prefix=SIGS)
    both.annotations[X_K8S + "toleration-seconds"] = "0"
    assert preempts(both)


@pytest.mark.parametrize("raw", ["1e4", " 10000", "10_000", "10000.0", "ten", "", "2147483648"])
def test_unparsable_minimum_grants_no_toleration_and_warns_once(
    raw: str, caplog: pytest.LogCaptureFixture
) -> None:
    state = state_of(
        node("n1"),
        node("n2"),
        *classes(guarded(raw, "-1")),
        pod("v1", 4000, on="n1", klass="guarded"),
        pod("v2", 4000, on="n2", klass="guarded"),
        pod("p1", 4000, klass="high"),
    )
    scheduler = Scheduler(state, default_config())
    with caplog.at_level(logging.WARNING):
        first = scheduler.schedule_pass(NOW)
        state.upsert_pod(pod("p2", 4000, klass="high"))
        second = scheduler.schedule_pass(NOW)
    warnings = [d for d in first + second if isinstance(d, Warn)]
    assert [w.obj for w in warnings] == ["PriorityClass guarded"]
    assert "grants no preemption toleration" in warnings[0].message
    assert sum("guarded" in r.getMessage() for r in caplog.records) == 1
    assert {d.pod for d in first + second if isinstance(d, Evict)} == {"default/v1", "default/v2"}


def test_a_new_class_version_is_reported_again() -> None:
    plugin = PreemptionToleration()
    state = ClusterState()
    bad = guarded("x", "-1")
    state.upsert_priority_class(bad)
    preemptor = pod("p", 1, klass="high")
    warnings: list[Any] = []
    plugin.class_verdicts(state, preemptor, 9000, warnings)("guarded")
    plugin.class_verdicts(state, preemptor, 9000, warnings)("guarded")
    state.upsert_priority_class(guarded("y", "-1"))
    plugin.class_verdicts(state, preemptor, 9000, warnings)("guarded")
    assert len(warnings) == 2


def test_int32_bounds_of_the_minimum() -> None:
    assert not preempts(guarded(str(2**31 - 1), "-1"))  # valid: nothing below it may preempt
    assert preempts(guarded(str(2**31), "-1"))  # out of range: no toleration
    assert preempts(guarded(str(-(2**31)), "-1"))  # valid and lowest: every preemptor is above


def test_default_preemption_ignores_toleration() -> None:
    config = default_config()
    config.profiles[0].plugins["postFilter"] = [("DefaultPreemption", 0)]
    objects = Objects(
        nodes=[node("n1")],
        priority_classes=classes(guarded(seconds="-1")),
        pods=[pod("victim", 4000, on="n1", klass="guarded"), pod("p", 4000, klass="high")],
    )
    assert [e.pod for e in run(objects, config, NOW).evictions] == ["default/victim"]


# ---- eligibility ---------------------------------------------------------------------------


def test_never_preemptor_does_not_preempt() -> None:
    result = schedule(
        node("n1"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        pod("victim", 4000, on="n1", klass="low"),
        pod("p", 4000, klass="high", policy="Never"),
    )
    assert result.evictions == []
    assert result.unschedulable["default/p"].endswith(
        "preemption: not eligible due to preemptionPolicy=Never."
    )


def test_never_from_the_class_counts_too() -> None:
    result = schedule(
        node("n1"),
        priority_class("high", 9000, policy="Never"),
        priority_class("low", 8000),
        pod("victim", 4000, on="n1", klass="low"),
        pod("p", 4000, klass="high"),
    )
    assert result.evictions == []


def test_nominated_pod_waits_for_its_terminating_victims() -> None:
    state = state_of(
        node("n1"),
        node("n2"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        pod("v1", 4000, on="n1", klass="low"),
        pod("v2", 4000, on="n2", klass="low"),
        pod("p", 4000, klass="high"),
    )
    scheduler = Scheduler(state, default_config())
    first = scheduler.schedule_pass(NOW)
    assert [d.pod for d in first if isinstance(d, Evict)] == ["default/v1"]
    scheduler.queue.flush()
    second = scheduler.schedule_pass(NOW + timedelta(seconds=1))  # v1 is still terminating
    assert not any(isinstance(d, Evict) for d in second)
    assert (
        "not eligible due to a terminating pod on the nominated node"
        in scheduler.messages["default/p"]
    )
    assert state.nominations["default/p"] == state.nodes.row_of["n1"]


def test_daemonset_pod_is_left_to_daemonset_preemption() -> None:
    ds_pod = pod("ds", 4000, klass="high")
    ds_pod.owner_references = (OwnerReference("DaemonSet", "agent", "u1", True),)
    ds_pod.node_name = ""
    ds_pod.required_terms = (NodeSelectorTerm((), (Requirement("metadata.name", "In", ("n1",)),)),)
    result = schedule(
        node("n1"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        pod("victim", 4000, on="n1", klass="low"),
        ds_pod,
    )
    assert result.evictions == []


# ---- victims -------------------------------------------------------------------------------


def test_only_strictly_lower_priority_pods_are_victims() -> None:
    result = schedule(
        node("n1"),
        priority_class("high", 9000),
        pod("peer", 4000, on="n1", klass="high"),
        pod("p", 4000, klass="high"),
    )
    assert result.evictions == []
    assert "1 No preemption victims found" in result.unschedulable["default/p"]


def test_terminating_pods_are_not_taken_again_and_their_room_counts() -> None:
    result = schedule(
        node("n1"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        pod("leaving", 2000, on="n1", klass="low", terminating=True),
        pod("staying", 2000, on="n1", klass="low"),
        pod("p", 3000, klass="high"),
    )
    assert evicted(result) == {"default/staying": "n1"}


def test_node_fitting_with_terminating_room_alone_needs_no_victims() -> None:
    state = state_of(
        node("n1"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        pod("leaving", 4000, on="n1", klass="low", terminating=True),
        pod("p", 4000, klass="high"),
    )
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    assert not any(isinstance(d, Evict) for d in decisions)
    assert Nominate("default/p", "n1") in decisions


def test_missing_victim_class_skips_the_node() -> None:
    result = schedule(
        node("n1"),
        node("n2"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        pod("orphan", 4000, on="n1", klass="gone", priority=10),
        pod("plain", 4000, on="n2", klass="low"),
        pod("p", 4000, klass="high"),
    )
    assert evicted(result) == {"default/plain": "n2"}
    alone = schedule(
        node("n1"),
        priority_class("high", 9000),
        pod("orphan", 4000, on="n1", klass="gone", priority=10),
        pod("p", 4000, klass="high"),
    )
    assert "1 victims' PriorityClass not found (gone)" in alone.unschedulable["default/p"]


def test_lower_priority_nominations_on_the_chosen_node_are_cleared() -> None:
    waiting = pod("waiting", 4000, klass="mid")
    waiting.nominated_node_name = "n1"
    state = state_of(
        node("n1"),
        priority_class("high", 9000),
        priority_class("mid", 8500),
        priority_class("low", 8000),
        pod("victim", 4000, on="n1", klass="low"),
        waiting,
        pod("p", 4000, klass="high"),
    )
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    assert Nominate("default/waiting", None) in decisions
    assert Nominate("default/p", "n1") in decisions
    assert state.nominations.get("default/waiting") is None


def test_evict_decision_names_the_preemptor() -> None:
    result = schedule(
        node("n1"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        pod("victim", 4000, on="n1", klass="low"),
        pod("p", 4000, klass="high"),
    )
    (evict,) = result.evictions
    assert (evict.pod, evict.node, evict.preemptor) == ("default/victim", "n1", "default/p")
    assert "default/p" in evict.reason
    assert bound(result) == {"default/p": "n1"}


# ---- messages ------------------------------------------------------------------------------


def test_message_names_tolerating_classes_and_when_protection_ends() -> None:
    result = schedule(
        node("n1"),
        node("n2"),
        node("n3", cpu=1000),
        *classes(guarded(seconds="600")),
        priority_class("forever", 8000, "10000", "-1"),
        pod("a", 4000, on="n1", klass="guarded", scheduled=timedelta(minutes=2)),
        pod("b", 4000, on="n2", klass="forever"),
        pod("p", 4000, klass="high"),
    )
    message = result.unschedulable["default/p"]
    assert message.endswith(
        "preemption: 0/3 nodes are available: 1 No preemption victims found, "
        "1 victims tolerate preemption (forever), "
        "1 victims tolerate preemption (guarded, until 2026-11-22T10:08:00Z)."
    )


def test_unresolvable_nodes_are_not_helpful() -> None:
    cordoned = node("n1")
    cordoned.unschedulable = True
    result = schedule(cordoned, priority_class("high", 9000), pod("p", 1000, klass="high"))
    assert result.unschedulable["default/p"] == (
        "0/1 nodes are available: 1 node(s) were unschedulable. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


# ---- args ----------------------------------------------------------------------------------


@pytest.mark.parametrize("plugin", [DefaultPreemption, PreemptionToleration])
def test_args_defaults_and_validation(plugin: type[DefaultPreemption]) -> None:
    made = plugin()
    assert (made.min_candidate_nodes_percentage, made.min_candidate_nodes_absolute) == (10, 100)
    assert plugin({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1})
    for bad in (
        {"minCandidateNodesPercentage": 101},
        {"minCandidateNodesPercentage": -1},
        {"minCandidateNodesAbsolute": -1},
        {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
        {"minCandidateNodes": 5},
        {"minCandidateNodesAbsolute": True},
    ):
        with pytest.raises(ConfigError, match=plugin.name):
            plugin(bad)


def test_kept_results_follow_the_clock_past_a_toleration() -> None:
    state = state_of(
        node("n1"),
        *classes(guarded(seconds="600")),
        pod("victim", 4000, on="n1", klass="guarded", scheduled=timedelta(minutes=5)),
        pod("p", 4000, klass="high"),
    )
    scheduler = Scheduler(state, default_config())
    assert not any(isinstance(d, Evict) for d in scheduler.schedule_pass(NOW))
    assert "until 2026-11-22T10:05:00Z" in scheduler.messages["default/p"]
    scheduler.queue.flush()
    later = scheduler.schedule_pass(NOW + timedelta(minutes=5))
    assert [d.pod for d in later if isinstance(d, Evict)] == ["default/victim"]


def test_kept_results_follow_a_pod_swapped_for_one_of_the_same_size() -> None:
    state = state_of(
        node("n1"),
        *classes(guarded(seconds="-1")),
        pod("small", 100, on="n1", klass="low"),
        pod("victim", 3900, on="n1", klass="guarded"),
        pod("p", 4000, klass="high"),
    )
    scheduler = Scheduler(state, default_config())
    assert not any(isinstance(d, Evict) for d in scheduler.schedule_pass(NOW))
    state.upsert_pod(pod("victim", 3900, on="n1", klass="low"))  # same size, now takeable
    scheduler.queue.flush()
    taken = {d.pod for d in scheduler.schedule_pass(NOW) if isinstance(d, Evict)}
    assert taken == {"default/small", "default/victim"}


@pytest.mark.parametrize(
    ("post_filter", "holds"), [("PreemptionToleration", 2), ("DefaultPreemption", None)]
)
def test_a_search_says_until_when_the_clock_leaves_its_answer_alone(
    post_filter: str, holds: int | None
) -> None:
    """The first end of a time-limited toleration of the preemptor, on any node (forever and
    higher-priority pods aside); DefaultPreemption reads no toleration, so never."""
    state = state_of(
        node("n1"),
        node("n2"),
        *classes(guarded(seconds="600")),
        priority_class("forever", 8000, "10000", "-1"),
        pod("a", 3000, on="n1", klass="guarded", scheduled=timedelta(minutes=5)),
        pod("b", 3000, on="n2", klass="guarded", scheduled=timedelta(minutes=8)),
        pod("c", 1000, on="n2", klass="forever"),
        pod("d", 1000, on="n1", klass="system-critical", scheduled=timedelta(minutes=9)),
        pod("p", 4000, klass="high"),
    )
    config = default_config()
    config.profiles[0].plugins["postFilter"] = [(post_filter, 0)]
    framework = Scheduler(state, config).default_framework
    preemptor = state.pods.by_key["default/p"]
    cycle = Cycle(state, preemptor, NOW, state.pods.demand(preemptor), state.free_for(preemptor))
    diagnosis = framework.place(cycle)
    assert isinstance(diagnosis, Diagnosis)
    result = framework.post_filter(cycle, diagnosis)
    if holds is None:
        assert result.decisions and cycle.holds_until == float("inf")
    else:
        assert not result.decisions
        assert cycle.holds_until == (NOW + timedelta(minutes=holds)).timestamp()
