"""`batchsched simulate`: run scenarios (and their variants, and configs) and compare them."""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from batchsched import __version__
from batchsched.commands import tables
from batchsched.commands.output import emit
from batchsched.config import SchedulerConfig, load_config
from batchsched.objects.load import StrictError
from batchsched.sim.aggregate import INTERVAL_LEGEND, Comparison, compare
from batchsched.sim.aggregate import rows as comparison_rows
from batchsched.sim.engine import ProgressHook, Simulation
from batchsched.sim.fields import ScenarioError
from batchsched.sim.metrics import RunResult, run_summary
from batchsched.sim.queue_report import QUEUE_HEAD, queue_rows
from batchsched.sim.ray_runs import run_on_ray
from batchsched.sim.report import (
    BACKFILL_HEAD,
    SIZE_HEAD,
    size_rows,
    summary_rows,
    write_reports,
)
from batchsched.sim.scenario import Scenario, Variant, load_scenario
from batchsched.sim.stats import few_seeds
from batchsched.sim.workload import format_duration

PROGRESS_AFTER_SECONDS = 1.0


@dataclass(frozen=True)
class Run:
    name: str
    scenario: Scenario
    variant: Variant
    config: SchedulerConfig


def plan(
    scenario_paths: list[Path], config_paths: list[Path], traces: Path | None = None
) -> list[Run]:
    """Every scenario x variant x config, validated before anything runs."""
    runs: list[Run] = []
    configs = {p: load_config(p) for p in config_paths}
    scenarios = [load_scenario(path, traces) for path in scenario_paths]
    for scenario in scenarios:
        for variant in scenario.variants:
            chosen: list[Path | None] = list(config_paths) or [variant.config or scenario.config]
            for config_path in chosen:
                config = configs.get(config_path) if config_path else None
                if config is None:
                    config = load_config(config_path)
                # Name a run by what sets it apart from the others in this comparison.
                parts = [scenario.name] if len(scenarios) > 1 or not variant.name else []
                if variant.name:
                    parts.append(variant.name)
                if len(chosen) > 1 and config_path is not None:
                    parts.append(config_path.stem)
                runs.append(Run("/".join(parts), scenario, variant, config))
    names = [r.name for r in runs]
    for name in names:
        if names.count(name) > 1:
            raise ScenarioError(
                f"two runs would both be called {name!r}: give scenarios distinct names"
            )
    return runs


def simulate(run: Run, seed: int | None, until: float | None, console: Console | None) -> RunResult:
    scenario = run.scenario
    chosen_seed = scenario.seed if seed is None else seed
    jobs = [job.with_class(run.variant.classes) for job in scenario.jobs(chosen_seed)]
    horizon = until if until is not None else scenario.until
    sim = Simulation(
        run.name,
        scenario.nodes,
        scenario.priority_classes,
        jobs,
        run.config,
        scenario.start,
        seed=chosen_seed,
        until=horizon,
        storage=scenario.storage,
        devices=scenario.devices,
        queues=scenario.queue_tree(jobs),
        queues_on=run.variant.queues,
    )
    total = horizon if horizon is not None else max((j.submit for j in jobs), default=0.0)
    with _progress(console, run.name, total) as hook:
        result = sim.run(hook)
    if result.queues is not None and scenario.queues is not None:
        result.queues.since = scenario.queues.measure_from
    return result


