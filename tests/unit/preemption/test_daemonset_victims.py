"""DaemonSetPreemption: args validation, victim rules, and invariants of victim selection."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.cli import main
from batchsched.config import parse_config
from batchsched.decisions import Warn
from batchsched.framework.interface import Cycle
from batchsched.objects.records import (
    Node,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodCondition,
    PriorityClass,
    Requirement,
)
from batchsched.plugins.args import ConfigError
from batchsched.plugins.daemonsetpreemption.plugin import DaemonSetPreemption, read_args
from batchsched.plugins.nodeaffinity.plugin import NodeAffinity
from batchsched.preemption.daemonset_victims import (
    VictimChooser,
    VictimSettings,
    deviation_percent,
    victim_class,
    victim_order,
)
from batchsched.state.cluster import ClusterState
from batchsched.state.queue import SchedulingQueue
from tests.paths import ROOT

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
OPT_OUT = {"yunikorn.apache.org/allow-preemption": "false"}
DS_OWNER = (OwnerReference("DaemonSet", "agent", "uid", True),)


# ---- args ----------------------------------------------------------------------------------


def test_defaults() -> None:
    delay, settings_ = read_args(None)
    assert delay == 30
    assert settings_ == VictimSettings(("single", "multiple"), 10, 5)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            {"preemptionStartDelaySeconds": -1},
            "args.preemptionStartDelaySeconds: must be at least 0",
        ),
        ({"victimSelectionStrategy": []}, "args.victimSelectionStrategy: must name at least one"),
        (
            {"victimSelectionStrategy": ["single", "all"]},
            "args.victimSelectionStrategy[1]: 'all' is not one of single, multiple",
        ),
        (
            {"victimSelectionStrategy": ["single", "single"]},
            "args.victimSelectionStrategy: names a strategy twice",
        ),
        ({"victimSelectionStrategy": "single"}, "must be of type list"),
        (
            {"singleVictimDeviationPercent": 101},
            "args.singleVictimDeviationPercent: must be between 0 and 100, got 101",
        ),
        ({"maxVictims": 0}, "args.maxVictims: must be at least 1, got 0"),
        ({"maxVictims": True}, "args.maxVictims: must be an integer"),
        ({"victims": 3}, "args.victims: unknown argument"),
    ],
)
def test_bad_args_are_named(args: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match="pluginConfig DaemonSetPreemption") as info:
        read_args(args)
    assert error in str(info.value)


def test_bad_args_on_the_command_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        "- pluginConfig:\n"
        "  - name: DaemonSetPreemption\n"
        "    args: {maxVictims: 0}\n"
    )
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    assert main(["schedule", str(cluster), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "profiles[0].pluginConfig[0].args.maxVictims: must be at least 1, got 0" in err


def test_enabled_in_the_default_profile() -> None:
    profile = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1"}).profiles[0]
    for point in ("preFilter", "filter", "postFilter"):
        assert "DaemonSetPreemption" in [name for name, _ in profile.plugins[point]]


# ---- victim rules --------------------------------------------------------------------------


def pod(name: str, cpu: int, memory: int, **kw: Any) -> Pod:
    return Pod(
        namespace="default", name=name, requests={"cpu": cpu, "memory": memory, "pods": 1}, **kw
    )


def test_deviation_is_the_worst_resource_and_unbounded_for_extra_resources() -> None:
    agent = pod("agent", 500, 1000)
    assert deviation_percent(pod("a", 500, 1000), agent) == 0
    assert deviation_percent(pod("a", 550, 900), agent) == 10
    gpu = pod("g", 500, 1000)
    gpu.requests["nvidia.com/gpu"] = 1
    assert deviation_percent(gpu, agent) == float("inf")


def test_classes() -> None:
    state = ClusterState()
    state.upsert_priority_class(PriorityClass("keep", 0, annotations=OPT_OUT))
    driver = pod("driver", 1, 1)
    executor = pod("exec", 1, 1, owner_references=(OwnerReference("Pod", "driver", "", False),))
    state.upsert_pod(driver)
    state.upsert_pod(executor)
    assert victim_class(state, driver) == 1
    assert victim_class(state, executor) == 0
    assert victim_class(state, pod("l", 1, 1, labels=OPT_OUT)) == 2
    assert victim_class(state, pod("a", 1, 1, annotations=OPT_OUT)) == 2
    assert victim_class(state, pod("c", 1, 1, priority_class_name="keep")) == 2
    # An owner that also opts out is in the most protective class.
    state.upsert_pod(pod("driver", 1, 1, labels=OPT_OUT))
    assert victim_class(state, state.pods.by_key["default/driver"]) == 2
    state.remove_pod("default/exec")
    assert not state.pods.is_owner(state.pods.by_key["default/driver"])


def test_order_lower_priority_then_younger_then_larger() -> None:
    agent = pod("agent", 500, 1000)
    room = {"cpu": 4000, "memory": 8000}
    old = NOW - timedelta(hours=1)
    pods = [
        pod("p1-young", 100, 100, priority=1, start_time=NOW),
        pod("p0-old-large", 900, 900, priority=0, start_time=old),
        pod("p0-old-small", 100, 100, priority=0, start_time=old),
        pod("p0-young", 100, 100, priority=0, start_time=NOW),
    ]
    ordered = sorted(pods, key=lambda p: victim_order(p, agent, room))
    assert [p.name for p in ordered] == ["p0-young", "p0-old-large", "p0-old-small", "p1-young"]


def test_a_choice_says_when_a_toleration_that_protected_a_pod_ends() -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {"cpu": 1000, "memory": 1000, "pods": 10}))
    state.upsert_priority_class(
        PriorityClass(
            "tolerant",
            0,
            annotations={
                "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "200",
                "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "600",
            },
        )
    )
    scheduled = (PodCondition("PodScheduled", "True", NOW - timedelta(minutes=1)),)
    victim = pod("v", 1000, 1000, node_name="n1", priority_class_name="tolerant")
    victim.conditions = scheduled
    state.upsert_pod(victim)
    agent = pod("agent", 1000, 1000, priority=100, owner_references=DS_OWNER)
    chooser = VictimChooser(VictimSettings())
    room = {"cpu": 0, "memory": 0, "pods": 9}
    now = chooser.choose(state, agent, [victim], {"cpu": 1000, "memory": 1000}, room, NOW)
    assert now.victims == []
    assert now.protection_ends == (NOW + timedelta(minutes=9)).timestamp()
    later = NOW + timedelta(minutes=9)
    then = chooser.choose(state, agent, [victim], {"cpu": 1000, "memory": 1000}, room, later)
    assert [p.name for p in then.victims] == ["v"]


def test_unparsable_toleration_policy_is_reported_once_and_grants_nothing() -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {"cpu": 1000, "memory": 1000, "pods": 10}))
    state.upsert_priority_class(
        PriorityClass(
            "broken",
            0,
            annotations={"preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "1h"},
        )
    )
    victim = pod("v", 1000, 1000, node_name="n1", priority_class_name="broken")
    state.upsert_pod(victim)
    agent = pod("agent", 1000, 1000, priority=100, owner_references=DS_OWNER)
    chooser = VictimChooser(VictimSettings())
    room = {"cpu": 0, "memory": 0, "pods": 9}
    first = chooser.choose(state, agent, [victim], {"cpu": 1000, "memory": 1000}, room, NOW)
    assert [p.name for p in first.victims] == ["v"]
    assert first.warnings == [
        Warn(
            "PriorityClass broken",
            "preemption-toleration.scheduling.x-k8s.io/"
            "toleration-seconds: '1h' is not a base-10 integer",
        )
    ]
    again = chooser.choose(state, agent, [victim], {"cpu": 1000, "memory": 1000}, room, NOW)
    assert again.warnings == []


def test_victim_with_missing_priority_class_is_kept() -> None:
    state = ClusterState()
    victim = pod("v", 1000, 1000, priority=0, priority_class_name="gone")
    agent = pod("agent", 1000, 1000, priority=100, owner_references=DS_OWNER)
    selection = VictimChooser(VictimSettings()).choose(
        state, agent, [victim], {"cpu": 1000, "memory": 1000}, {"pods": 9}, NOW
    )
    assert selection.victims == []
    assert "1 pod(s) whose PriorityClass is missing (gone)" in selection.why_none
    assert selection.warnings == [
        Warn("Pod default/v", "PriorityClass gone not found: not a preemption victim")
    ]


# ---- invariants ----------------------------------------------------------------------------

victim_specs = st.lists(
    st.tuples(
        st.integers(1, 8).map(lambda n: n * 250),  # cpu
        st.integers(1, 8).map(lambda n: n * 512),  # memory
        st.integers(0, 3),  # priority
        st.sampled_from(["regular", "opt-out", "daemonset", "exempt"]),
        st.integers(0, 100),  # minutes since start
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    specs=victim_specs,
    agent_cpu=st.integers(1, 8).map(lambda n: n * 250),
    strategies=st.sampled_from(
        [("single",), ("multiple",), ("single", "multiple"), ("multiple", "single")]
    ),
    max_victims=st.integers(1, 4),
    deviation=st.integers(0, 100),
)
def test_victims_are_eligible_sufficient_and_bounded(
    specs: list[tuple[int, int, int, str, int]],
    agent_cpu: int,
    strategies: tuple[str, ...],
    max_victims: int,
    deviation: int,
) -> None:
    state = ClusterState()
    state.upsert_priority_class(
        PriorityClass(
            "tolerant",
            0,
            annotations={
                "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "99",
                "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "-1",
            },
        )
    )
    capacity = {"cpu": 4000, "memory": 8192, "pods": 110}
    state.upsert_node(Node("n1", capacity))
    pods = []
    for i, (cpu, memory, priority, kind, minutes) in enumerate(specs):
        p = pod(
            f"p{i}",
            cpu,
            memory,
            node_name="n1",
            priority=priority,
            start_time=NOW - timedelta(minutes=minutes),
            labels=OPT_OUT if kind == "opt-out" else {},
            owner_references=DS_OWNER if kind == "daemonset" else (),
            priority_class_name="tolerant" if kind == "exempt" else "",
        )
        pods.append(p)
    agent = pod("agent", agent_cpu, 1024, priority=2, owner_references=DS_OWNER)
    room = {"cpu": 500, "memory": 512, "pods": 100}
    chooser = VictimChooser(VictimSettings(strategies, deviation, max_victims))
    selection = chooser.choose(state, agent, pods, capacity, room, NOW)
    if not selection.victims:
        assert selection.why_none
        return
    assert len(selection.victims) <= max_victims
    assert len({v.key for v in selection.victims}) == len(selection.victims)
    for victim in selection.victims:
        assert victim.priority is not None and victim.priority <= 2
        assert not victim.owner_references  # never a DaemonSet pod
        assert victim.priority_class_name != "tolerant"
    freed = {r: room.get(r, 0) + sum(v.requests.get(r, 0) for v in selection.victims) for r in room}
    assert all(freed[r] >= a for r, a in agent.requests.items())
    # Nothing chosen is superfluous.
    for victim in selection.victims:
        rest = [v for v in selection.victims if v is not victim]
        left = {r: room.get(r, 0) + sum(v.requests.get(r, 0) for v in rest) for r in room}
        assert not all(left[r] >= a for r, a in agent.requests.items())


# ---- the example ---------------------------------------------------------------------------

EXAMPLE = ROOT / "examples" / "daemonset"


def test_example_rollout(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "schedule",
        str(EXAMPLE / "cluster.yaml"),
        "--now",
        "2026-11-22T10:00:00Z",
        "-o",
        "json",
    ]
    assert main([*args, "--config", str(EXAMPLE / "config.yaml")]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert {e["pod"]: e["preemptor"] for e in out["evictions"]} == {
        "batch/cache-0": "logging/fluentd-worker-1",
        "spark/pi-exec-2": "logging/fluentd-worker-2",
        "db/postgres-0": "logging/fluentd-worker-3",
    }
    assert sorted(b["pod"] for b in out["bindings"]) == [
        f"logging/fluentd-worker-{i}" for i in range(1, 5)
    ]
    assert out["reservations"] == [
        {
            "kind": "DaemonSet",
            "holder": "Pod logging/fluentd-worker-5",
            "nodes": ["worker-5"],
            "node": "worker-5",
            "pod": "logging/fluentd-worker-5",
            "since": "2026-11-22T10:00:00Z",
        }
    ]
    # With the default 30 s delay one-shot time never reaches it: only reservations.
    assert main(args) == 0
    default = orjson.loads(capsys.readouterr().out)
    assert default["evictions"] == []
    assert [r["node"] for r in default["reservations"]] == [f"worker-{i}" for i in (1, 2, 3, 5)]


# ---- queue wake-ups ------------------------------------------------------------------------


def test_queue_wake_up_retries_an_unschedulable_pod_once_due() -> None:
    queue = SchedulingQueue()
    queue.add(pod("p", 1, 1), 0.0)
    entry = queue.pop()
    assert entry is not None
    queue.mark_unschedulable("default/p", 100.0, generation=1)
    queue.wake_at("default/p", 130.0)
    assert queue.next_wakeup() == 130.0
    queue.refresh(129.0, generation=1)
    assert queue.pop() is None
    queue.refresh(130.0, generation=1)
    assert queue.pop() is not None
    # A wake-up set before the pod failed again is void.
    queue.mark_unschedulable("default/p", 131.0, generation=1)
    queue.wake_at("default/p", 140.0)
    queue.mark_unschedulable("default/p", 135.0, generation=1)
    assert queue.next_wakeup() is None
    queue.refresh(150.0, generation=1)
    assert queue.pop() is None


# ---- the one-node NodeAffinity check agrees with the all-node one --------------------------

requirements = st.one_of(
    st.builds(
        Requirement,
        key=st.sampled_from(["zone", "tier"]),
        operator=st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        values=st.lists(st.sampled_from(["a", "b", "1", "5"]), min_size=1, max_size=2).map(tuple),
    ),
    st.builds(  # as the manifest reader allows them: one integer
        Requirement,
        key=st.sampled_from(["zone", "tier"]),
        operator=st.sampled_from(["Gt", "Lt"]),
        values=st.sampled_from(["0", "3"]).map(lambda v: (v,)),
    ),
)
name_fields = st.builds(
    Requirement,
    key=st.just("metadata.name"),
    operator=st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt"]),
    values=st.lists(st.sampled_from(["n0", "n1", "n9"]), min_size=1, max_size=2).map(tuple),
)
terms = st.builds(
    NodeSelectorTerm,
    match_expressions=st.lists(requirements, max_size=2).map(tuple),
    match_fields=st.lists(name_fields, max_size=2).map(tuple),
)
labels = st.dictionaries(st.sampled_from(["zone", "tier"]), st.sampled_from(["a", "b", "1", "5"]))


@settings(max_examples=200, deadline=None)
@given(
    node_labels=st.lists(labels, min_size=1, max_size=3),
    selector=labels,
    required=st.lists(terms, max_size=2).map(tuple),
)
def test_node_affinity_one_row_matches_all_rows(
    node_labels: list[dict[str, str]],
    selector: dict[str, str],
    required: tuple[NodeSelectorTerm, ...],
) -> None:
    state = ClusterState()
    for i, node_labels_i in enumerate(node_labels):
        state.upsert_node(Node(f"n{i}", {"cpu": 1000}, labels=node_labels_i))
    subject = Pod("default", "p", node_selector=selector, required_terms=required)
    rejected = np.zeros(state.nodes.rows, dtype=np.bool_)
    for rejection in NodeAffinity().evaluate(state, subject):
        rejected |= rejection.nodes
    for row in range(state.nodes.rows):
        assert NodeAffinity().passes_row(state, subject, row) == (not rejected[row])


def test_pre_filter_giving_a_reserved_node_its_room_back_says_the_room_changed() -> None:
    """The pre-filter gives the pod's reserved node its room back on the cycle's adjusted
    copy: that room is no longer `free_for` the pod as made (`Cycle.own_room`), so kept
    results must compare it over every row rather than follow the log alone."""
    state = ClusterState()
    for name in ("n0", "n1"):
        state.upsert_node(Node(name, {"cpu": 4000, "memory": 4096, "pods": 110}))
    state.upsert_pod(pod("holder", 1000, 1, priority=1000))
    state.nominate("default/holder", "n1")  # other pods see n1's room adjusted for it
    on_n1 = NodeSelectorTerm((), (Requirement("metadata.name", "In", ("n1",)),))
    agent = pod("agent", 1000, 1, priority=100, owner_references=DS_OWNER, required_terms=(on_n1,))
    state.upsert_pod(agent)
    state.reserve("n1", agent.key, NOW)
    c = Cycle(state, agent, NOW, state.pods.demand(agent), state.free_for(agent), own_room=True)
    assert not state.nodes.is_shared_free(c.free)
    DaemonSetPreemption().pre_filter(c)
    assert c.free[1].tolist() == state.nodes.free[1].tolist()
    assert not c.own_room
