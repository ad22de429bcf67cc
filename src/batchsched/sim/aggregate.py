"""A comparison over seeds: every metric per run as a mean with its 95% interval, and each
run's paired difference from the first run (the baseline)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from batchsched.sim.metrics import LARGE, SIZE_CLASSES, RunResult, gpu_resource, run_summary
from batchsched.sim.stats import Interval, interval, paired_difference

Summary = dict[str, Any]
# (name, how a run's summary gives it, its largest possible value): every metric is a count,
# a duration or a share, never below 0; shares (%) never above 100.
Metric = tuple[str, Callable[[Summary], float | None], float | None]
PERCENT = 100.0


def _minutes(value: float | None) -> float | None:
    return None if value is None else value / 60


def _gpu_util(s: Summary) -> float | None:
    util = s["cluster"]["utilisation"]
    gpu = gpu_resource(list(util))
    return util[gpu] * 100 if gpu else None


RUN_METRICS: list[Metric] = [
    ("jobs finished", lambda s: s["jobs"]["finished"], None),
    ("jobs submitted", lambda s: s["jobs"]["submitted"], None),
    ("GPU util %", _gpu_util, PERCENT),
    ("preemptions", lambda s: s["preemptions"], None),
    ("no-progress preemptions", lambda s: s["no_progress_preemptions"], None),
    ("lost GPU-hours", lambda s: s["lost_gpu_hours"], None),
    (
        "gang start delay p95 (min)",
        lambda s: _minutes(s["cluster"]["gang_start_delay_seconds"]["p95"]),
        None,
    ),
    (
        "preemptor wait mean (min)",
        lambda s: _minutes(s["preemptors"]["wait_seconds"]["mean"]),
        None,
    ),
    (
        "preemptor wait p95 (min)",
        lambda s: _minutes(s["preemptors"]["wait_seconds"]["p95"]),
        None,
    ),
    (
        "preemptors held by toleration",
        lambda s: s["preemptors"]["held_by_toleration_jobs"],
        None,
    ),
    (
        "GPUs free on partly used nodes",
        lambda s: s["cluster"]["gpu_fragmentation"]["mean"],
        None,
    ),
    (
        "whole-node GPU job wait mean (min)",
        lambda s: _minutes(s["cluster"]["whole_node_gpu_wait_seconds"]["mean"]),
        None,
    ),
]


def _backfill_metrics(sizes: list[str]) -> list[Metric]:
    """Reservations' effect (docs/backfill.md): waits per job size, backfilled jobs, and how
    far reserved jobs started from their first expected start."""

    def wait(size: str, q: str) -> Callable[[Summary], float | None]:
        return lambda s: _minutes(s["backfill"]["wait_seconds_by_size"][size][q])

    return [
        *(
            (f"{size} jobs: wait {q} (min)", wait(size, q), None)
            for size in sizes
            for q in ("mean", "p50", "p95", "p99")
        ),
        ("backfilled jobs", lambda s: s["backfill"]["backfilled_jobs"], None),
        ("reserved jobs", lambda s: s["backfill"]["reserved_jobs"], None),
        # Absent from summaries written before it was counted.
        ("broken promises evicted", lambda s: s["backfill"].get("broken_promises_evicted"), None),
        (
            "reservation start error mean (min)",
            lambda s: _minutes(s["backfill"]["start_error_abs_seconds"]["mean"]),
            None,
        ),
    ]


def _class_metrics(classes: list[str]) -> list[Metric]:
    def wait(cls: str, q: str) -> Callable[[Summary], float | None]:
        return lambda s: _minutes(s["classes"].get(cls, {}).get("wait_seconds", {}).get(q))

    return [
        (f"{cls}: wait {q} (min)", wait(cls, q), None) for cls in classes for q in ("p50", "p95")
    ]


def _queue_metrics(summaries: list[Summary]) -> list[Metric]:
    """When the runs measured queues: the run-wide fairness figures, then per leaf queue its
    share, its deviation from its fair share and its p95 wait."""
    leaves = sorted(
        {
            name
            for s in summaries
            if s.get("queues") is not None
            for name, q in s["queues"]["queues"].items()
            if q["leaf"]
        }
    )
    if not leaves:
        return []

    def run(key: str, scale: float = 1.0) -> Callable[[Summary], float | None]:
        def read(s: Summary) -> float | None:
            value = s["queues"][key] if s["queues"] is not None else None
            return None if value is None else value * scale

        return read

    def queue(
        name: str, read: Callable[[dict[str, Any]], float | None]
    ) -> Callable[[Summary], float | None]:
        def get(s: Summary) -> float | None:
            found = s["queues"]["queues"].get(name) if s["queues"] is not None else None
            return None if found is None else read(found)

        return get

    return [
        ("queues: Jain's index (time mean)", run("jain_index_mean"), 1.0),
        ("queues: mean |share - fair| / fair %", run("deviation_percent_mean"), None),
        ("queues: reclaims", run("reclaims"), None),
        ("queues: GPU-hours lost to reclaim", run("reclaim_lost_gpu_hours"), None),
        *(
            metric
            for name in leaves
            for metric in (
                (f"queue {name}: share %", queue(name, lambda q: q["share_percent"]), PERCENT),
                (
                    f"queue {name}: |share - fair| / fair %",
                    queue(name, lambda q: q["deviation_percent"]),
                    None,
                ),
                (
                    f"queue {name}: wait p95 (min)",
                    queue(name, lambda q: _minutes(q["wait_seconds"]["p95"])),
                    None,
                ),
            )
        ),
    ]


@dataclass
class Comparison:
    runs: list[str]  # in order; the first is the baseline
    seeds: dict[str, list[int]]  # per run; runs are paired by seed position
    metrics: list[str]
    values: dict[str, dict[str, list[float | None]]]  # metric -> run -> value per seed
    means: dict[str, dict[str, Interval | None]]  # metric -> run -> interval
    differences: dict[str, dict[str, Interval | None]]  # metric -> run (not baseline) -> diff

    def to_json(self) -> dict[str, Any]:
        def js(i: Interval | None) -> dict[str, Any] | None:
            return i.to_json() if i is not None else None

        return {
            "baseline": self.runs[0],
            "seeds": self.seeds,
            "metrics": {
                m: {
                    "perSeed": self.values[m],
                    "mean": {r: js(self.means[m][r]) for r in self.runs},
                    "difference": {r: js(self.differences[m][r]) for r in self.runs[1:]},
                }
                for m in self.metrics
            },
        }


def compare(results: dict[str, list[RunResult]]) -> Comparison:
    """Each run's results in seed order; the first run is the baseline."""
    runs = list(results)
    summaries = {r: [run_summary(result) for result in results[r]] for r in runs}
    classes = sorted({c for ss in summaries.values() for s in ss for c in s["classes"]})
    every = [s for ss in summaries.values() for s in ss]
    sizes = [
        size
        for size in (*SIZE_CLASSES, LARGE)
        if any(s["backfill"]["jobs_by_size"].get(size) for s in every)
    ]
    metrics = [
        *RUN_METRICS,
        *_backfill_metrics(sizes),
        *_class_metrics(classes),
        *_queue_metrics(every),
    ]
    values: dict[str, dict[str, list[float | None]]] = {}
    for label, read, _ in metrics:
        values[label] = {r: [_number(read(s)) for s in summaries[r]] for r in runs}
    top = {label: highest for label, _, highest in metrics}
    means = {m: {r: _bounded(v[r], top[m]) for r in runs} for m, v in values.items()}
    base = runs[0]
    differences = {
        m: {r: _paired(v[r], v[base], top[m]) for r in runs[1:]} for m, v in values.items()
    }
    seeds = {r: [result.seed for result in results[r]] for r in runs}
    return Comparison(runs, seeds, [m for m, _, _ in metrics], values, means, differences)


