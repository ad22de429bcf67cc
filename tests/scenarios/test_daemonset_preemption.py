"""DaemonSet preemption scenarios (docs/daemonset.md): manifests in, decisions out.

Each scenario is one 4-CPU / 8Gi node (plus spare nodes where a test needs them) filled with
running pods, and a DaemonSet pod pinned to it with required node affinity on `metadata.name`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from batchsched.commands.schedule import OneShotResult, build_state, run
from batchsched.config import SchedulerConfig, parse_config
from batchsched.decisions import Bind, Evict, Reserve
from batchsched.objects.load import Objects
from batchsched.scheduling.scheduler import Scheduler
from tests import builders
from tests.builders import Manifest, priority_class
from tests.conftest import NOW, objects_of


def node(name: str, cpu: str = "4", memory: str = "8Gi") -> Manifest:
    return builders.node(name, cpu=cpu, memory=memory)


def running(
    name: str,
    on: str,
    cpu: str,
    memory: str,
    priority: int = 0,
    minutes_ago: int = 60,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **metadata: Any,
) -> Manifest:
    started = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod = builders.pod(
        name,
        cpu,
        memory,
        node_name=on,
        priority=priority,
        labels=labels,
        annotations=annotations,
        created=started,
        scheduled_at=started,
    )
    pod["metadata"].update(metadata)
    return pod


def daemon(
    name: str, on: str, cpu: str = "500m", memory: str = "1Gi", priority: int = 1000
) -> Manifest:
    """A DaemonSet pod as the DaemonSet controller makes it: pinned by `metadata.name`."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [on]}]}
    pod = builders.pod(
        name,
        cpu,
        memory,
        priority=priority,
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        },
    )
    pod["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent", "uid": "a"}]
    return pod


def pending(name: str, cpu: str, memory: str, priority: int = 0) -> Manifest:
    return builders.pod(name, cpu, memory, priority=priority)


def objects(*manifests: Manifest) -> Objects:
    return objects_of(*manifests)


def config(**args: Any) -> SchedulerConfig:
    plugin_args = {"preemptionStartDelaySeconds": 0, **args}
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "pluginConfig": [{"name": "DaemonSetPreemption", "args": plugin_args}],
                }
            ],
        }
    )


def schedule(*manifests: Manifest, **args: Any) -> OneShotResult:
    return run(objects(*manifests), config(**args), NOW)


def evicted(result: OneShotResult) -> list[str]:
    return sorted(e.pod.removeprefix("default/") for e in result.evictions)


def bound(result: OneShotResult) -> dict[str, str]:
    return {b.pod.removeprefix("default/"): b.node for b in result.bindings}


def message(result: OneShotResult, pod: str) -> str:
    return result.unschedulable[f"default/{pod}"]


# ---- strategies ----------------------------------------------------------------------------


def test_single_victim_within_deviation_is_chosen_over_several_smaller_pods() -> None:
    manifests = (
        node("n1"),
        running("big", "n1", "2", "4Gi", minutes_ago=90),
        running("small-1", "n1", "250m", "512Mi", minutes_ago=1),
        running("small-2", "n1", "250m", "512Mi", minutes_ago=1),
        running("match", "n1", "520m", "1Gi", minutes_ago=120),  # 4% off the agent's CPU
        running("rest", "n1", "980m", "2Gi", minutes_ago=200),
        daemon("agent-n1", "n1"),
    )
    result = schedule(*manifests)
    assert evicted(result) == ["match"]
    assert bound(result) == {"agent-n1": "n1"}
    assert [e.preemptor for e in result.evictions] == ["default/agent-n1"]
    assert result.evictions[0].reason == (
        "DaemonSetPreemption: preempted by DaemonSet pod default/agent-n1 (priority 1000) "
        "to make room on node n1"
    )
    # `multiple` alone walks the youngest first and would disturb two pods instead.
    assert evicted(schedule(*manifests, victimSelectionStrategy=["multiple"])) == [
        "small-1",
        "small-2",
    ]


