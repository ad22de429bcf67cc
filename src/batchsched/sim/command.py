"""`batchsched simulate`: run scenarios (and their variants, and configs) and compare them."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from batchsched.config import SchedulerConfig, load_config
from batchsched.objects.load import StrictError
from batchsched.sim.engine import ProgressHook, Simulation
from batchsched.sim.fields import ScenarioError
from batchsched.sim.metrics import RunResult
from batchsched.sim.report import summary_rows, write_reports
from batchsched.sim.scenario import Scenario, Variant, load_scenario
from batchsched.sim.workload import format_duration

PROGRESS_AFTER_SECONDS = 1.0


@dataclass(frozen=True)
class Run:
    name: str
    scenario: Scenario
    variant: Variant
    config: SchedulerConfig


def plan(scenario_paths: list[Path], config_paths: list[Path]) -> list[Run]:
    """Every scenario x variant x config, validated before anything runs."""
    runs: list[Run] = []
    configs = {p: load_config(p) for p in config_paths}
    scenarios = [load_scenario(path) for path in scenario_paths]
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
    )
    total = horizon if horizon is not None else max((j.submit for j in jobs), default=0.0)
    with _progress(console, run.name, total) as hook:
        return sim.run(hook)


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


def print_comparison(console: Console, results: list[RunResult]) -> None:
    run_head, runs, class_head, classes = summary_rows(results)
    for title, head, rows in (
        ("Runs", run_head, runs),
        ("Per priority class", class_head, classes),
    ):
        table = Table(title=title, title_justify="left")
        for i, column in enumerate(head):
            table.add_column(column, justify="left" if i < 2 else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    for result in results:
        for warning in result.warnings:
            console.print(f"warning: {result.name}: {warning}")


def main(
    scenario_paths: list[Path],
    config_paths: list[Path],
    seed: int | None,
    until: float | None,
    report: Path | None,
    strict: bool = False,
) -> int:
    console = Console(width=None if sys.stdout.isatty() else 160)
    runs = plan(scenario_paths, config_paths)
    warnings = list(dict.fromkeys(w for run in runs for w in run.scenario.warnings))
    if strict and warnings:
        raise StrictError(warnings)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    results = [simulate(run, seed, until, console) for run in runs]
    print_comparison(console, results)
    if report is not None:
        for path in write_reports(report, results):
            console.print(f"wrote {path}")
    return 0
