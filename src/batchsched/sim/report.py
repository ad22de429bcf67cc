"""Run results as files: summary.json, jobs.csv and report.html (one self-contained page)."""

from __future__ import annotations

import base64
import csv
import html
import io
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from batchsched.sim.aggregate import INTERVAL_LEGEND, Comparison, verdicts
from batchsched.sim.aggregate import rows as comparison_rows
from batchsched.sim.metrics import LARGE, SIZE_CLASSES, RunResult, gpu_resource, run_summary
from batchsched.sim.plotting import legend
from batchsched.sim.queue_report import QUEUE_HEAD, queue_rows, share_plot
from batchsched.sim.stats import binned

PLOT_BINS = 400


def write_reports(
    directory: Path,
    results: list[RunResult],
    meta: dict[str, Any],
    comparison: Comparison | None = None,
) -> list[Path]:
    """summary.json (what was run: scenarios, seeds, variants, version; every run on every
    seed; the comparison over seeds), jobs.csv and report.html."""
    directory.mkdir(parents=True, exist_ok=True)
    summary = directory / "summary.json"
    summary.write_bytes(
        orjson.dumps(
            {
                "meta": meta,
                "runs": [run_summary(r) for r in results],
                "comparison": comparison.to_json() if comparison is not None else None,
            },
            option=orjson.OPT_INDENT_2,
        )
    )
    jobs = directory / "jobs.csv"
    write_jobs_csv(jobs, results)
    page = directory / "report.html"
    page.write_text(render_html(results, meta, comparison), encoding="utf-8")
    return [summary, jobs, page]


JOB_COLUMNS = (
    "run",
    "seed",
    "job",
    "class",
    "workload_class",
    "queue",
    "pods",
    "gpus",
    "gang",
    "submit_s",
    "start_s",
    "end_s",
    "wait_s",
    "completion_s",
    "preemptions",
    "no_progress_preemptions",
    "lost_gpu_hours",
    "volume_bindings",
    "device_allocations",
)