def test_single_prefers_the_closest_request_over_victim_order() -> None:
    result = schedule(
        node("n1"),
        running("near", "n1", "520m", "1Gi", minutes_ago=300),  # 4% off, oldest
        running("far", "n1", "540m", "1Gi", minutes_ago=1),  # 8% off, youngest
        running("rest", "n1", "2940m", "6Gi", priority=5),
        daemon("agent-n1", "n1"),
    )
    assert evicted(result) == ["near"]


def test_fallback_to_multiple_takes_pods_in_order_and_reprieves_the_rest() -> None:
    result = schedule(
        node("n1"),
        running("old-1", "n1", "1", "2Gi", minutes_ago=300),
        running("old-2", "n1", "1", "2Gi", minutes_ago=200),
        running("young-1", "n1", "250m", "512Mi", minutes_ago=5),
        running("young-2", "n1", "250m", "512Mi", minutes_ago=4),
        running("mid", "n1", "1500m", "3Gi", minutes_ago=100),
        daemon("agent-n1", "n1"),
    )
    # No pod is within 10% of 500m/1Gi; youngest first: young-2 then young-1 make room.
    assert evicted(result) == ["young-1", "young-2"]
    assert bound(result) == {"agent-n1": "n1"}


def test_multiple_walks_lower_priority_first_and_larger_first_among_equals() -> None:
    result = schedule(
        node("n1"),
        running("p0-small", "n1", "250m", "512Mi", minutes_ago=60),
        running("p0-large", "n1", "750m", "1536Mi", minutes_ago=60),
        running("p1", "n1", "3", "6Gi", priority=1, minutes_ago=1),
        daemon("agent-n1", "n1"),
    )
    # p0-large (same age, larger) goes first and is enough: p0-small is not touched.
    assert evicted(result) == ["p0-large"]


def test_only_single_configured_gives_up_without_a_close_pod() -> None:
    result = schedule(
        node("n1"),
        running("a", "n1", "2", "4Gi"),
        running("b", "n1", "2", "4Gi"),
        daemon("agent-n1", "n1"),
        victimSelectionStrategy=["single"],
    )
    assert evicted(result) == []
    assert "no single pod within 10% of this pod's request" in message(result, "agent-n1")


def test_multiple_before_single_when_so_configured() -> None:
    manifests = (
        node("n1"),
        running("exact", "n1", "500m", "1Gi", minutes_ago=300),
        running("young", "n1", "3500m", "7Gi", minutes_ago=1),
        daemon("agent-n1", "n1"),
    )
    assert evicted(schedule(*manifests)) == ["exact"]
    assert evicted(schedule(*manifests, victimSelectionStrategy=["multiple", "single"])) == [
        "young"
    ]


def test_max_victims_limits_multiple() -> None:
    pods = [running(f"tiny-{i}", "n1", "500m", "1Gi", minutes_ago=i + 1) for i in range(8)]
    manifests = (node("n1"), *pods, daemon("agent-n1", "n1", cpu="1500m", memory="3Gi"))
    result = schedule(*manifests, maxVictims=2)
    assert evicted(result) == []
    assert "making room needs 3 victims, more than maxVictims (2)" in message(result, "agent-n1")
    assert evicted(schedule(*manifests, maxVictims=3)) == ["tiny-0", "tiny-1", "tiny-2"]


def test_deviation_percent_is_configurable() -> None:
    manifests = (
        node("n1"),
        running("near", "n1", "600m", "1200Mi", minutes_ago=300),  # 20% off
        running("young", "n1", "3400m", "6992Mi", minutes_ago=1),
        daemon("agent-n1", "n1"),
    )
    assert evicted(schedule(*manifests)) == ["young"]
    assert evicted(schedule(*manifests, singleVictimDeviationPercent=20)) == ["near"]


