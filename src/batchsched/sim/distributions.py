"""Random values for workload generators: constants, uniform, exponential, lognormal, choice.

A distribution is written as a plain value (a constant) or a one-key mapping:
`{uniform: [30m, 2h]}`, `{exponential: 1h}` (mean), `{lognormal: {median: 1h, sigma: 0.8}}`,
`{choice: {8: 3, 4: 1}}` (value: weight) or `{choice: [low, high]}` (equal weights).
Every draw comes from the run's seeded generator, so a seed fixes the workload.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from batchsched.objects.errors import shown
from batchsched.objects.numbers import NumberError, number

T = TypeVar("T")
Convert = Callable[[Any], T]

KINDS = ("uniform", "exponential", "lognormal", "choice")
# Beyond this a lognormal's draws overflow a float before any field could use them.
_MAX_SIGMA = 10.0


class DistributionError(ValueError):
    pass


@dataclass(frozen=True)
class Distribution(Generic[T]):
    draw: Callable[[random.Random], T]


def parse_distribution(raw: Any, convert: Convert[T], numeric: bool) -> Distribution[T]:
    """Read a distribution; `convert` turns a written value into the field's type."""
    if not isinstance(raw, Mapping):
        value = _convert(convert, raw)
        return Distribution(lambda _rng: value)
    if len(raw) != 1 or next(iter(raw)) not in KINDS:
        raise DistributionError(f"must be a value or one of {{{', '.join(KINDS)}: ...}}")
    kind, args = next(iter(raw.items()))
    if kind == "choice":
        return _choice(args, convert)
    if not numeric:
        raise DistributionError(f"{kind} needs numbers; use choice for this field")
    if kind == "uniform":
        if not isinstance(args, list) or len(args) != 2:
            raise DistributionError("uniform: must be [low, high]")
        lo, hi = _number(convert, args[0]), _number(convert, args[1])
        if hi < lo:
            raise DistributionError("uniform: high must be at least low")
        return _numeric(lambda rng: rng.uniform(lo, hi), convert)
    if kind == "exponential":
        mean = _number(convert, args)
        if mean <= 0:
            raise DistributionError("exponential: the mean must be positive")
        return _numeric(lambda rng: rng.expovariate(1.0 / mean), convert)
    if not isinstance(args, Mapping) or set(args) != {"median", "sigma"}:
        raise DistributionError("lognormal: must be {median: ..., sigma: ...}")
    median = _number(convert, args["median"])
    try:
        sigma = number(args["sigma"], 0.0, _MAX_SIGMA)
    except NumberError as err:
        raise DistributionError(f"lognormal: sigma {err}") from None
    if median <= 0:
        raise DistributionError("lognormal: median must be positive")
    mu = math.log(median)
    return _numeric(lambda rng: rng.lognormvariate(mu, sigma), convert)


def _numeric(sample: Callable[[random.Random], float], convert: Convert[T]) -> Distribution[T]:
    return Distribution(lambda rng: convert(sample(rng)))


def _choice(args: Any, convert: Convert[T]) -> Distribution[T]:
    if isinstance(args, list) and args:
        options = [(_convert(convert, v), 1.0) for v in args]
    elif isinstance(args, Mapping) and args:
        options = []
        for value, weight in args.items():
            try:
                options.append((_convert(convert, value), number(weight, 0.0, low_open=True)))
            except NumberError as err:
                raise DistributionError(f"choice: weight of {shown(value)} {err}") from None
    else:
        raise DistributionError("choice: must be a non-empty list or {value: weight} mapping")
    values = [v for v, _ in options]
    weights = [w for _, w in options]
    return Distribution(lambda rng: rng.choices(values, weights)[0])


def _number(convert: Convert[T], raw: Any) -> float:
    """A bound of a numeric distribution, written as the field's values are (e.g. `30m`)."""
    value: Any = _convert(convert, raw)
    return float(value)


def _convert(convert: Convert[T], raw: Any) -> T:
    try:
        return convert(raw)
    except (ValueError, TypeError) as err:
        raise DistributionError(str(err)) from None