def write_jobs_csv(path: Path, results: list[RunResult]) -> None:
    def cell(value: float | None) -> str:
        return "" if value is None else f"{value:.3f}"

    with path.open("w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(JOB_COLUMNS)
        for result in results:
            for job in result.jobs:
                out.writerow(
                    [
                        result.name,
                        result.seed,
                        job.name,
                        job.priority_class,
                        job.group,
                        job.queue,
                        job.pods,
                        f"{job.gpus:g}",
                        int(job.gang),
                        cell(job.submit),
                        cell(job.start),
                        cell(job.end),
                        cell(job.wait),
                        cell(job.completion),
                        job.preemptions,
                        job.no_progress_preemptions,
                        f"{job.lost_gpu_seconds / 3600:.4f}",
                        _bindings_cell(job.volume_bindings),
                        _devices_cell(job.device_allocations),
                    ]
                )


def _bindings_cell(bindings: dict[str, str]) -> str:
    """`claim=pv` pairs by claim, `;`-separated; a claim left to a provisioner shows no PV."""
    return ";".join(f"{claim}={volume}" for claim, volume in sorted(bindings.items()))


def _devices_cell(allocations: dict[str, tuple[str, ...]]) -> str:
    """`claim=driver/pool/device ...` by claim, `;`-separated."""
    return ";".join(
        f"{claim}={' '.join(devices)}" for claim, devices in sorted(allocations.items())
    )


# ---- plots -------------------------------------------------------------------------------


def _figure_png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plots(results: list[RunResult]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots: list[tuple[str, str]] = []
    resources = sorted(  # those some run's nodes have: the others would plot nothing
        {r for res in results for r in res.timeline.resources if res.capacity.get(r)},
        key=lambda r: (r != gpu_resource([r]), r),
    )
    fig, axes = plt.subplots(
        len(resources), 1, figsize=(10, 2.4 * len(resources)), squeeze=False, layout="constrained"
    )
    for ax, resource in zip(axes[:, 0], resources, strict=True):
        for result in results:
            tl = result.timeline
            if resource not in tl.resources or not result.capacity.get(resource):
                continue
            col = tl.resources.index(resource)
            used = np.asarray(tl.used, dtype=np.float64).reshape(len(tl.times), -1)[:, [col]]
            x, y = binned(tl.times, used, result.end_time, PLOT_BINS)
            ax.plot(x / 3600, 100 * y[:, 0] / result.capacity[resource], label=result.name)
        ax.set_ylabel(f"{resource} %")
        ax.set_ylim(0, 105)
        legend(ax, fontsize="small", loc="lower right")
    axes[-1, 0].set_xlabel("hours")
    fig.suptitle("Utilisation (allocated share of allocatable)")
    plots.append(("Utilisation over time", _figure_png(fig)))
    plt.close(fig)

    fig, axes = plt.subplots(
        len(results), 1, figsize=(10, 2.4 * len(results)), squeeze=False, layout="constrained"
    )
    for ax, result in zip(axes[:, 0], results, strict=True):
        tl = result.timeline
        pending = np.asarray(tl.pending, dtype=np.float64).reshape(len(tl.times), -1)
        x, y = binned(tl.times, pending, result.end_time, PLOT_BINS)
        for i, cls in enumerate(tl.classes):
            ax.plot(x / 3600, y[:, i], label=cls)
        ax.set_title(result.name, fontsize="medium")
        ax.set_ylabel("pending pods")
        legend(ax, fontsize="small", loc="upper right")
    axes[-1, 0].set_xlabel("hours")
    plots.append(("Pending pods over time, per priority class", _figure_png(fig)))
    plt.close(fig)

    classes = sorted({j.group for r in results for j in r.jobs})
    fig = wait_cdf(results, classes)
    plots.append(("Wait-time CDF per priority class", _figure_png(fig)))
    plt.close(fig)

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2), layout="constrained")
    width = 0.8 / max(1, len(results))
    positions = np.arange(len(classes))
    for i, result in enumerate(results):
        mine = [[j for j in result.jobs if j.group == c] for c in classes]
        preemptions = [sum(j.preemptions for j in jobs) for jobs in mine]
        no_progress = [sum(j.no_progress_preemptions for j in jobs) for jobs in mine]
        lost = [sum(j.lost_gpu_seconds for j in jobs) / 3600 for jobs in mine]
        bars = left.bar(positions + i * width, preemptions, width, label=result.name)
        left.bar(
            positions + i * width,
            no_progress,
            width,
            color=bars.patches[0].get_facecolor() if bars.patches else None,
            hatch="//",
            edgecolor="black",
            label=f"{result.name}: no-progress preemptions",
        )
        right.bar(positions + i * width, lost, width, label=result.name)
    titles = (
        (left, "preemptions (hatched: no-progress preemptions)"),
        (right, "lost GPU-hours"),
    )
    for ax, title in titles:
        ax.set_xticks(positions + width * (len(results) - 1) / 2, classes)
        ax.set_title(title, fontsize="medium")
        legend(ax, fontsize="small")
    plots.append(("Preemptions and lost work, per priority class", _figure_png(fig)))
    plt.close(fig)

    shares = share_plot(results, PLOT_BINS)
    if shares is not None:
        plots.append(("Each queue's share over time against its fair share", _figure_png(shares)))
        plt.close(shares)
    return plots


# Tick marks of the wait axis, in minutes, with words for labels (matplotlib's own on a symlog
# axis read `-2.83×10^-2` when every wait is under a minute): a decade or so apart on the log
# part, quarter minutes on the linear part when no wait reaches a minute.
WAIT_TICKS = (
    (0.0, "0"),
    (1.0, "1 min"),
    (10.0, "10 min"),
    (60.0, "1 h"),
    (600.0, "10 h"),
    (1440.0, "1 d"),
    (10080.0, "1 w"),
    (43200.0, "30 d"),
)
SHORT_WAIT_TICKS = ((0.0, "0"), (0.25, "15 s"), (0.5, "30 s"), (0.75, "45 s"), (1.0, "1 min"))