# ---- classes -------------------------------------------------------------------------------


def test_owner_pods_only_after_regular_ones() -> None:
    owner_ref = {"kind": "Pod", "name": "driver", "uid": "driver-uid"}
    result = schedule(
        node("n1"),
        node("n2"),
        running("driver", "n1", "500m", "1Gi", minutes_ago=1),
        running("exec-1", "n1", "1", "2Gi", minutes_ago=30, ownerReferences=[owner_ref]),
        running("exec-2", "n1", "1", "2Gi", minutes_ago=20, ownerReferences=[owner_ref]),
        running("other", "n1", "1500m", "3Gi", priority=5, minutes_ago=10),
        running("exec-3", "n2", "1", "2Gi", ownerReferences=[owner_ref]),
        daemon("agent-n1", "n1"),
    )
    # The driver matches the agent exactly and is the youngest, but it is an owner pod: a
    # regular pod goes first (no regular pod is close enough for `single`, so `multiple`).
    assert evicted(result) == ["exec-2"]


def test_owner_pod_is_taken_when_regular_pods_cannot_make_room() -> None:
    owner_ref = {"kind": "Pod", "name": "driver", "uid": "driver-uid"}
    result = schedule(
        node("n1"),
        node("n2"),
        running("driver", "n1", "2", "4Gi"),
        running("high", "n1", "2", "4Gi", priority=5000),
        running("exec", "n2", "1", "2Gi", ownerReferences=[owner_ref]),
        daemon("agent-n1", "n1"),
    )
    assert evicted(result) == ["driver"]


@pytest.mark.parametrize("where", ["label", "annotation", "priority-class"])
def test_opt_out_pods_go_last(where: str) -> None:
    opt_out = {"yunikorn.apache.org/allow-preemption": "false"}
    meta: dict[str, Any] = {}
    extra: list[Manifest] = []
    if where == "label":
        meta = {"labels": opt_out}
    elif where == "annotation":
        meta = {"annotations": opt_out}
    protected = running("protected", "n1", "500m", "1Gi", minutes_ago=1, **meta)
    if where == "priority-class":
        extra = [priority_class("keep", 0, annotations=opt_out)]
        protected["spec"]["priorityClassName"] = "keep"
        del protected["spec"]["priority"]
    result = schedule(
        *extra,
        node("n1"),
        protected,
        running("regular", "n1", "3500m", "7Gi", minutes_ago=100),
        daemon("agent-n1", "n1"),
    )
    # `protected` matches exactly and is younger, but opt-out pods are the last class.
    assert evicted(result) == ["regular"]
    alone = schedule(
        *extra,
        node("n1"),
        protected,
        running("regular", "n1", "3500m", "7Gi", priority=2000),
        daemon("agent-n1", "n1"),
    )
    assert evicted(alone) == ["protected"]


def test_opt_out_annotation_true_is_regular() -> None:
    result = schedule(
        node("n1"),
        running(
            "optin", "n1", "500m", "1Gi", labels={"yunikorn.apache.org/allow-preemption": "true"}
        ),
        running("regular", "n1", "3500m", "7Gi", minutes_ago=100),
        daemon("agent-n1", "n1"),
    )
    assert evicted(result) == ["optin"]


# ---- protected pods ------------------------------------------------------------------------


def test_daemonset_and_higher_priority_pods_are_never_victims() -> None:
    other_ds = running(
        "exporter",
        "n1",
        "500m",
        "1Gi",
        minutes_ago=1,
        ownerReferences=[{"kind": "DaemonSet", "name": "exporter", "uid": "x"}],
    )
    result = schedule(
        node("n1"),
        other_ds,
        running("critical", "n1", "3500m", "7Gi", priority=1001),
        daemon("agent-n1", "n1", priority=1000),
    )
    assert evicted(result) == []
    text = message(result, "agent-n1")
    assert "no pod there may be evicted" in text
    assert "1 DaemonSet pod(s)" in text
    assert "1 pod(s) of higher priority than 1000" in text


