"""Backfill's rules, one per test: who reserves, where, and who may use reserved room."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.decisions import Bind
from batchsched.objects.errors import InputError
from batchsched.plugins.backfill.plugin import read_args
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod, pod_group, priority_class, upstream_group
from tests.conftest import NOW, objects_of, schedule
from tests.unit.plugins.backfill.pods import OLD, gpus, running, waiting

GPU = {"nvidia.com/gpu": "8"}
YOUNG = "2026-11-22T09:59:00Z"


def _cluster() -> list[dict[str, Any]]:
    """n1 frees at 10:30 (a 1 h pod started 09:30), n2 at 11:30, n3 never (no runtime)."""
    return [
        node("n1", nvidia_com__gpu="8"),
        node("n2", nvidia_com__gpu="8"),
        node("n3", nvidia_com__gpu="8"),
        running("a", 8, "1h", on="n1"),
        running("b", 8, "2h", on="n2"),
        running("c", 8, None, on="n3"),
    ]


def _config(**args: int) -> Any:
    return parse_config({"profiles": [{"pluginConfig": [{"name": "Backfill", "args": args}]}]})


def _held(result: Any) -> dict[str, tuple[list[str], str | None]]:
    return {
        r["holder"]: (r["nodes"], r["expectedStart"])
        for r in result.to_json()["reservations"]
        if r["kind"] == "Backfill"
    }


def test_an_old_pod_reserves_the_node_that_frees_first() -> None:
    result = schedule(*_cluster(), waiting("big", 8))
    assert _held(result) == {"Pod default/big": (["n1"], "2026-11-22T10:30:00Z")}
    assert (
        "reserved n1; expected start 2026-11-22T10:30:00Z." in result.unschedulable["default/big"]
    )


def test_a_young_pod_reserves_nothing() -> None:
    result = schedule(*_cluster(), waiting("big", 8, created=YOUNG))
    assert _held(result) == {}


def test_reserve_after_seconds_is_configurable() -> None:
    config = parse_config(
        {
            "profiles": [
                {"pluginConfig": [{"name": "Backfill", "args": {"reserveAfterSeconds": 30}}]}
            ]
        }
    )
    result = schedule(*_cluster(), waiting("big", 8, created=YOUNG), config=config)
    assert list(_held(result)) == ["Pod default/big"]


def test_a_pod_stating_no_creation_has_waited_from_now() -> None:
    # A hand-written manifest often has no creationTimestamp: counted as created now (as
    # the queue sort takes it), it reserves at once with reserveAfterSeconds 0, not never.
    unstamped = waiting("big", 8)
    del unstamped["metadata"]["creationTimestamp"]
    assert _held(schedule(*_cluster(), unstamped)) == {}
    result = schedule(*_cluster(), unstamped, config=_config(reserveAfterSeconds=0))
    assert _held(result) == {"Pod default/big": (["n1"], "2026-11-22T10:30:00Z")}


def test_waits_for_pods_without_a_runtime() -> None:
    result = schedule(
        node("n3", nvidia_com__gpu="8"), running("c", 8, None, on="n3"), waiting("big", 8)
    )
    assert _held(result) == {"Pod default/big": (["n3"], None)}
    assert (
        "waits for pods without a stated runtime (default/c)" in result.unschedulable["default/big"]
    )


def test_a_pod_kept_off_a_reservation_with_no_start_is_told_the_room_not_its_runtime() -> None:
    # `big` holds n3 from now on, for good: `short` (5 minutes) is kept off for the room it
    # would take, not for running past a start there is none of.
    result = schedule(
        node("n3", nvidia_com__gpu="8"),
        running("c", 4, None, on="n3"),
        waiting("big", 8),
        waiting("short", 4, "5m", created=YOUNG),
    )
    assert _held(result) == {"Pod default/big": (["n3"], None)}
    assert (
        "1 node(s) were reserved for Pod default/big (once pods without a stated runtime end): "
        "this pod would take room kept for it." in result.unschedulable["default/short"]
    )


def test_reservations_never_overlap_and_follow_the_order() -> None:
    first = waiting("big-1", 8, created="2026-11-22T08:00:00Z")
    second = waiting("big-2", 8)
    result = schedule(*_cluster(), first, second)
    assert _held(result) == {
        "Pod default/big-1": (["n1"], "2026-11-22T10:30:00Z"),
        "Pod default/big-2": (["n2"], "2026-11-22T11:30:00Z"),
    }


def test_a_node_holds_reservations_at_different_times() -> None:
    # big-1 holds n1 from 10:30 for its stated hour; big-2, for 2 h, from 11:30 (Slurm's
    # time-sliced plan): neither holds the same room at the same time.
    first = waiting("big-1", 8, "1h", created="2026-11-22T08:00:00Z")
    second = waiting("big-2", 8, "2h")
    result = schedule(
        node("n1", nvidia_com__gpu="8"), running("a", 8, "1h", on="n1"), first, second
    )
    assert _held(result) == {
        "Pod default/big-1": (["n1"], "2026-11-22T10:30:00Z"),
        "Pod default/big-2": (["n1"], "2026-11-22T11:30:00Z"),
    }


def test_a_pod_is_kept_off_a_later_reservation_it_would_overlap() -> None:
    # n1 has 4 GPUs free till 10:30, then big-1 holds all 8 till 11:00 and big-2 from then.
    # "short" (20 min) ends before 10:30; "mid" (45 min) would run into big-1's hold.
    result = schedule(
        node("n1", nvidia_com__gpu="8"),
        running("a", 4, "1h", on="n1"),
        waiting("big-1", 8, "30m", created="2026-11-22T08:00:00Z"),
        waiting("big-2", 8, "1h", created="2026-11-22T08:30:00Z"),
        waiting("mid", 4, "45m", created=YOUNG),
        waiting("short", 4, "20m", created=YOUNG),
    )
    assert _held(result) == {
        "Pod default/big-1": (["n1"], "2026-11-22T10:30:00Z"),
        "Pod default/big-2": (["n1"], "2026-11-22T11:00:00Z"),
    }
    assert {b.pod: b.node for b in result.bindings} == {"default/short": "n1"}
    assert "reserved for Pod default/big-1" in result.unschedulable["default/mid"]


def test_max_reservations() -> None:
    config = _config(maxReservations=1)
    first = waiting("big-1", 8, created="2026-11-22T08:00:00Z")
    result = schedule(*_cluster(), first, waiting("big-2", 8), config=config)
    assert list(_held(result)) == ["Pod default/big-1"]


def _reserved_n1_with_room(*others: dict[str, Any]) -> Any:
    """big (8 GPUs) reserves n1 for 10:30, where a 4-GPU pod runs till then: 4 GPUs free."""
    return schedule(
        node("n1", nvidia_com__gpu="8"),
        running("a", 4, "1h", on="n1"),
        waiting("big", 8, created="2026-11-22T08:00:00Z"),
        *others,
    )


def test_a_pod_ending_before_the_start_backfills() -> None:
    result = _reserved_n1_with_room(waiting("short", 4, "30m", created=YOUNG))
    assert {b.pod: b.node for b in result.bindings} == {"default/short": "n1"}


def test_a_pod_running_past_the_start_waits() -> None:
    result = _reserved_n1_with_room(waiting("long", 4, "2h", created=YOUNG))
    assert result.bindings == []
    assert (
        "reserved for Pod default/big (expected start 2026-11-22T10:30:00Z): this pod would"
        " run past that start" in result.unschedulable["default/long"]
    )


def test_a_pod_without_a_runtime_waits() -> None:
    result = _reserved_n1_with_room(waiting("free", 4, created=YOUNG))
    assert result.bindings == []
    assert "this pod states no runtime" in result.unschedulable["default/free"]


def test_room_beyond_the_share_is_open_to_all() -> None:
    # The reserving pod needs 4 of the 8 GPUs at 10:30, when "a" will have left 8 free: a
    # pod of 2 GPUs may stay past that start whatever its runtime (here none).
    result = schedule(
        node("n1", nvidia_com__gpu="8"),
        running("a", 6, "1h", on="n1"),
        waiting("mid", 4, created="2026-11-22T08:00:00Z"),
        waiting("free", 2, created=YOUNG),
    )
    assert _held(result) == {"Pod default/mid": (["n1"], "2026-11-22T10:30:00Z")}
    assert {b.pod: b.node for b in result.bindings} == {"default/free": "n1"}


def _members(**joining: Any) -> list[dict[str, Any]]:
    """Two whole-node members of gang ml/train, joining it as `joining` says."""
    return [pod(f"w-{i}", namespace="ml", extra_requests=gpus(8), **joining) for i in range(2)]


def test_a_gang_reserves_as_a_whole() -> None:
    members = _members(labels={"scheduling.x-k8s.io/pod-group": "train"})
    group = pod_group("train", 2)
    group["metadata"]["creationTimestamp"] = OLD
    result = schedule(*_cluster(), group, *members)
    assert _held(result) == {"PodGroup ml/train": (["n1", "n2"], "2026-11-22T11:30:00Z")}


def test_a_gang_restarted_with_new_pods_keeps_its_groups_age() -> None:
    # Its members were recreated a minute ago (after a preemption); its PodGroup, created an
    # hour ago, outlives them: the gang's age is the group's (docs/backfill.md#rules).
    members = _members(labels={"scheduling.x-k8s.io/pod-group": "train"}, created=YOUNG)
    group = pod_group("train", 2)
    group["metadata"]["creationTimestamp"] = OLD
    result = schedule(*_cluster(), group, *members)
    assert _held(result) == {"PodGroup ml/train": (["n1", "n2"], "2026-11-22T11:30:00Z")}


def test_a_gang_short_of_members_reserves_nothing() -> None:
    member = pod(
        "w-0",
        namespace="ml",
        labels={"scheduling.x-k8s.io/pod-group": "train"},
        extra_requests=gpus(8),
    )
    group = pod_group("train", 2)
    group["metadata"]["creationTimestamp"] = OLD
    assert _held(schedule(*_cluster(), group, member)) == {}


def test_a_node_the_pod_cannot_use_is_not_reserved() -> None:
    tainted = node(
        "n0", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}], nvidia_com__gpu="8"
    )
    result = schedule(tainted, running("z", 8, "10m", on="n0"), *_cluster(), waiting("big", 8))
    assert _held(result) == {"Pod default/big": (["n1"], "2026-11-22T10:30:00Z")}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"reserveAfterSeconds": -1}, "args.reserveAfterSeconds"),
        ({"maxReservations": "4"}, "args.maxReservations"),
        ({"maxReservation": 4}, "unknown argument"),
    ],
)
def test_bad_args(args: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        read_args(args)


def test_default_args() -> None:
    assert read_args(None) == (600, 4)


def test_an_upstream_gang_carries_its_expected_start_as_a_condition() -> None:
    group = upstream_group("train", 2)
    group["metadata"]["creationTimestamp"] = OLD
    members = _members(schedulingGroup={"podGroupName": "train"})
    result = schedule(*_cluster(), group, *members)
    status = result.to_json()["podGroups"][0]
    [reserved] = [c for c in status["conditions"] if c["type"] == "Reserved"]
    assert (reserved["status"], reserved["reason"]) == ("True", "Reserved")
    assert reserved["message"] == "reserved n1, n2; expected start 2026-11-22T11:30:00Z."


def test_a_node_nominated_for_a_preemptor_is_not_reserved_by_another() -> None:
    # "high" evicts "victim" and is nominated to n1; "low" waited long too, but must not
    # reserve the room being freed for "high" (it would keep "high" off its own nomination).
    result = schedule(
        priority_class("low", 10),
        priority_class("high", 100),
        node("n1", cpu="1"),
        pod("victim", cpu="1", node_name="n1", phase="Running", priority_class="low"),
        pod("high", cpu="1", priority_class="high"),
        pod("low", cpu="1", priority_class="low"),
    )
    assert {b.pod: b.node for b in result.bindings} == {"default/high": "n1"}
    assert [e.pod for e in result.evictions] == ["default/victim"]
    # Once "high" runs there, "low" reserves n1, waiting for it.
    assert _held(result) == {"Pod default/low": (["n1"], None)}


def test_a_holder_keeps_its_node_when_a_pod_ending_before_its_start_is_nominated_there() -> None:
    # "big" reserves n1 for 12:30 (a ends then; n2 frees at 12:45). "urgent" (1 h, ending
    # before 12:30, so Backfill lets it onto n1) preempted b there and waits for b to go:
    # "big" plans around it and keeps n1, rather than leaving the room drained so far for
    # n2 and a later start.
    leaving = running("b", 4, "2h", on="n1", priority_class="low")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-22T09:59:50Z"
    urgent = waiting("urgent", 4, "1h", created=YOUNG)
    urgent["spec"]["priorityClassName"] = "high"
    urgent["status"]["nominatedNodeName"] = "n1"
    big = waiting("big", 8, created="2026-11-22T08:00:00Z")
    big["spec"]["priorityClassName"] = "low"
    result = schedule(
        priority_class("low", 10),
        priority_class("high", 100),
        node("n1", nvidia_com__gpu="8"),
        node("n2", nvidia_com__gpu="8"),
        running("a", 4, "3h", on="n1", priority_class="low"),
        leaving,
        running("c", 8, "3h15m", on="n2", priority_class="low"),
        big,
        urgent,
    )
    assert _held(result) == {"Pod default/big": (["n1"], "2026-11-22T12:30:00Z")}
    assert result.evictions == [] and result.bindings == []


def test_a_gang_requiring_one_rack_reserves_within_one() -> None:
    # Anywhere, n1 (10:30) and n3 (10:45) would start it earliest; within one rack, rack b's
    # n3 and n4 (10:50) beat rack a's n1 and n2 (11:30).
    def rack_node(name: str, rack: str) -> dict[str, Any]:
        return node(name, labels={"example.com/rack": rack}, nvidia_com__gpu="8")

    def ends_at(name: str, on: str, started: str) -> dict[str, Any]:
        return pod(
            name,
            node_name=on,
            phase="Running",
            annotations={"batchsched.io/max-runtime": "1h"},
            scheduled_at=f"2026-11-22T{started}:00Z",
            extra_requests=gpus(8),
        )

    group = pod_group("train", 2)
    group["metadata"]["creationTimestamp"] = OLD
    group["metadata"]["annotations"] = {"batchsched.io/topology-required": "example.com/rack"}
    result = schedule(
        rack_node("n1", "a"),
        rack_node("n2", "a"),
        rack_node("n3", "b"),
        rack_node("n4", "b"),
        ends_at("r1", "n1", "09:30"),
        ends_at("r2", "n2", "10:30"),
        ends_at("r3", "n3", "09:45"),
        ends_at("r4", "n4", "09:50"),
        group,
        *_members(labels={"scheduling.x-k8s.io/pod-group": "train"}),
    )
    assert _held(result) == {"PodGroup ml/train": (["n3", "n4"], "2026-11-22T10:50:00Z")}


def test_a_failure_is_not_told_to_a_pod_whose_runtime_lets_it_backfill() -> None:
    # `long` and `short` differ only in their stated runtimes: `long` is kept off n1 (it would
    # run past 10:30, when `big` starts there) and fits nowhere else; `short` ends by then and
    # must still be tried on n1, not told `long`'s answer (docs/backfill.md#cost).
    result = schedule(
        node("n1", nvidia_com__gpu="8"),
        running("a", 4, "1h", on="n1"),
        waiting("big", 8),
        waiting("long", 4, "2h", created="2026-11-22T09:10:00Z"),
        waiting("late", 4, "3h", created="2026-11-22T09:15:00Z"),
        waiting("short", 4, "20m", created="2026-11-22T09:20:00Z"),
    )
    assert _held(result) == {"Pod default/big": (["n1"], "2026-11-22T10:30:00Z")}
    assert {b["pod"]: b["node"] for b in result.to_json()["bindings"]} == {"default/short": "n1"}
    # `late` is refused where `long` is: told the same.
    assert result.unschedulable["default/late"] == result.unschedulable["default/long"]
    assert "would run past that start" in result.unschedulable["default/long"]


def _full(count: int) -> list[dict[str, Any]]:
    """Nodes taken for good: enough rows that what is kept per shape is refreshed where rows
    changed, not made again (framework/placements.py)."""
    found = []
    for i in range(count):
        found += [node(f"z{i}", nvidia_com__gpu="8"), running(f"z{i}", 8, None, on=f"z{i}")]
    return found


def test_a_pass_by_runtime_ends_when_its_time_is_up_with_nothing_else_changing() -> None:
    # At 10:00 `x` (20 min) may use n1, reserved for `big` from 10:30, as it ends by then; it
    # goes to n0 (equal scores: the first name). At 10:15 `y`, of the same shape, would end
    # past 10:30, and nothing changed on n1 since `x` was placed: it must be kept off.
    state = build_state(
        objects_of(
            node("n0", nvidia_com__gpu="8"),
            node("n1", nvidia_com__gpu="8"),
            running("held", 4, None, on="n0"),
            running("a", 4, "1h", on="n1"),
            waiting("big", 8),
            waiting("x", 4, "20m", created="2026-11-22T09:10:00Z"),
            *_full(10),
        )
    )
    scheduler = Scheduler(state, default_config())
    assert [d for d in scheduler.schedule_pass(NOW) if isinstance(d, Bind)] == [
        Bind("default/x", "n0")
    ]
    (y,) = objects_of(waiting("y", 4, "20m", created="2026-11-22T09:20:00Z")).pods
    state.upsert_pod(y)
    later = scheduler.schedule_pass(NOW + timedelta(minutes=15))
    assert not [d for d in later if isinstance(d, Bind)]
    assert "would run past that start" in scheduler.messages["default/y"]


def test_a_reservation_made_after_a_shape_was_placed_keeps_its_later_pods_off() -> None:
    # At 10:00 and 10:01 no node is reserved: `w` and `v` (2 h) take a0 and a1 with Backfill
    # having nothing to say. At 10:02 `big` reserves n1 from 10:30; `y`, of their shape,
    # would run past then and must be kept off n1, though what was kept for the shape was
    # found while Backfill had nothing to say.
    state = build_state(
        objects_of(
            *[node(name, nvidia_com__gpu="8") for name in ("a0", "a1", "n1")],
            running("h0", 4, None, on="a0"),
            running("h1", 4, None, on="a1"),
            running("a", 4, "1h", on="n1"),
            *_full(10),
        )
    )
    scheduler = Scheduler(state, default_config())
    for minute, name, where in [(0, "w", "a0"), (1, "v", "a1")]:
        (arrived,) = objects_of(waiting(name, 4, "2h")).pods
        state.upsert_pod(arrived)
        decided = scheduler.schedule_pass(NOW + timedelta(minutes=minute))
        assert [d for d in decided if isinstance(d, Bind)] == [Bind(f"default/{name}", where)]
    for late in objects_of(waiting("big", 8), waiting("y", 4, "2h")).pods:
        state.upsert_pod(late)
    later = scheduler.schedule_pass(NOW + timedelta(minutes=2))
    assert not [d for d in later if isinstance(d, Bind)]
    assert "reserved n1; expected start 2026-11-22T10:30:00Z." in scheduler.messages["default/big"]
    assert "would run past that start" in scheduler.messages["default/y"]


def test_a_free_reservation_goes_to_the_first_in_order_not_the_first_attempted() -> None:
    # One reservation. At 10:00 `holder` (08:30) reserves n1 for 10:30. At 10:31 `a` has
    # ended early and `older` (08:00) and `younger` (09:00) have come: `older` is tried
    # first, kept off n1 (room held for `holder`) with no reservation left; `holder` then
    # starts there and gives its reservation back; `younger`, tried next, fails too. The
    # free reservation is `older`'s (Slurm reserves for the highest-priority jobs), not
    # `younger`'s for being tried after it came free.
    state = build_state(
        objects_of(
            node("n1", nvidia_com__gpu="8"),
            node("n2", nvidia_com__gpu="8"),
            running("a", 8, "1h", on="n1"),
            running("b", 8, "2h", on="n2"),
            waiting("holder", 8, created="2026-11-22T08:30:00Z"),
        )
    )
    scheduler = Scheduler(state, _config(maxReservations=1))
    scheduler.schedule_pass(NOW)
    assert list(state.start_reservations.by_holder) == ["Pod default/holder"]
    state.remove_pod("default/a")
    for arrived in objects_of(
        waiting("older", 8, created="2026-11-22T08:00:00Z"),
        waiting("younger", 8, created="2026-11-22T09:00:00Z"),
    ).pods:
        state.upsert_pod(arrived)
    later = scheduler.schedule_pass(NOW + timedelta(minutes=31))
    assert [d for d in later if isinstance(d, Bind)] == [Bind("default/holder", "n1")]
    [(holder, held)] = state.start_reservations.by_holder.items()
    assert (holder, held.nodes) == ("Pod default/older", ("n2",))
    assert "reserved" not in scheduler.messages["default/younger"]


def test_a_pod_earlier_in_order_takes_the_reservation_once_old_enough() -> None:
    # One reservation. At 10:00 `urgent` (priority 100, preempting nothing, created 09:55)
    # is too young to reserve and `batch` (08:00) takes n1. At 10:06 nothing has changed,
    # but `urgent` has waited its 10 minutes: it comes first in the scheduler's order, so
    # it holds the reservation now and `batch` gives it back (Slurm plans its top jobs
    # every cycle).
    state = build_state(
        objects_of(
            priority_class("high", 100, preemption_policy="Never"),
            *_cluster(),
            pod(
                "urgent",
                created="2026-11-22T09:55:00Z",
                priority_class="high",
                extra_requests=gpus(8),
            ),
            waiting("batch", 8, created="2026-11-22T08:00:00Z"),
        )
    )
    scheduler = Scheduler(state, _config(maxReservations=1))
    scheduler.schedule_pass(NOW)
    assert list(state.start_reservations.by_holder) == ["Pod default/batch"]
    scheduler.schedule_pass(NOW + timedelta(minutes=6))
    [(holder, held)] = state.start_reservations.by_holder.items()
    assert (holder, held.nodes) == ("Pod default/urgent", ("n1",))
