"""Reading the simulator's input files: typed fields with errors naming the file and field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from batchsched.objects.errors import InputError
from batchsched.objects.quantity import QuantityError
from batchsched.sim.distributions import Distribution, DistributionError, parse_distribution
from batchsched.sim.workload import parse_duration

REQUIRED: Any = object()


class ScenarioError(InputError):
    pass


class Fields:
    """One mapping of a scenario file; `where` is its path (`work.generators[0]`)."""

    def __init__(self, source: Path, raw: Any, where: str, allowed: tuple[str, ...]) -> None:
        self.source = source
        self.where = where
        if not isinstance(raw, Mapping):
            raise self.fail("", f"must be a mapping, got {raw!r}")
        unknown = sorted(str(k) for k in raw if k not in allowed)
        if unknown:
            raise self.fail(unknown[0], f"unknown field (allowed: {', '.join(allowed)})")
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
        except (ValueError, TypeError, QuantityError) as err:
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
        """A path relative to the scenario file; it must exist."""
        path: Path = self.source.parent / self.value(key, string, REQUIRED)
        if not path.is_file():
            raise self.fail(key, f"no such file: {path}")
        return path


def string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"must be a non-empty string, got {value!r}")
    return value


def class_name(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a PriorityClass name, got {value!r}")
    return value


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1:
        raise ValueError(f"must be a whole number >= 1, got {value!r}")
    if isinstance(value, float):
        return max(1, round(value))  # a draw from a continuous distribution
    return value


def non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"must be a whole number >= 0, got {value!r}")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"must be a positive number, got {value!r}")
    return float(value)


def positive_duration(value: Any) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError("must be a positive duration")
    return seconds


def class_table(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(c, str) for k, c in value.items()
    ):
        raise ValueError(f"must map names to PriorityClass names, got {value!r}")
    return dict(value)
