"""Preemption carried out on the virtual clock: victims go after their grace period, and the
toleration policy reads the PodScheduled time the simulator stamps at bind."""

from __future__ import annotations

import pytest

from tests.sim.simkit import gpu_node, job, simulation

MIN = 60.0


def run(low_class: str) -> tuple[float | None, int, int, float]:
    low = job("train", work=60 * MIN, checkpoint_interval=10 * MIN, priority_class=low_class)
    high = job("urgent", work=10 * MIN, submit=MIN, priority_class="high")
    result = simulation([gpu_node("n1")], [low, high]).run()
    train, urgent = result.jobs
    return urgent.start, train.preemptions, train.no_progress_preemptions, train.lost_gpu_seconds


def test_high_job_preempts_a_plain_low_job_at_once() -> None:
    start, preemptions, no_progress, lost = run("low")
    assert start == MIN + 30  # the victim's grace period
    assert (preemptions, no_progress) == (1, 1)
    assert lost == pytest.approx(MIN * 8)


def test_tolerant_low_job_keeps_its_first_ten_minutes() -> None:
    start, preemptions, no_progress, lost = run("low-non-preempted-10min")
    # Tried at 1 min (protected), retried after 5 quiet minutes (still protected), then at
    # 11 min the toleration is over: evicted, gone 30 s later.
    assert start == 11 * MIN + 30
    assert (preemptions, no_progress) == (1, 0)
    assert lost == pytest.approx(1 * MIN * 8)  # one minute since the 10-minute checkpoint
