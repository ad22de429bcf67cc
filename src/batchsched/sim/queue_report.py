"""Per-queue results for people: the terminal's table (one line per leaf queue and run, worst
first) and the report's plots of each queue's share over time against its fair share."""

from __future__ import annotations

from typing import Any

import numpy as np

from batchsched.sim.metrics import RunResult, run_summary
from batchsched.sim.plotting import legend
from batchsched.sim.queue_metrics import jain_series
from batchsched.sim.stats import binned
from batchsched.sim.workload import format_duration

QUEUE_HEAD = [
    "queue",
    "run",
    "jobs finished / submitted",
    "share %",
    "fair share %",
    "deviation from fair share %",
    "wait p50 (min)",
    "wait p95 (min)",
    "wait p99 (min)",
    "reclaims",
    "GPU-hours lost to reclaim",
]


def _fmt(value: float | None, scale: float = 1.0) -> str:
    return "–" if value is None else f"{value / scale:.1f}"


def queue_rows(results: list[RunResult]) -> tuple[str, list[list[str]]]:
    """The table's title and rows (leaf queues, worst first: largest deviation from the fair
    share over the runs, then longest p95 wait, then name; each queue's runs in order). No
    rows when no run measured queues."""
    per_queue: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    resource, since = "", 0.0
    for result in results:
        summary = run_summary(result)["queues"]
        if summary is None:
            continue
        resource, since = summary["resource"], summary["measured_from_seconds"]
        for name, q in summary["queues"].items():
            if q["leaf"]:
                per_queue.setdefault(name, []).append((result.name, q))

    def badness(name: str) -> tuple[float, float, str]:
        runs = [q for _, q in per_queue[name]]
        deviation = max((q["deviation_percent"] or 0.0 for q in runs), default=0.0)
        wait = max((q["wait_seconds"]["p95"] or 0.0 for q in runs), default=0.0)
        return (-deviation, -wait, name)

    rows = [
        [
            name,
            run,
            f"{q['finished']}/{q['submitted']}",
            _fmt(q["share_percent"]),
            _fmt(q["fair_share_percent"]),
            _fmt(q["deviation_percent"]),
            _fmt(q["wait_seconds"]["p50"], 60),
            _fmt(q["wait_seconds"]["p95"], 60),
            _fmt(q["wait_seconds"]["p99"], 60),
            str(q["reclaims"]),
            _fmt(q["reclaim_lost_gpu_hours"]),
        ]
        for name in sorted(per_queue, key=badness)
        for run, q in per_queue[name]
    ]
    window = f"from {format_duration(since)} on" if since else ""
    return f"PER QUEUE (shares of {resource}, time-averaged{window and ' '}{window})", rows


def share_plot(results: list[RunResult], bins: int) -> Any | None:
    """One panel per leaf queue: its share of the cluster over time in each run (solid) and
    its fair share (dashed); the last panel, Jain's index over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r for r in results if r.queues is not None]
    if not measured:
        return None
    leaves = sorted({q for r in measured for q, leaf in _leaves(r) if leaf})
    cols = 3
    panels = len(leaves) + 1
    rows = (panels + cols - 1) // cols
    fig, axes = plt.subplots(
        rows, cols, figsize=(11, 2.2 * rows), squeeze=False, layout="constrained"
    )
    flat = list(axes.flat)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, result in enumerate(measured):
        tl = result.queues
        assert tl is not None
        colour = colours[k % len(colours)]
        allocated = np.asarray(tl.allocated, dtype=np.float64).reshape(len(tl.times), -1)
        x, shares = binned(tl.times, allocated, result.end_time, bins)
        scale = 100.0 / tl.capacity if tl.capacity else 0.0
        fair_values = np.asarray(tl.fair, dtype=np.float64).reshape(len(tl.times), -1)
        _, fair = binned(tl.times, fair_values, result.end_time, bins)
        jain = jain_series(allocated[:, tl.leaves], fair_values[:, tl.leaves])
        # No queue with a fair share (no demand at all): nobody is treated unfairly.
        even = np.nan_to_num(jain, nan=1.0)[:, None]
        _, jain_binned = binned(tl.times, even, result.end_time, bins)
        flat[len(leaves)].plot(x / 3600, jain_binned[:, 0], color=colour, label=result.name)
        for ax, name in zip(flat, leaves, strict=False):
            if name not in tl.queues:
                continue
            i = tl.queues.index(name)
            ax.plot(x / 3600, shares[:, i] * scale, color=colour, label=result.name)
            ax.plot(x / 3600, fair[:, i] * scale, color=colour, linestyle="--")
    since = max(r.queues.since for r in measured if r.queues is not None)
    for ax, name in zip(flat, leaves, strict=False):
        ax.set_title(name, fontsize="small")
        ax.set_ylabel("% of cluster", fontsize="small")
        if since:  # where the time averages start (queues.measureFrom)
            ax.axvline(since / 3600, color="grey", linestyle=":", linewidth=1)
    last = flat[len(leaves)]
    last.set_title("Jain's index of share / fair share", fontsize="small")
    last.set_ylim(0, 1.05)
    for ax in flat[panels:]:
        ax.set_visible(False)
    legend(flat[0], fontsize="x-small", loc="upper right")
    fig.supxlabel("hours")
    fig.suptitle(
        "Each queue's share of the cluster over time (solid) against its fair share (dashed)",
        fontsize="medium",
    )
    return fig


def _leaves(result: RunResult) -> list[tuple[str, bool]]:
    tl = result.queues
    return [] if tl is None else list(zip(tl.queues, tl.leaves, strict=True))
