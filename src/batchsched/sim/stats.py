"""Means over seeds with 95% confidence intervals, and paired differences between runs; and
the statistics of one run (percentiles, time averages of step functions).

Every variant of a scenario runs on the same seeds, so seed s gives every variant the same
workload: the difference variant - baseline is taken per seed and its interval is that of the
mean difference (a paired t interval), which is much tighter than comparing two separate
intervals. Intervals use Student's t with n - 1 degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Two-sided 95% quantiles of Student's t (t_0.975) by degrees of freedom; between entries the
# smaller df is used, which makes the interval slightly wider, never narrower.
_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    25: 2.060,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}
_NORMAL975 = 1.960


def t975(df: int) -> float:
    if df < 1:
        raise ValueError("an interval needs at least two values")
    if df > max(_T975):
        return _NORMAL975
    return _T975[max(k for k in _T975 if k <= df)]


# Fewer seeds than this give 95% intervals too wide to tell runs apart (t = 2.78 at 5 seeds,
# 4.30 at 3, 12.7 at 2): `simulate` says so.
ENOUGH_SEEDS = 5


def few_seeds(seeds: int, runs: int, same_work: bool = False) -> str:
    """Why the comparison over `seeds` seeds says little, or "" when it has enough.
    `same_work`: every seed gives the runs the same jobs (a trace replayed as it is), so
    seeds vary nothing and what they would say is about the one workload."""
    if same_work:
        if seeds == 1:
            return ""  # one deterministic run per variant: there is no seed noise to speak of
        return (
            f"a trace replays the same jobs on every seed: the {seeds} seeds give identical "
            "runs, and their intervals say nothing of how the results vary with the workload; "
            "work.trace.sample or work.trace.jitter draws the jobs per seed"
        )
    if seeds >= ENOUGH_SEEDS or (seeds == 1 and runs == 1):
        return ""
    if seeds == 1:
        return (
            "one seed: each run is one draw of the workload and no interval tells a policy's "
            f"effect from seed noise; use --seeds {ENOUGH_SEEDS} or more"
        )
    return (
        f"{seeds} seeds: the 95% intervals are too wide to mean much (Student's t is "
        f"{t975(seeds - 1):.2f} at {seeds} seeds, {t975(ENOUGH_SEEDS - 1):.2f} at "
        f"{ENOUGH_SEEDS}); use --seeds {ENOUGH_SEEDS} or more"
    )


@dataclass(frozen=True, slots=True)
class Interval:
    mean: float
    low: float  # equal to the mean when n == 1: one seed gives no interval
    high: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        return self.n > 1 and (self.low > 0 or self.high < 0)

    def clipped(self, low: float | None, high: float | None) -> Interval:
        """The interval within what the quantity can be (a count is never below 0, a share
        never above 100%): Student's t knows nothing of bounds, and over few seeds a count's
        interval reaches below zero."""
        return Interval(
            self.mean,
            self.low if low is None else max(self.low, low),
            self.high if high is None else min(self.high, high),
            self.n,
        )

    def to_json(self) -> dict[str, float | int | bool]:
        return {
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "excludesZero": self.excludes_zero,
        }


def interval(values: Sequence[float | None]) -> Interval | None:
    """The mean of the values that exist and its 95% interval; None when there are none."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    n = len(xs)
    mean = math.fsum(xs) / n
    if n == 1:
        return Interval(mean, mean, mean, 1)
    variance = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    half = t975(n - 1) * math.sqrt(variance / n)
    return Interval(mean, mean - half, mean + half, n)


def paired_difference(
    variant: Sequence[float | None], baseline: Sequence[float | None]
) -> Interval | None:
    """variant - baseline per seed (seeds where either is missing are left out), as an
    interval of the mean difference."""
    return interval(
        [v - b for v, b in zip(variant, baseline, strict=True) if v is not None and b is not None]
    )


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q, method="linear"))


def time_average(
    times: list[float], values: np.ndarray[Any, Any], end: float
) -> np.ndarray[Any, Any]:
    """The time-weighted mean of a step function from times[0] to `end`, per column."""
    if not times or end <= times[0]:
        return np.zeros(values.shape[1] if values.ndim == 2 else 0)
    t = np.asarray([*times, end], dtype=np.float64)
    widths = np.clip(np.diff(t), 0.0, None)
    mean: np.ndarray[Any, Any] = (values * widths[:, None]).sum(axis=0) / (end - times[0])
    return mean


def spread(values: list[float]) -> dict[str, float | None]:
    """p50, p95, p99 and mean of the values (None for each when there are none)."""
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": float(np.mean(values)) if values else None,
    }


def binned(
    times: list[float], values: np.ndarray[Any, Any], end: float, bins: int
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Time-weighted means of a step function over equal bins: (bin centres, means per column)."""
    t = np.asarray(times, dtype=np.float64)
    if t.size == 0 or end <= t[0]:
        return np.zeros(0), np.zeros((0, values.shape[1]))
    edges = np.linspace(t[0], end, bins + 1)
    widths = np.diff(np.append(t, end))
    cumulative = np.vstack([np.zeros(values.shape[1]), np.cumsum(values * widths[:, None], axis=0)])
    k = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, t.size - 1)
    area = cumulative[k] + values[k] * (edges - t[k])[:, None]
    means = np.diff(area, axis=0) / np.diff(edges)[:, None]
    return (edges[:-1] + edges[1:]) / 2, means
