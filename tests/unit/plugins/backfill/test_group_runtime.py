"""A PodGroup's stated runtime (`batchsched.io/max-runtime`) changed while the scheduler runs
(live mode): the expected ends of its running members, the stay of its reservation and the
verdicts on its waiting members follow at the next pass (docs/backfill.md#live-mode)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Bind
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, pod_group
from tests.conftest import NOW, objects_of, schedule
from tests.unit.plugins.backfill.pods import OLD, gpus, running

GROUP_LABEL = {"scheduling.x-k8s.io/pod-group": "train"}


def _group(runtime: str, min_member: int = 1) -> dict[str, Any]:
    group = pod_group("train", min_member)
    group["metadata"]["creationTimestamp"] = OLD
    group["metadata"]["annotations"] = {"batchsched.io/max-runtime": runtime}
    return group


def _restate(state: ClusterState, runtime: str, min_member: int = 1) -> None:
    """The group's annotation edited: the informer's update."""
    (group,) = objects_of(_group(runtime, min_member)).pod_groups
    state.upsert_pod_group(group)


def _settle(scheduler: Scheduler) -> list[Bind]:
    """Two passes with nothing changing (the second plans nothing again): the bindings."""
    decided = scheduler.schedule_pass(NOW) + scheduler.schedule_pass(NOW + timedelta(seconds=30))
    return [d for d in decided if isinstance(d, Bind)]


def _held(state: ClusterState, holder: str) -> tuple[str | None, str | None]:
    r = state.start_reservations.by_holder[holder]
    return (
        None if r.start is None else r.start.strftime("%H:%M"),
        None if r.until is None else r.until.strftime("%H:%M"),
    )


def test_running_members_end_by_their_groups_new_runtime() -> None:
    # `w` (a member stating no runtime) runs on n1 since 09:30 under its group's 2 h: `big`
    # reserves n1 from 11:30. The group is told 1 h: n1 frees at 10:30, and so `big` starts.
    state = build_state(
        objects_of(
            node("n1", nvidia_com__gpu="8"),
            _group("2h"),
            running("w", 8, namespace="ml", labels=GROUP_LABEL),
            pod("big", created=OLD, annotations={"batchsched.io/max-runtime": "1h"},
                extra_requests=gpus(8)),
        )
    )  # fmt: skip
    scheduler = Scheduler(state, default_config())
    assert not _settle(scheduler)
    assert _held(state, "Pod default/big") == ("11:30", "12:30")
    _restate(state, "1h")
    scheduler.schedule_pass(NOW + timedelta(minutes=1))
    assert _held(state, "Pod default/big") == ("10:30", "11:30")
    assert "expected start 2026-11-22T10:30:00Z" in scheduler.messages["default/big"]


def test_a_holders_planned_end_follows_its_groups_runtime() -> None:
    # The gang `train` (one member of 8 GPUs) reserves n1 from 10:30 for its 3 h; told 1 h,
    # it holds the room until 11:30 only.
    state = build_state(
        objects_of(
            node("n1", nvidia_com__gpu="8"),
            running("a", 8, "1h"),
            _group("3h"),
            pod("w", namespace="ml", labels=GROUP_LABEL, created=OLD, extra_requests=gpus(8)),
        )
    )
    scheduler = Scheduler(state, default_config())
    assert not _settle(scheduler)
    assert _held(state, "PodGroup ml/train") == ("10:30", "13:30")
    _restate(state, "1h")
    scheduler.schedule_pass(NOW + timedelta(minutes=1))
    assert _held(state, "PodGroup ml/train") == ("10:30", "11:30")


def test_a_member_kept_off_is_tried_again_when_its_group_states_a_shorter_runtime() -> None:
    # `big` reserves n1 from 10:30; `w`, of a group stating 2 h, would run past then on its
    # 4 free GPUs and is kept off. The group is told 20 min: `w` ends by 10:30 and backfills.
    state = build_state(
        objects_of(
            node("n1", nvidia_com__gpu="8"),
            running("a", 4, "1h"),
            pod("big", created=OLD, extra_requests=gpus(8)),
            _group("2h"),
            pod("w", namespace="ml", labels=GROUP_LABEL, created="2026-11-22T09:50:00Z",
                extra_requests=gpus(4)),
        )
    )  # fmt: skip
    scheduler = Scheduler(state, default_config())
    assert not _settle(scheduler)
    assert "would run past that start" in scheduler.messages["ml/w"]
    _restate(state, "20m")
    later = scheduler.schedule_pass(NOW + timedelta(minutes=1))
    assert [d for d in later if isinstance(d, Bind)] == [Bind("ml/w", "n1")]


def test_running_pods_and_groups_stating_a_bad_runtime_are_told_by_schedule() -> None:
    # No pending message tells them: schedule's warnings do (docs/backfill.md#stated-runtimes).
    result = schedule(
        node("n1", nvidia_com__gpu="8"),
        _group("soon"),
        running("member", 4, labels=GROUP_LABEL, namespace="ml"),
        running("typo", 4, "2 hours"),
    )
    assert [(w.obj, w.message) for w in result.warnings] == [
        (
            "Pod default/typo",
            "metadata.annotations.batchsched.io/max-runtime: '2 hours' is not a duration: "
            "whole numbers with units h, m or s (e.g. 90m, 2h, 3600s, 1h30m); planned as "
            "stating no runtime",
        ),
        (
            "PodGroup ml/train",
            "metadata.annotations.batchsched.io/max-runtime: 'soon' is not a duration: "
            "whole numbers with units h, m or s (e.g. 90m, 2h, 3600s, 1h30m); planned as "
            "stating no runtime",
        ),
    ]