def test_equal_priority_pods_may_be_victims() -> None:
    result = schedule(
        node("n1"),
        running("peer", "n1", "4", "8Gi", priority=1000),
        daemon("agent-n1", "n1", priority=1000),
    )
    assert evicted(result) == ["peer"]


def test_toleration_exempt_pods_are_never_victims() -> None:
    tolerant = priority_class(
        "tolerant",
        100,
        annotations={
            "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "5000",
            "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "-1",
        },
    )
    exempt = running("exempt", "n1", "500m", "1Gi", minutes_ago=1)
    exempt["spec"]["priorityClassName"] = "tolerant"
    del exempt["spec"]["priority"]
    result = schedule(
        tolerant,
        node("n1"),
        exempt,
        running("heavy", "n1", "3500m", "7Gi", priority=2000),
        daemon("agent-n1", "n1"),
    )
    assert evicted(result) == []
    assert "1 pod(s) tolerating preemption (tolerant)" in message(result, "agent-n1")


def test_not_enough_room_even_evicting_everything_eligible() -> None:
    result = schedule(
        node("n1"),
        running("low", "n1", "250m", "512Mi"),
        running("high", "n1", "3750m", "7680Mi", priority=9999),
        daemon("agent-n1", "n1"),
    )
    assert evicted(result) == []
    assert "evicting all 1 eligible pod(s) (1 regular) would not make enough room" in message(
        result, "agent-n1"
    )


def test_preemption_policy_never_reserves_but_does_not_evict() -> None:
    agent = daemon("agent-n1", "n1")
    agent["spec"]["preemptionPolicy"] = "Never"
    result = schedule(node("n1"), running("a", "n1", "4", "8Gi"), agent)
    assert evicted(result) == []
    assert [r.node for r in result.reservations.values()] == ["n1"]
    assert "preemptionPolicy Never" in message(result, "agent-n1")


def test_victims_already_terminating_are_waited_for() -> None:
    leaving = running("leaving", "n1", "1", "2Gi", deletionTimestamp="2026-11-22T09:59:00Z")
    result = schedule(
        node("n1"), leaving, running("stay", "n1", "3", "6Gi"), daemon("agent-n1", "n1")
    )
    assert evicted(result) == []
    assert "waiting for 1 pod(s) on node n1 to terminate" in message(result, "agent-n1")


# ---- reservation and delay -----------------------------------------------------------------


def test_only_daemonset_pods_are_handled() -> None:
    result = schedule(
        node("n1"), running("a", "n1", "4", "8Gi"), pending("plain", "1", "1Gi", priority=5000)
    )
    # General preemption (section 3) may act for it; DaemonSet preemption does not.
    assert not any("DaemonSet" in e.reason for e in result.evictions)
    assert result.reservations == {}


def test_delay_respected_across_passes() -> None:
    manifests = objects(node("n1"), running("a", "n1", "4", "8Gi"), daemon("agent-n1", "n1"))
    state = build_state(manifests)
    scheduler = Scheduler(state, config(preemptionStartDelaySeconds=30))
    first = scheduler.schedule_pass(NOW)
    assert [d for d in first if isinstance(d, Reserve)] == [Reserve("n1", "default/agent-n1", NOW)]
    assert not any(isinstance(d, Evict) for d in first)
    assert "victims are chosen from 2026-11-22T10:00:30Z" in scheduler.messages["default/agent-n1"]

    scheduler.queue.flush()
    early = scheduler.schedule_pass(NOW + timedelta(seconds=29))
    assert not any(isinstance(d, Evict | Reserve) for d in early)

    scheduler.queue.flush()
    late = scheduler.schedule_pass(NOW + timedelta(seconds=30))
    assert [d.pod for d in late if isinstance(d, Evict)] == ["default/a"]
    assert state.reservations.of("default/agent-n1") is not None  # since stays the first pass's
    assert state.reservations.of("default/agent-n1").since == NOW  # type: ignore[union-attr]

    state.remove_pod("default/a")
    scheduler.queue.flush()
    done = scheduler.schedule_pass(NOW + timedelta(seconds=31))
    assert done == [Bind("default/agent-n1", "n1")]
    assert state.reservations.by_row == {}


