"""The one reader of numeric fields, for manifests, KubeSchedulerConfiguration and scenarios.

A number from a file is finite, of the right type and within the field's range, or it is an
error saying what is allowed; the caller adds the file, object and field. Kubernetes' integer
fields are int32 or int64, so those are the default ranges: a value beyond them would
otherwise reach NumPy arrays and arithmetic that silently wrap or raise.
"""

from __future__ import annotations

import math

from batchsched.objects.errors import shown

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class NumberError(ValueError):
    """A numeric field's value is not allowed; the message says what is."""


def _allowed(kind: str, low: float | None, high: float | None, low_open: bool) -> str:
    if low is not None and high is not None and not low_open:
        return f"{kind} between {_text(low)} and {_text(high)}"
    bounds = []
    if low is not None:
        bounds.append(f"{'greater than' if low_open else 'at least'} {_text(low)}")
    if high is not None:
        bounds.append(f"at most {_text(high)}")
    return " ".join([kind, " and ".join(bounds)]).strip()


def _text(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def integer(value: object, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    """An integer in [low, high] (Kubernetes' int64 by default)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        allowed = _allowed("an integer", low, high, False)
        width = {(INT32_MIN, INT32_MAX): 32, (INT64_MIN, INT64_MAX): 64}.get((low, high))
        if width:
            allowed = f"a {width}-bit integer ({low} to {high})"
        raise NumberError(f"must be {allowed}, got {shown(value)}")
    return value


def number(
    value: object,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> float:
    """A finite number in the range; `low_open` excludes `low` itself."""
    allowed = _allowed("a number", low, high, low_open)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NumberError(f"must be {allowed}, got {shown(value)}")
    try:
        result = float(value)
    except OverflowError:  # an integer beyond any float
        raise NumberError(f"must be {allowed}, got {shown(value)}") from None
    if not math.isfinite(result):
        raise NumberError(f"must be a finite number, got {shown(value)}")
    too_low = low is not None and (result <= low if low_open else result < low)
    if too_low or (high is not None and result > high):
        raise NumberError(f"must be {allowed}, got {shown(value)}")
    return result
