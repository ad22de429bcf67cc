"""Metrics on hand-computable cases."""

from __future__ import annotations

import numpy as np
import pytest

from batchsched.sim.metrics import JobRecord, Timeline, class_summary
from batchsched.sim.stats import binned, percentile, time_average


def record(
    name: str, cls: str, submit: float, start: float | None, end: float | None, **kw: float
) -> JobRecord:
    return JobRecord(
        name=name,
        priority_class=cls,
        group=cls,
        pods=1,
        gpus=8,
        gang=False,
        submit=submit,
        start=start,
        end=end,
        **kw,
    )  # type: ignore[arg-type]


def test_class_summary_waits_completions_preemptions_and_lost_work() -> None:
    jobs = [
        record("a", "low", 0, 10, 110, preemptions=2, lost_gpu_seconds=3600),
        record("b", "low", 0, 30, 130, preemptions=1, lost_gpu_seconds=1800),
        record("c", "low", 0, None, None),
        record("d", "high", 5, 5, 15),
    ]
    summary = class_summary(jobs, end=2.0)
    low, high = summary["low"], summary["high"]
    assert (low["jobs"], low["started"], low["finished"]) == (3, 2, 2)
    assert (low["submitted"], high["submitted"]) == (3, 0)  # d comes at 5, after the end
    assert low["wait_seconds"]["p50"] == 20 and low["wait_seconds"]["mean"] == 20
    assert low["wait_seconds"]["p95"] == pytest.approx(29)
    assert low["completion_seconds"]["p50"] == 120
    assert (low["preemptions"], low["lost_gpu_hours"]) == (3, 1.5)
    assert high["wait_seconds"]["p99"] == 0 and high["preemptions"] == 0


def test_percentile_interpolates_and_is_none_when_empty() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([], 50) is None


def test_time_average_weights_each_value_by_how_long_it_held() -> None:
    values = np.array([[0.0], [10.0], [4.0]])
    assert time_average([0, 10, 30], values, 40)[0] == pytest.approx((10 * 20 + 4 * 10) / 40)


def test_binned_means_of_a_step_function() -> None:
    values = np.array([[2.0], [6.0]])
    centres, means = binned([0, 10], values, 20, bins=4)
    assert list(centres) == [2.5, 7.5, 12.5, 17.5]
    assert list(means[:, 0]) == [2, 2, 6, 6]
    _, straddle = binned([0, 10], values, 20, bins=1)
    assert straddle[0, 0] == 4


def test_a_timeline_keeps_copies_of_what_it_is_given() -> None:
    """The simulator passes its running totals, which it goes on changing."""
    timeline = Timeline(["cpu"], ["a"])
    used, waiting = [1.0], [2]
    timeline.record(0.0, used, waiting)
    used[0], waiting[0] = 3.0, 0
    timeline.record(0.0, used, waiting)  # same instant: the sample is replaced
    used[0] = 5.0
    timeline.record(1.0, used, waiting)
    timeline.record(2.0, used, waiting)  # unchanged: not sampled
    used[0] = 7.0
    assert timeline.times == [0.0, 1.0]
    assert timeline.used == [[3.0], [5.0]] and timeline.pending == [[0], [0]]