def test_default_delay_in_one_shot_only_reserves() -> None:
    result = run(
        objects(node("n1"), running("a", "n1", "4", "8Gi"), daemon("agent-n1", "n1")),
        parse_config(
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
        ),
        NOW,
    )
    assert evicted(result) == []
    assert result.to_json()["reservations"] == [
        {
            "kind": "DaemonSet",
            "holder": "Pod default/agent-n1",
            "nodes": ["n1"],
            "node": "n1",
            "pod": "default/agent-n1",
            "since": "2026-11-22T10:00:00Z",
        }
    ]


def test_reserved_node_takes_no_other_pod_even_of_higher_priority() -> None:
    manifests = objects(
        node("n1"),
        running("a", "n1", "3", "6Gi"),
        running("b", "n1", "1", "2Gi", minutes_ago=5),
        daemon("agent-n1", "n1", cpu="1", memory="2Gi"),
    )
    state = build_state(manifests)
    scheduler = Scheduler(state, config(preemptionStartDelaySeconds=60))
    scheduler.schedule_pass(NOW)
    assert state.reservations.of("default/agent-n1") is not None
    # Room frees up (b finishes) and a high-priority pod arrives before the agent retries.
    state.remove_pod("default/b")
    state.upsert_pod(objects(pending("urgent", "500m", "1Gi", priority=1_000_000)).pods[0])
    scheduler.queue.flush()
    decisions = scheduler.schedule_pass(NOW + timedelta(seconds=1))
    assert Bind("default/agent-n1", "n1") in decisions
    assert Bind("default/urgent", "n1") not in decisions
    assert "node(s) were reserved for a DaemonSet pod" in scheduler.messages["default/urgent"]
    # Once the agent is bound, the node is open again (and full).
    assert state.reservations.by_row == {}
    scheduler.queue.flush()
    scheduler.schedule_pass(NOW + timedelta(seconds=2))
    assert scheduler.messages["default/urgent"].startswith(
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    )


def test_reservation_released_when_pod_or_node_goes_away() -> None:
    manifests = objects(
        node("n1"),
        node("n2"),
        running("a", "n1", "4", "8Gi"),
        running("b", "n2", "4", "8Gi"),
        daemon("agent-n1", "n1"),
        daemon("agent-n2", "n2"),
    )
    state = build_state(manifests)
    scheduler = Scheduler(state, config(preemptionStartDelaySeconds=60))
    scheduler.schedule_pass(NOW)
    assert sorted(r.node for r in state.reservations.by_row.values()) == ["n1", "n2"]
    state.remove_pod("default/agent-n1")
    state.remove_node("n2")
    assert state.reservations.by_row == {}
    assert state.reservations.by_pod == {}


def test_second_daemonset_pod_on_a_reserved_node_waits_its_turn() -> None:
    second = daemon("other-agent-n1", "n1")
    result = schedule(
        node("n1"),
        running("a", "n1", "3", "6Gi"),
        running("b", "n1", "1", "2Gi"),
        daemon("agent-n1", "n1"),
        second,
    )
    # agent-n1 comes first by name, reserves n1 and evicts one pod; other-agent-n1 then fits
    # in what is left once agent-n1 is bound.
    assert sorted(bound(result)) == ["agent-n1", "other-agent-n1"]
    assert len(result.evictions) == 1