@contextmanager
def _progress(console: Console | None, name: str, total: float) -> Iterator[ProgressHook | None]:
    """A progress bar over virtual time, shown only on a terminal once a run takes a while."""
    if console is None or not console.is_terminal:
        yield None
        return
    began = time.perf_counter()
    bar: Progress | None = None
    task = None
    steps = 0

    def hook(t: float) -> None:
        nonlocal bar, task, steps
        steps += 1
        if steps % 64:
            return
        if bar is None:
            if time.perf_counter() - began < PROGRESS_AFTER_SECONDS:
                return
            bar = Progress(
                TextColumn(f"[bold]{name}"),
                BarColumn(),
                TextColumn("{task.fields[virtual]} simulated"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            bar.start()
            task = bar.add_task(name, total=max(total, 1.0), virtual="0s")
        assert task is not None
        bar.update(task, completed=min(t, total), virtual=format_duration(t))

    try:
        yield hook
    finally:
        if bar is not None:
            bar.stop()


def comparison_text(results: list[RunResult]) -> str:
    run_head, runs, class_head, classes = summary_rows(results)
    sections = [("RUNS", run_head, runs, 1), ("PER PRIORITY CLASS", class_head, classes, 2)]
    per_size, backfill = size_rows(results)
    if per_size:  # GPU jobs: waits per size and what reservations did (docs/backfill.md)
        sections += [
            ("PER JOB SIZE", SIZE_HEAD, per_size, 2),
            ("RESERVATIONS", BACKFILL_HEAD, backfill, 1),
        ]
    lines: list[str] = []
    for title, head, rows, keep in sections:
        lines.append(title)
        lines.extend(tables.table(head, rows, keep=keep))
        lines.append("")
    queue_title, queue_body = queue_rows(results)
    if queue_body:
        lines.append(queue_title)
        lines.extend(tables.table(QUEUE_HEAD, queue_body, keep=2))
        lines.append("")
    for result in results:
        for warning in summarise_warnings(result.warnings):
            lines.extend(tables.wrap(f"warning: {result.name}: {warning}", indent="  "))
    return "\n".join(lines).rstrip() + "\n"


def summarise_warnings(warnings: list[str], names: int = 3) -> list[str]:
    """Warnings alike but for their object and numbers, folded into one line each: the count,
    the first message, and the first few objects (a long trace warns about many groups)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for warning in warnings:
        obj, _, message = warning.partition(": ")
        groups.setdefault(_DIGITS.sub("N", message), []).append((obj, message))
    out = []
    for alike in groups.values():
        if len(alike) == 1:
            out.append(f"{alike[0][0]}: {alike[0][1]}")
            continue
        shown = ", ".join(obj for obj, _ in alike[:names])
        more = f" and {len(alike) - names} more" if len(alike) > names else ""
        out.append(f"{len(alike)} objects ({shown}{more}), e.g.: {alike[0][1]}")
    return out


_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Plan:
    """What `batchsched simulate` was asked, as recorded in the report."""

    scenarios: tuple[Path, ...]
    configs: tuple[Path, ...]
    until: float | None
    traces: Path | None = None

    def runs(self) -> list[Run]:
        found = _PLANS.get(self)
        if found is None:
            found = _PLANS[self] = plan(list(self.scenarios), list(self.configs), self.traces)
        return found


_PLANS: dict[Plan, list[Run]] = {}  # per process: a worker plans once, then runs many seeds


def seeds_of(run: Run, seed: int | None, count: int | None) -> list[int]:
    """The seeds a run runs on: `count` (or the scenario's `seeds`) from `seed` (or its own)."""
    first = run.scenario.seed if seed is None else seed
    return list(range(first, first + (count or run.scenario.seeds)))


def _run_task(task: tuple[Plan, int, int]) -> RunResult:
    """One run on one seed, in a worker process (or in this one)."""
    what, index, seed = task
    return simulate(what.runs()[index], seed, what.until, None)


def _run_planned(planned: tuple[list[Run], float | None], index: int, seed: int) -> RunResult:
    """One run on one seed, as a Ray task: the runs come planned, not as files to read."""
    runs, until = planned
    return simulate(runs[index], seed, until, None)


def run_all(
    what: Plan,
    tasks: list[tuple[int, int]],
    jobs: int,
    console: Console | None,
    ray: str | None = None,
) -> list[RunResult]:
    """Every (run index, seed) task: as Ray tasks at the address `ray`, else in parallel
    worker processes when there are several."""
    runs = what.runs()
    if ray is not None:
        return run_on_ray(ray, (runs, what.until), tasks, _run_planned, console, jobs)
    workers = min(jobs, len(tasks))
    if workers <= 1:
        return [simulate(runs[i], seed, what.until, console) for i, seed in tasks]
    # Fresh worker processes (not fork): forking a process that has threads (a progress bar,
    # a test's fake API server) can leave a child stuck on a lock copied while held.
    context = multiprocessing.get_context("forkserver" if sys.platform == "linux" else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return list(pool.map(_run_task, [(what, i, seed) for i, seed in tasks]))


def main(
    scenario_paths: list[Path],
    config_paths: list[Path],
    seed: int | None,
    until: float | None,
    report: Path | None,
    output: str = "text",
    strict: bool = False,
    seeds: int | None = None,
    jobs: int | None = None,
    traces: Path | None = None,
    ray: str | None = None,
) -> int:
    console = Console(stderr=True)  # progress only: results go to stdout
    what = Plan(tuple(scenario_paths), tuple(config_paths), until, traces)
    runs = what.runs()
    warnings = list(dict.fromkeys(w for run in runs for w in run.scenario.warnings))
    if strict and warnings:
        raise StrictError(warnings)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    per_run = [seeds_of(run, seed, seeds) for run in runs]
    same_work = all(run.scenario.same_work for run in runs)
    caveat = few_seeds(min(len(s) for s in per_run), len(runs), same_work)
    if caveat:
        print(f"warning: {caveat}", file=sys.stderr)
    tasks = [(i, s) for i, run_seeds in enumerate(per_run) for s in run_seeds]
    results = run_all(what, tasks, jobs or os.cpu_count() or 1, console, ray)
    by_run: dict[str, list[RunResult]] = {run.name: [] for run in runs}
    for (i, _), result in zip(tasks, results, strict=True):
        by_run[runs[i].name].append(result)
    comparison = compare(by_run) if max(len(s) for s in per_run) > 1 else None
    meta = {
        "version": __version__,
        "scenarios": [str(p) for p in scenario_paths],
        "configs": [str(p) for p in config_paths],
        "runs": [
            {
                "name": run.name,
                "scenario": str(run.scenario.path),
                "variant": run.variant.name,
                "seeds": run_seeds,
            }
            for run, run_seeds in zip(runs, per_run, strict=True)
        ],
        "until": until,
        "caveat": caveat,
    }
    written = write_reports(report, results, meta, comparison) if report is not None else []

    def text() -> str:
        body = (
            comparison_text(results)
            if comparison is None
            else seeds_text(comparison, [w for r in results for w in r.warnings])
        )
        return body + "".join(f"wrote {path}\n" for path in written)

    data = {
        "meta": meta,
        "runs": [run_summary(r) for r in results],
        "comparison": comparison.to_json() if comparison is not None else None,
        "reports": [str(p) for p in written],
    }
    emit(data, output, text)
    return 0


def seeds_text(comparison: Comparison, warnings: list[str]) -> str:
    seeds = {len(v) for v in comparison.seeds.values()}
    lines = [f"COMPARISON OVER {'/'.join(str(n) for n in sorted(seeds))} SEEDS"]
    lines.extend(
        tables.wrap(
            f"  {INTERVAL_LEGEND}; the difference columns are paired by seed against "
            f"{comparison.runs[0]}, * where the difference's interval excludes zero",
            indent="  ",
        )
    )
    # Beyond two runs, names as column headers would not fit 100 columns: number them.
    numbered = len(comparison.runs) > 2
    if numbered:
        lines.extend(f"  ({i}) {run}" for i, run in enumerate(comparison.runs, 1))
    head, body = comparison_rows(comparison, numbered)
    lines.extend(tables.table(head, body))
    lines.append("")
    for warning in summarise_warnings(list(dict.fromkeys(warnings))):
        lines.extend(tables.wrap(f"warning: {warning}", indent="  "))
    return "\n".join(lines).rstrip() + "\n"