def _bounded(values: list[float | None], top: float | None) -> Interval | None:
    found = interval(values)
    return None if found is None else found.clipped(0.0, top)


def _paired(
    variant: list[float | None], baseline: list[float | None], top: float | None
) -> Interval | None:
    """The paired difference, within its possible range: with every value in [0, top], the
    mean difference is at least minus the baseline's mean and at most top minus it."""
    n = min(len(variant), len(baseline))  # runs with fewer seeds pair with the first ones
    found = paired_difference(variant[:n], baseline[:n])
    if found is None:
        return None
    pairs = [b for v, b in zip(variant[:n], baseline[:n], strict=True) if v is not None]
    base = math.fsum(b for b in pairs if b is not None) / found.n  # found.n: the pairs kept
    return found.clipped(-base, None if top is None else top - base)


def _number(value: float | int | None) -> float | None:
    return None if value is None else float(value)


INTERVAL_LEGEND = (
    "mean ± half-width of its 95% confidence interval, or mean [low, high] where what the "
    "metric can be (a count never below 0, a share never above 100%) clips the interval"
)


def cell(i: Interval | None, mark: bool = False) -> str:
    """`mean ± half-width` of the interval, or `mean [low, high]` where the quantity's range
    clipped it; `*` marks a difference whose interval excludes 0."""
    if i is None:
        return "–"
    if i.n == 1:
        text = _num(i.mean)
    elif math.isclose(i.high - i.mean, i.mean - i.low, rel_tol=1e-9, abs_tol=1e-12):
        text = f"{_num(i.mean)} ± {_num((i.high - i.low) / 2)}"
    else:
        text = f"{_num(i.mean)} [{_num(i.low)}, {_num(i.high)}]"
    return text + (" *" if mark and i.excludes_zero else "")


