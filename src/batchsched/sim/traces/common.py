"""What every trace importer shares: its options and CSV reading with located errors."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
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

# Options of every format: which file, how many jobs, and how the jobs behave when preempted.
COMMON_OPTIONS = ("path", "limit", "checkpointInterval", "restartDelay", "namespace")


@dataclass(frozen=True)
class Trace:
    """An imported trace: jobs submitted from 0 (its first job), and the nodes it lists."""

    jobs: list[JobSpec]
    nodes: list[Node]
    origin: datetime | None = None  # when its first job came, if the trace has real dates

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

    @classmethod
    def read(cls, options: Fields) -> JobBehaviour:
        return cls(
            limit=options.value("limit", positive_int),
            checkpoint_interval=options.value("checkpointInterval", positive_duration),
            restart_delay=options.value("restartDelay", parse_duration, 0.0),
            namespace=options.value("namespace", string, "default"),
        )


class CsvRows:
    """Rows of a CSV file as dicts; errors name the file, the line and the column."""

    def __init__(self, path: Path, columns: tuple[str, ...]) -> None:
        self.path = path
        self.columns = columns
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