def test_nominations_of_other_pods_do_not_hold_room_on_a_reserved_node() -> None:
    manifests = objects(
        node("n1"),
        running("a", "n1", "3", "6Gi"),
        running("b", "n1", "1", "2Gi"),
        daemon("agent-n1", "n1", cpu="1", memory="2Gi"),
    )
    state = build_state(manifests)
    scheduler = Scheduler(state, config(preemptionStartDelaySeconds=60))
    scheduler.schedule_pass(NOW)
    # A higher-priority pod still nominated to n1 (e.g. from before the reservation).
    waiting = objects(pending("nominated", "1", "2Gi", priority=1_000_000)).pods[0]
    waiting.nominated_node_name = "n1"
    state.upsert_pod(waiting)
    state.remove_pod("default/b")
    scheduler.queue.flush()
    decisions = scheduler.schedule_pass(NOW + timedelta(seconds=1))
    assert Bind("default/agent-n1", "n1") in decisions
    assert Bind("default/nominated", "n1") not in decisions


def test_node_that_cannot_take_the_pod_is_not_reserved() -> None:
    tainted = node("n1")
    tainted["spec"] = {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}
    result = schedule(tainted, node("n2"), running("a", "n1", "4", "8Gi"), daemon("agent-n1", "n1"))
    assert evicted(result) == []
    assert result.reservations == {}
    assert message(result, "agent-n1") == (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {dedicated: db}. "
        "preemption: node n1 cannot take this pod whatever is removed."
    )


def test_daemonset_pod_binds_on_its_node_only() -> None:
    result = schedule(
        node("a-roomy"),
        node("n1", cpu="8"),
        running("x", "n1", "7", "1Gi"),
        daemon("agent-n1", "n1"),
    )
    assert bound(result) == {"agent-n1": "n1"}
    assert evicted(result) == []


def test_reserved_pod_is_retried_when_the_delay_is_over_without_other_changes() -> None:
    manifests = objects(node("n1"), running("a", "n1", "4", "8Gi"), daemon("agent-n1", "n1"))
    state = build_state(manifests)
    scheduler = Scheduler(state, config(preemptionStartDelaySeconds=30))
    scheduler.schedule_pass(NOW)
    assert scheduler.queue.next_wakeup() == (NOW + timedelta(seconds=30)).timestamp()
    # No flush, no cluster change: only the wake-up brings the pod back.
    assert scheduler.schedule_pass(NOW + timedelta(seconds=29)) == []
    late = scheduler.schedule_pass(NOW + timedelta(seconds=30))
    assert [d.pod for d in late if isinstance(d, Evict)] == ["default/a"]


def test_general_preemption_leaves_reserved_nodes_and_daemonset_pods_alone() -> None:
    manifests = (
        node("n1"),
        node("n2"),
        running("low-1", "n1", "4", "8Gi", minutes_ago=30),
        running("low-2", "n2", "4", "8Gi", minutes_ago=30),
        daemon("agent-n1", "n1", priority=10_000),
        pending("urgent", "1", "1Gi", priority=5000),
    )
    # Start delay 60 s: the agent only reserves n1 in this run.
    result = schedule(*manifests, preemptionStartDelaySeconds=60)
    assert [r.node for r in result.reservations.values()] == ["n1"]
    # The urgent pod preempts through section 3, and only on n2: n1 is reserved.
    assert {e.pod: (e.node, e.preemptor) for e in result.evictions} == {
        "default/low-2": ("n2", "default/urgent")
    }
    assert bound(result) == {"urgent": "n2"}
    assert "reserved for this pod" in message(result, "agent-n1")


# ---- gangs as victims (docs/gang.md applies to every preemption) -----------------------


# Every kind of group that is preempted whole: the CRD, and upstream's PodGroups whose
# disruptionMode is the group (v1alpha2 `PodGroup`, v1beta1 `{all: {}}`).
WHOLE = {
    "crd": None,
    "v1alpha2": {"disruptionMode": "PodGroup"},
    "v1beta1": {"disruptionMode": {"all": {}}},
}


