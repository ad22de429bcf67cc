"""Reading the simulator's input files: typed fields with errors naming the file and field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from batchsched.objects.errors import InputError, shown
from batchsched.objects.numbers import INT32_MAX, integer, number
from batchsched.sim.distributions import Distribution, DistributionError, parse_distribution
from batchsched.sim.workload import parse_duration

REQUIRED: Any = object()


class ScenarioError(InputError):
    pass


class Fields:
    """One mapping of a scenario file; `where` is its path (`work.generators[0]`)."""

    def __init__(
        self,
        source: Path,
        raw: Any,
        where: str,
        allowed: tuple[str, ...],
        search: tuple[tuple[str, Path], ...] = (),
    ) -> None:
        self.source = source
        self.where = where
        self.search = search  # where else `file` looks, each with how it was named
        if not isinstance(raw, Mapping):
            raise self.fail("", f"must be a mapping, got {shown(raw)}")
        unknown = sorted(str(k) for k in raw if k not in allowed)
        if unknown:
            name = unknown[0] if len(unknown[0]) <= 60 else f"{unknown[0][:57]}..."
            raise self.fail(name, f"unknown field (allowed: {', '.join(allowed)})")
        self.raw: Mapping[str, Any] = raw

    def path(self, key: str) -> str:
        if self.where and key:
            return f"{self.where}.{key}"
        return self.where or key

    def fail(self, key: str, what: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: {self.path(key)}: {what}")

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def value(self, key: str, convert: Callable[[Any], Any], default: Any = None) -> Any:
        raw = self.raw.get(key)
        if raw is None:
            if default is REQUIRED:
                raise self.fail(key, "is required")
            return default
        try:
            return convert(raw)
        except ValueError as err:  # NumberError and QuantityError included
            raise self.fail(key, str(err)) from None

    def dist(
        self, key: str, convert: Callable[[Any], Any], default: Any = REQUIRED, numeric: bool = True
    ) -> Distribution[Any]:
        raw = self.raw.get(key)
        if raw is None:
            if default is REQUIRED:
                raise self.fail(key, "is required")
            return Distribution(lambda _rng: default)
        try:
            return parse_distribution(raw, convert, numeric)
        except DistributionError as err:
            raise self.fail(key, str(err)) from None

    def items(self, key: str) -> list[Any]:
        raw = self.raw.get(key)
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise self.fail(key, "must be a list")
        return raw

    def file(self, key: str) -> Path:
        """An existing file: relative to the scenario file, else to each `search` directory."""
        name = Path(self.value(key, string, REQUIRED))
        places = [("the scenario's folder", self.source.parent), *self.search]
        tried = []
        for label, folder in places:
            path = folder / name
            try:
                found = path.is_file()
            except OSError as err:  # e.g. a name longer than the file system allows
                raise self.fail(key, f"cannot read {shown(str(path))}: {err.strerror}") from None
            if found:
                return path
            tried.append(f"{shown(str(path))} ({label})")
            if name.is_absolute():
                break
        raise self.fail(key, f"no such file; looked for {'; '.join(tried)}")


# Things a scenario makes: nodes of a pool, pods of a job, jobs of a generator.
MAX_COUNT = 100_000


def string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a non-empty string, got {shown(value)}")
    return value


def class_name(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a PriorityClass name, got {shown(value)}")
    return value


def positive_int(value: Any) -> int:
    """A count from 1 to MAX_COUNT; a draw from a continuous distribution is rounded."""
    if isinstance(value, float):
        value = max(1, round(number(value, 0.0, MAX_COUNT)))
    return integer(value, 1, MAX_COUNT)


def non_negative_int(value: Any) -> int:
    return integer(value, 0, INT32_MAX)


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {shown(value)}")
    return value


def positive_number(value: Any) -> float:
    return number(value, 0.0, low_open=True)


def positive_duration(value: Any) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError("must be a positive duration")
    return seconds


def class_table(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(c, str) for k, c in value.items()
    ):
        raise ValueError(f"must map names to PriorityClass names, got {shown(value)}")
    return dict(value)
