"""What every trace importer shares: its options and CSV reading with located errors."""

from __future__ import annotations

import csv
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from batchsched.objects.errors import shown
from batchsched.objects.numbers import INT32_MAX, NumberError, integer, number
from batchsched.objects.records import Node
from batchsched.sim.fields import (
    Fields,
    ScenarioError,
    positive_duration,
    positive_int,
    string,
)
from batchsched.sim.workload import MAX_DURATION, JobSpec, parse_duration

# Options of every format: which file, how many jobs, how the jobs behave when preempted,
# which column names each job's queue (docs/simulate.md#queues-many-tenants), and what each
# seed draws (docs/simulate.md#several-seeds-means-intervals-differences).
COMMON_OPTIONS = (
    "path",
    "limit",
    "checkpointInterval",
    "restartDelay",
    "namespace",
    "queueColumn",
    "queueNames",
    "sample",
    "jitter",
)


@dataclass(frozen=True)
class Trace:
    """An imported trace: jobs submitted from 0 (its first job), and the nodes it lists."""

    jobs: list[JobSpec]
    nodes: list[Node]
    origin: datetime | None = None  # when its first job came, if the trace has real dates
    per_seed: PerSeed | None = None  # None: every seed replays the same jobs

    def jobs_from(self, start: datetime) -> list[JobSpec]:
        """The jobs submitted at `start` or later, timed from `start` (a trace replayed from
        a later instant leaves the earlier jobs out); all of them, as they are, for a trace
        without dates."""
        if self.origin is None:
            return list(self.jobs)
        shift = (self.origin - start).total_seconds()
        shifted = [replace(job, submit=job.submit + shift) for job in self.jobs]
        return [job for job in shifted if job.submit >= 0]


@dataclass(frozen=True)
class PerSeed:
    """What each seed draws from a trace, which otherwise replays the same jobs on every seed:
    `sample`, the share of its jobs a seed keeps (each job kept with that probability), and
    `jitter`, how far each job's submission moves, a uniform draw in [-jitter, +jitter] (never
    before the clock's origin)."""

    sample: float
    jitter: float

    @classmethod
    def read(cls, options: Fields) -> PerSeed | None:
        sample = options.value("sample", share_of_jobs, 1.0)
        jitter = options.value("jitter", positive_duration, 0.0)
        return cls(sample, jitter) if sample < 1.0 or jitter > 0.0 else None

    def draw(self, jobs: list[JobSpec], rng: random.Random) -> list[JobSpec]:
        """A seed's jobs: drawn in the trace's order, so a seed always gives the same ones."""
        out = []
        for job in jobs:
            kept = rng.random() < self.sample
            shift = rng.uniform(-self.jitter, self.jitter) if self.jitter else 0.0
            if kept:
                out.append(replace(job, submit=max(0.0, job.submit + shift)) if shift else job)
        return out


def share_of_jobs(value: Any) -> float:
    """A share of a trace's jobs: above 0, at most 1."""
    share = number(value, 0.0, 1.0)
    if share <= 0.0:
        raise ValueError(f"must be above 0 (a share of the jobs, at most 1), got {shown(value)}")
    return share


@dataclass(frozen=True)
class TraceFormat:
    name: str
    options: tuple[str, ...]
    load: Callable[[Fields], Trace]


@dataclass(frozen=True)
class JobBehaviour:
    """The job fields a trace does not carry, from the scenario's trace options."""

    limit: int | None
    checkpoint_interval: float | None
    restart_delay: float
    namespace: str
    queues: QueueColumn

    @classmethod
    def read(cls, options: Fields) -> JobBehaviour:
        return cls(
            limit=options.value("limit", positive_int),
            checkpoint_interval=options.value("checkpointInterval", positive_duration),
            restart_delay=options.value("restartDelay", parse_duration, 0.0),
            namespace=options.value("namespace", string, "default"),
            queues=QueueColumn.read(options),
        )


@dataclass(frozen=True)
class QueueColumn:
    """Which column of the trace names each job's queue (`queueColumn`), and the queue each
    value stands for (`queueNames`; without it the value itself is the queue's name)."""

    options: Fields
    column: str | None
    names: dict[str, str] | None

    @classmethod
    def read(cls, options: Fields) -> QueueColumn:
        names = options.value("queueNames", name_table)
        column = options.value("queueColumn", string)
        if names is not None and column is None:
            raise options.fail("queueNames", "needs queueColumn: the column whose values it maps")
        return cls(options, column, names)

    def check(self, path: Path, header: list[str]) -> None:
        if self.column is not None and self.column not in header:
            raise self.options.fail(
                "queueColumn",
                f"no column {self.column!r} in {path} (its columns: {', '.join(header)})",
            )

    def queue(self, rows: CsvRows, row: dict[str, str]) -> str:
        """The job's queue ("" without `queueColumn`)."""
        if self.column is None:
            return ""
        value = row.get(self.column) or ""
        if self.names is None:
            if not value:
                raise rows.fail(self.column, "is empty: it names the job's queue (queueColumn)")
            return value
        if value not in self.names:
            raise self.options.fail(
                "queueNames",
                f"has no queue for {value!r} (column {self.column}, line {rows.line} of "
                f"{rows.path}); it maps {', '.join(sorted(self.names)) or 'nothing'}",
            )
        return self.names[value]


def name_table(value: Any) -> dict[str, str]:
    """A mapping of trace values to queue names."""
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str | int) and isinstance(v, str) and v for k, v in value.items()
    ):
        raise ValueError(f"must map the column's values to queue names, got {shown(value)}")
    return {str(k): v for k, v in value.items()}


class CsvRows:
    """Rows of a CSV file as dicts; errors name the file, the line and the column."""

    def __init__(
        self, path: Path, columns: tuple[str, ...], queues: QueueColumn | None = None
    ) -> None:
        self.path = path
        self.columns = columns
        self.queues = queues  # its column, if the scenario names one, must be there too
        self.line = 1

    def __iter__(self) -> Iterator[dict[str, str]]:
        try:
            with self.path.open(newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle)
                missing = [c for c in self.columns if c not in (reader.fieldnames or [])]
                if missing:
                    raise ScenarioError(
                        f"{self.path}: missing column(s) {', '.join(missing)} "
                        f"(expected {', '.join(self.columns)})"
                    )
                if self.queues is not None:
                    self.queues.check(self.path, list(reader.fieldnames or []))
                for row in reader:
                    self.line = reader.line_num
                    yield row
        except OSError as err:
            raise ScenarioError(f"{self.path}: cannot read: {err.strerror}") from None
        except UnicodeDecodeError:
            raise ScenarioError(f"{self.path}: not a UTF-8 CSV file") from None

    def fail(self, column: str, what: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: line {self.line}: {column}: {what}")

    def number(
        self, row: dict[str, str], column: str, convert: Callable[[str], Any] = float
    ) -> Any:
        raw = row.get(column) or ""
        try:
            value = convert(raw)
        except ValueError:
            raise self.fail(column, f"{shown(raw)} is not a number") from None
        try:  # not negative; a count within 32 bits; a time finite and at most a century
            if convert is int:
                return integer(value, 0, INT32_MAX)
            return number(value, 0.0, MAX_DURATION)
        except NumberError as err:
            raise self.fail(column, str(err)) from None