def _wait_ticks(longest: float) -> list[tuple[float, str]]:
    """The ticks up to the longest wait, and the first beyond it, which closes the axis."""
    ticks = SHORT_WAIT_TICKS if longest < 1.0 else WAIT_TICKS
    return [t for t in ticks if t[0] <= longest] + [t for t in ticks if t[0] > longest][:1]


def wait_cdf(results: list[RunResult], classes: list[str]) -> Any:
    """Per class, the share of started jobs that waited at most x, each run a step line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, axes = plt.subplots(
        1, len(classes), figsize=(4 * len(classes), 3.2), squeeze=False, layout="constrained"
    )
    for ax, cls in zip(axes[0], classes, strict=True):
        longest = 0.0
        for result in results:
            waits = np.sort(
                [w / 60 for j in result.jobs if j.group == cls and (w := j.wait) is not None]
            )
            if waits.size:
                longest = max(longest, float(waits[-1]))
                ax.step(
                    waits,
                    np.arange(1, waits.size + 1) / waits.size,
                    where="post",
                    label=result.name,
                )
        ax.set_title(cls, fontsize="medium")
        # Waits span seconds to days: a log axis (linear below a minute, where 0 lives).
        ax.set_xscale("symlog", linthresh=1.0)
        shown = _wait_ticks(longest)
        ax.set_xticks([t for t, _ in shown], [label for _, label in shown])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(0, shown[-1][0])
        ax.set_xlabel("wait (log scale above 1 minute)")
        ax.set_ylim(0, 1.02)
        legend(ax, fontsize="small", loc="lower right")
    axes[0, 0].set_ylabel("share of started jobs")
    return fig


def _error_bars(comparison: Comparison) -> tuple[str, str]:
    """Every metric's mean per run with its 95% interval, one small panel per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in comparison.metrics if any(comparison.means[m].values())]
    cols = 3
    rows = (len(metrics) + cols - 1) // cols
    fig, axes = plt.subplots(
        rows, cols, figsize=(11, 2.2 * rows), squeeze=False, layout="constrained"
    )
    runs = comparison.runs
    for ax, metric in zip(axes.flat, metrics, strict=False):
        for i, run in enumerate(runs):
            found = comparison.means[metric][run]
            if found is None:
                continue
            ax.errorbar(
                [i],
                [found.mean],
                yerr=[[found.mean - found.low], [found.high - found.mean]],
                fmt="o",
                capsize=4,
                label=run,
            )
        ax.set_title(metric, fontsize="small")
        ax.set_xticks(range(len(runs)), [str(i + 1) for i in range(len(runs))])
        ax.set_xlim(-0.5, len(runs) - 0.5)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    numbered = ", ".join(f"{i + 1}: {run}" for i, run in enumerate(runs))
    fig.suptitle(f"Mean and 95% interval over seeds ({numbered})", fontsize="medium")
    png = _figure_png(fig)
    plt.close(fig)
    return "Every metric over seeds, with 95% confidence intervals", png


# ---- page --------------------------------------------------------------------------------


