"""A holder waiting for a pod that runs past its stated runtime (docs/backfill.md): its
reservation is planned again only when a pod came or went on its nodes (a gang's failed
attempt, which takes room there and gives it back, is not one), and once its start has
passed it is told as now, naming the pods it waits for."""

from __future__ import annotations

from datetime import timedelta

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.scheduling.scheduler import Scheduler
from batchsched.ui.access import Viewer
from batchsched.ui.board import build_board
from batchsched.ui.pages import workload_page
from tests.builders import node, pod, pod_group
from tests.conftest import NOW, objects_of
from tests.unit.plugins.backfill.pods import OLD, gpus, running, waiting


def test_a_failed_gang_attempt_on_reserved_nodes_does_not_move_the_reservation() -> None:
    # n1 (16 GPUs): `late` (12) stated 1 h at 09:02 and cannot be evicted for `big` (8,
    # preemptionPolicy Never): `big` keeps n1 from 10:02. The gang `train` (3 x 4 GPUs, no
    # runtime) fits one member in n1's 4 free GPUs each pass and fails the second.
    group = pod_group("train", 3)
    group["metadata"]["creationTimestamp"] = OLD
    members = [
        pod(
            f"w-{i}",
            namespace="ml",
            labels={"scheduling.x-k8s.io/pod-group": "train"},
            extra_requests=gpus(4),
            created="2026-11-22T09:59:59Z",
        )
        for i in range(3)
    ]
    state = build_state(
        objects_of(
            node("n1", nvidia_com__gpu="16"),
            running("late", 12, "1h", on="n1", started="2026-11-22T09:02:00Z"),
            waiting("big", 8, preemptionPolicy="Never"),
            group,
            *members,
        )
    )
    scheduler = Scheduler(state, default_config())
    scheduler.schedule_pass(NOW)
    first = state.start_reservations.by_holder["Pod default/big"]
    assert first.start == NOW + timedelta(minutes=2)
    for minutes in (1, 5, 10, 20):
        state.moved_holders.clear()
        scheduler.schedule_pass(NOW + timedelta(minutes=minutes))
        assert "PodGroup ml/train: 1/3 members can run" in scheduler.messages["ml/w-0"]
        assert state.start_reservations.by_holder["Pod default/big"] is first
        assert not state.moved_holders


def test_a_start_passed_is_told_as_now_naming_the_pods_running_past_their_runtime() -> None:
    # `big` keeps n1 from 10:02, when `late` was to end; at 10:20 `late` still runs (it
    # cannot be evicted for a holder with preemptionPolicy Never). The plan keeps 10:02; the
    # holder's message and the board say the start is now and what it waits for.
    state = build_state(
        objects_of(
            node("n1", nvidia_com__gpu="8"),
            running("late", 8, "1h", on="n1", started="2026-11-22T09:02:00Z"),
            waiting("big", 8, preemptionPolicy="Never"),
        )
    )
    scheduler = Scheduler(state, default_config())
    scheduler.schedule_pass(NOW)
    scheduler.schedule_pass(NOW + timedelta(minutes=1))
    assert "expected start 2026-11-22T10:02:00Z." in scheduler.messages["default/big"]
    later = NOW + timedelta(minutes=20)
    scheduler.schedule_pass(later)
    told = (
        "reserved n1; expected start now (planned for 2026-11-22T10:02:00Z): waits for "
        "default/late, running past the end expected of them."
    )
    assert told in scheduler.messages["default/big"]
    assert state.start_reservations.by_holder["Pod default/big"].start == NOW + timedelta(minutes=2)
    board = build_board(scheduler, 1, later, "the cluster", scheduler.messages)
    page = workload_page(board, Viewer("anonymous"), "pod", "default/big")
    assert page is not None
    assert f"Expected start</dt><dd>{told}</dd>" in page[1]