def gang(kind: str, name: str, min_member: int, **spec: Any) -> Manifest:
    if kind == "crd":
        return builders.pod_group(name, min_member, namespace="default")
    extra = {**(WHOLE[kind] or {}), **spec}
    return builders.upstream_group(name, min_member, kind, namespace="default", **extra)


def gang_member(name: str, on: str, group: str, priority: int = 0, kind: str = "crd") -> Manifest:
    if kind == "crd":
        labels = {"scheduling.x-k8s.io/pod-group": group}
        return running(name, on, "3", "6Gi", priority=priority, labels=labels)
    pod = running(name, on, "3", "6Gi", priority=priority)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod


@pytest.mark.parametrize("kind", list(WHOLE))
def test_a_gang_member_victim_takes_its_whole_running_group_along(kind: str) -> None:
    result = schedule(
        node("n1"),
        node("n2"),
        gang(kind, "train", 2),
        gang_member("worker-0", "n1", "train", kind=kind),
        gang_member("worker-1", "n2", "train", kind=kind),
        daemon("agent-n1", "n1", cpu="2", memory="4Gi"),
        preemptionStartDelaySeconds=0,
    )
    assert evicted(result) == ["worker-0", "worker-1"]
    nodes = {e.pod: e.node for e in result.evictions}
    assert nodes == {"default/worker-0": "n1", "default/worker-1": "n2"}
    assert bound(result) == {"agent-n1": "n1"}


@pytest.mark.parametrize("mode", ["Pod", None])
def test_an_upstream_group_disrupted_pod_by_pod_loses_only_the_member_in_the_way(
    mode: str | None,
) -> None:
    spec = {} if mode is None else {"disruptionMode": mode}
    result = schedule(
        node("n1"),
        node("n2"),
        builders.upstream_group("train", 2, "v1alpha2", namespace="default", **spec),
        gang_member("worker-0", "n1", "train", kind="v1alpha2"),
        gang_member("worker-1", "n2", "train", kind="v1alpha2"),
        daemon("agent-n1", "n1", cpu="2", memory="4Gi"),
        preemptionStartDelaySeconds=0,
    )
    assert evicted(result) == ["worker-0"]
    assert bound(result) == {"agent-n1": "n1"}


@pytest.mark.parametrize("kind", list(WHOLE))
def test_a_gang_with_a_protected_member_elsewhere_is_not_touched(kind: str) -> None:
    result = schedule(
        node("n1"),
        node("n2"),
        gang(kind, "train", 2),
        gang_member("worker-0", "n1", "train", kind=kind),
        gang_member("worker-1", "n2", "train", priority=5000, kind=kind),
        daemon("agent-n1", "n1", cpu="2", memory="4Gi"),
        preemptionStartDelaySeconds=0,
    )
    assert evicted(result) == []
    assert "member(s) of a running PodGroup with protected members" in message(result, "agent-n1")


def _with_port(manifest: Manifest, port: int = 9100) -> Manifest:
    manifest["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return manifest


def test_a_host_port_clash_makes_its_holder_the_victim() -> None:
    # Room is plenty: only the port is in the way, so the holder goes, not the closer match.
    result = schedule(
        node("n1", cpu="8"),
        _with_port(running("holder", "n1", "2", "2Gi")),
        running("twin", "n1", "500m", "1Gi"),
        _with_port(daemon("agent-n1", "n1")),
    )
    assert evicted(result) == ["holder"]
    assert bound(result) == {"agent-n1": "n1"}


def test_a_port_held_by_a_protected_pod_evicts_nothing() -> None:
    result = schedule(
        node("n1", cpu="8"),
        _with_port(running("holder", "n1", "2", "2Gi", priority=5000)),
        running("twin", "n1", "500m", "1Gi"),
        _with_port(daemon("agent-n1", "n1")),
    )
    assert evicted(result) == []
    assert "would not make enough room" in result.unschedulable["default/agent-n1"]
