"""`simulate --ray`: the runs as Ray tasks, on a Ray cluster or one started here
(docs/simulate.md#sweeps-on-ray).

The planned runs (scenarios read, traces imported, workloads' sources) go to the cluster once,
through Ray's object store, so its nodes need neither the scenario files nor the traces; each
task runs one (run, seed) exactly as a local worker would, so the numbers are the same. Ray is
an optional dependency (`pip install 'batchsched[ray]'`), imported only here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import batchsched
from batchsched.objects.errors import InputError

RAY_VERSION = "2.60.0"  # the version pyproject.toml's `ray` extra pins
INSTALL = f"pip install 'batchsched[ray]' (Ray {RAY_VERSION})"
LOCAL = "local"  # --ray local: start a Ray instance on this machine for this command

R = TypeVar("R")
S = TypeVar("S")
Task = tuple[int, int]  # (run index, seed)


class RayUnavailable(InputError):
    pass


def _ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RayUnavailable(f"--ray needs Ray, which is not installed: {INSTALL}") from None


def run_on_ray(
    address: str,
    planned: S,
    tasks: list[Task],
    one: Callable[[S, int, int], R],
    console: Console | None,
    cpus: int | None = None,
) -> list[R]:
    """`one(planned, index, seed)` for every task, as Ray tasks (`planned` goes to the
    cluster once); results in the tasks' order, counted on a progress bar (on a terminal) as
    they come back."""
    ray = _ray()
    with _connected(ray, address, cpus):
        shared = ray.put(planned)
        remote = ray.remote(one)
        pending = {remote.remote(shared, index, seed): k for k, (index, seed) in enumerate(tasks)}
        results: dict[int, R] = {}
        with _progress(console, len(tasks)) as advance:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    results[pending.pop(ref)] = ray.get(ref)
                    advance()
    return [results[k] for k in range(len(tasks))]


@contextmanager
def _connected(ray: Any, address: str, cpus: int | None) -> Iterator[None]:
    """Connected to the Ray cluster at `address` (`local`: a new instance here), shut down
    after. A remote cluster gets this batchsched's own code (runtime_env py_modules), so its
    tasks run the very version that planned them."""
    options: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
    if address == LOCAL:
        if cpus is not None:
            options["num_cpus"] = cpus
    else:
        options["address"] = address
        options["runtime_env"] = {"py_modules": [str(Path(batchsched.__file__).parent)]}
    try:
        ray.init(**options)
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = "a local Ray instance" if address == LOCAL else f"Ray at {address!r}"
        raise RayUnavailable(f"--ray: cannot start or reach {where}: {err}") from None
    try:
        yield
    finally:
        ray.shutdown()


@contextmanager
def _progress(console: Console | None, total: int) -> Iterator[Callable[[], None]]:
    if console is None or not console.is_terminal:
        yield lambda: None
        return
    bar = Progress(
        TextColumn("[bold]Ray"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task("runs", total=total)
    with bar:
        yield lambda: bar.advance(task)