def verdicts(c: Comparison) -> list[str]:
    """One paragraph per metric: what each run does to it against the baseline, and whether
    the seeds can tell that from noise."""
    base = c.runs[0]
    out = []
    for metric in c.metrics:
        said = []
        for run in c.runs[1:]:
            diff, mine, theirs = (
                c.differences[metric][run],
                c.means[metric][run],
                c.means[metric][base],
            )
            if mine is None and theirs is None:
                said.append(f"not measured in {run} nor in {base} (nothing of the kind ran).")
                continue
            if diff is None or mine is None or theirs is None:
                said.append(f"{run}: measured in only one of {run} and {base} on each seed.")
                continue
            change = f"{run} gives {_num(mine.mean)} against {base}'s {_num(theirs.mean)}"
            if diff.n == 1:
                said.append(f"{change}, on one seed: no interval, so it may be seed noise.")
            elif diff.excludes_zero:
                said.append(
                    f"{change}: {'more' if diff.mean > 0 else 'less'} by {_num(abs(diff.mean))} "
                    f"on average over {diff.n} paired seeds (95% interval {_num(diff.low)} to "
                    f"{_num(diff.high)}), a difference beyond seed noise."
                )
            elif diff.low == diff.high:
                said.append(f"{change}: the same on every seed.")
            else:
                said.append(
                    f"{change}; the difference ({_num(diff.mean)}, 95% interval {_num(diff.low)} "
                    f"to {_num(diff.high)} over {diff.n} paired seeds) includes zero: no "
                    "difference the seeds can tell from noise."
                )
        out.append(f"{metric}: " + " ".join(said))
    return out


def _num(x: float) -> str:
    """One decimal; two significant digits below 1, so that a starred 0.004 does not read 0.0."""
    if x == 0 or abs(x) >= 0.95:
        return f"{x:.1f}"
    return f"{x:.2g}"


def labels(c: Comparison, numbered: bool) -> list[str]:
    """Column labels for the runs: their names, or (1), (2), ... when names would not fit."""
    return [f"({i})" for i in range(1, len(c.runs) + 1)] if numbered else list(c.runs)


def rows(c: Comparison, numbered: bool = False) -> tuple[list[str], list[list[str]]]:
    names = labels(c, numbered)
    head = ["metric", *names, *(f"{r} - {names[0]}" for r in names[1:])]
    body = [
        [
            m,
            *(cell(c.means[m][r]) for r in c.runs),
            *(cell(c.differences[m][r], mark=True) for r in c.runs[1:]),
        ]
        for m in c.metrics
    ]
    return head, body