def _fmt(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "–" if value is None else f"{value / scale:.{digits}f}"


def summary_rows(
    results: list[RunResult],
) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """The comparison as text cells: per run, then per (class, run). Shared by HTML and terminal."""
    run_head = [
        "run",
        "jobs finished / submitted",
        "GPU util %",
        "CPU util %",
        "preemptions",
        "no-progress preemptions",
        "lost GPU-hours",
        "gang start delay p95 (min)",
        "max pending pods",
    ]
    runs = []
    summaries = [run_summary(result) for result in results]
    topology = any("topology" in s["cluster"] for s in summaries)
    if topology:  # runs with topology gangs (docs/simulate.md#topology)
        run_head += ["gang domains mean / max", "gangs in one domain"]
    for result, s in zip(results, summaries, strict=True):
        util = s["cluster"]["utilisation"]
        gpu = gpu_resource(list(util))
        runs.append(
            [
                result.name,
                f"{s['jobs']['finished']}/{s['jobs']['submitted']}",
                _fmt(util[gpu] * 100 if gpu else None),
                _fmt(util["cpu"] * 100 if util.get("cpu") is not None else None),
                str(s["preemptions"]),
                str(s["no_progress_preemptions"]),
                _fmt(s["lost_gpu_hours"]),
                _fmt(s["cluster"]["gang_start_delay_seconds"]["p95"], 60),
                str(s["cluster"]["pending_pods_max"]),
            ]
        )
        if topology:
            runs[-1] += _topology_cells(s["cluster"].get("topology"))
    class_head = [
        "class",
        "run",
        "jobs finished / submitted",
        "wait p50 (min)",
        "wait p95 (min)",
        "wait p99 (min)",
        "completion p50 (h)",
        "preemptions",
        "no-progress preemptions",
        "lost GPU-hours",
    ]
    per_class: dict[str, list[list[str]]] = {}
    for result in results:
        for cls, c in run_summary(result)["classes"].items():
            per_class.setdefault(cls, []).append(
                [
                    cls,
                    result.name,
                    f"{c['finished']}/{c['submitted']}",
                    _fmt(c["wait_seconds"]["p50"], 60),
                    _fmt(c["wait_seconds"]["p95"], 60),
                    _fmt(c["wait_seconds"]["p99"], 60),
                    _fmt(c["completion_seconds"]["p50"], 3600, 2),
                    str(c["preemptions"]),
                    str(c["no_progress_preemptions"]),
                    _fmt(c["lost_gpu_hours"]),
                ]
            )
    classes = [row for cls in sorted(per_class) for row in per_class[cls]]
    return run_head, runs, class_head, classes


SIZE_HEAD = [
    "size",
    "run",
    "jobs started",
    "wait mean (min)",
    "wait p50 (min)",
    "wait p95 (min)",
    "wait p99 (min)",
]
BACKFILL_HEAD = [
    "run",
    "backfilled jobs",
    "reserved jobs",
    "broken promises evicted",
    "reservation start error mean (min)",
]


def size_rows(results: list[RunResult]) -> tuple[list[list[str]], list[list[str]]]:
    """Per (job size, run) the waits, and per run what reservations did
    (docs/backfill.md#simulator): the figures the comparison over seeds gives, for one seed.
    Empty when no run had GPU jobs."""
    summaries = [(result.name, run_summary(result)["backfill"]) for result in results]
    sizes = [
        size
        for size in (*SIZE_CLASSES, LARGE)
        if any(b["jobs_by_size"].get(size) for _, b in summaries)
    ]
    if not sizes:
        return [], []
    per_size = []
    for size in sizes:
        for name, b in summaries:
            waits = b["wait_seconds_by_size"][size]
            per_size.append(
                [size, name, str(b["jobs_by_size"][size])]
                + [_fmt(waits[q], 60) for q in ("mean", "p50", "p95", "p99")]
            )
    backfill = [
        [
            name,
            str(b["backfilled_jobs"]),
            str(b["reserved_jobs"]),
            str(b["broken_promises_evicted"]),
            _fmt(b["start_error_abs_seconds"]["mean"], 60),
        ]
        for name, b in summaries
    ]
    return per_size, backfill


def _topology_cells(found: dict[str, Any] | None) -> list[str]:
    if found is None:
        return ["–", "–"]
    spanned = found["domains_spanned"]
    return [
        f"{_fmt(spanned['mean'], digits=2)} / {spanned['max']:.0f}",
        f"{found['starts_in_one_domain']}/{found['starts']}",
    ]


def _table(head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _verdict(comparison: Comparison | None, caveat: str) -> str:
    """The page's opening: a paragraph per compared metric (the runs against the first, over
    seeds), after what makes them weak (too few seeds), if anything."""
    paragraphs = [f"<strong>Warning:</strong> {html.escape(caveat)}."] if caveat else []
    if comparison is not None and len(comparison.runs) > 1:
        paragraphs += [html.escape(p) for p in verdicts(comparison)]
    if not paragraphs:
        return ""
    return "<h2>Verdict</h2>" + "".join(f"<p>{p}</p>" for p in paragraphs)


def render_html(
    results: list[RunResult], meta: dict[str, Any], comparison: Comparison | None = None
) -> str:
    # Over several seeds, time series and tables show the first seed; the comparison all.
    first = {r["name"]: r["seeds"][0] for r in meta["runs"]}
    shown = [r for r in results if first.get(r.name, r.seed) == r.seed]
    run_head, runs, class_head, classes = summary_rows(shown)
    single = "" if comparison is None else " (first seed)"
    per_size, backfill = size_rows(shown)
    by_size = (
        f"<h2>Per job size{single}</h2>{_table(SIZE_HEAD, per_size)}"
        f"<h2>Reservations{single}</h2>{_table(BACKFILL_HEAD, backfill)}"
        if per_size
        else ""
    )
    plots = _plots(shown)
    if comparison is not None:
        plots.insert(0, _error_bars(comparison))
    figures = "".join(
        f"<h2>{html.escape(title)}</h2>"
        f'<img alt="{html.escape(title)}" src="data:image/png;base64,{png}">'
        for title, png in plots
    )
    warnings = sorted({w for r in results for w in r.warnings})
    warning_list = (
        "<h2>Warnings</h2><ul>" + "".join(f"<li>{html.escape(w)}</li>" for w in warnings) + "</ul>"
        if warnings
        else ""
    )
    recorded = _table(
        ["run", "scenario", "variant", "seeds"],
        [
            [r["name"], r["scenario"], r["variant"] or "–", ", ".join(map(str, r["seeds"]))]
            for r in meta["runs"]
        ],
    )
    configs = ", ".join(meta["configs"]) or "the scenarios' own (or the default profile)"
    over_seeds = ""
    if comparison is not None:
        head, body = comparison_rows(comparison)
        over_seeds = (
            f"<h2>Over seeds</h2><p>{html.escape(INTERVAL_LEGEND.capitalize())} (Student's t); "
            f"differences are paired by seed against {html.escape(comparison.runs[0])}, * where "
            "the interval excludes zero.</p>" + _table(head, body)
        )
    queue_title, queue_body = queue_rows(shown)
    per_queue = (
        f"<h2>{html.escape(queue_title.capitalize())}{single}</h2>" + _table(QUEUE_HEAD, queue_body)
        if queue_body
        else ""
    )
    verdict = _verdict(comparison, meta.get("caveat") or "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>batchsched simulation report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 75em; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }}
th:first-child, td:first-child, td:nth-child(2) {{ text-align: left; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>batchsched simulation report</h1>
<p>batchsched {html.escape(meta["version"])}; configs: {html.escape(configs)}.</p>
{verdict}
{recorded}
<p>Times are virtual: seconds after each scenario's start. Waits run from a job's submission to
the first moment its work ran (a gang: minMember pods bound); lost GPU-hours are work done since
the job's last checkpoint when it was preempted; no-progress preemptions are preemptions of a run
that had saved no checkpoint yet (all of that run's work was lost).</p>
{over_seeds}
<h2>Runs{single}</h2>{_table(run_head, runs)}
<h2>Per priority class{single}</h2>{_table(class_head, classes)}
{by_size}
{per_queue}
{figures}
{warning_list}
</body></html>
"""
