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


_WIDTHS = {INT32_MIN: 32, INT32_MAX: 32, INT64_MIN: 64, INT64_MAX: 64}


def _range(low: float | None, high: float | None, low_open: bool, value: float) -> str:
    """What is allowed, naming only the bound that matters: a field's own bounds, and the
    integer width only when the value is beyond it."""
    widths = _WIDTHS
    low_is_width = low in widths and isinstance(low, int)
    high_is_width = high in widths and isinstance(high, int)
    if low is not None and low == high:
        return _text(low)
    if low is not None and high is not None and not (low_open or high_is_width or low_is_width):
        return f"between {_text(low)} and {_text(high)}"
    if high is not None and value > high:
        width = f" (a {widths[high]}-bit integer)" if high_is_width else ""  # type: ignore[index]
        return f"at most {_text(high)}{width}"
    if low is None:
        return ""
    if low_open:
        return "positive" if low == 0 else f"greater than {_text(low)}"
    width = f" (a {widths[low]}-bit integer)" if low_is_width else ""  # type: ignore[index]
    return f"at least {_text(low)}{width}"


def _text(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def _of_type(kind: str, low: float | None, high: float | None, low_open: bool) -> str:
    """What a value of the wrong type (a bool, a string) was told: the type and the field's
    own bounds, as a value out of them is told (`between 1 and 100`, `at least 0`), whatever
    the field, so that every reader of a number says it alike."""
    own_low = None if low is None or (isinstance(low, int) and low in _WIDTHS) else low
    own_high = None if high is None or (isinstance(high, int) and high in _WIDTHS) else high
    if own_low is not None and own_low == own_high:
        return _text(own_low)
    if own_low is not None and own_high is not None and not low_open:
        return f"{kind} between {_text(own_low)} and {_text(own_high)}"
    if own_low is not None and low_open:
        if own_low == 0:
            return f"a positive {kind.split(' ', 1)[1]}"
        return f"{kind} greater than {_text(own_low)}"
    if own_low is not None:
        return f"{kind} of at least {_text(own_low)}"
    if own_high is not None:
        return f"{kind} of at most {_text(own_high)}"
    return kind


def integer(value: object, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    """An integer in [low, high] (Kubernetes' int64 by default)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise NumberError(f"must be {_of_type('an integer', low, high, False)}, got {shown(value)}")
    if not low <= value <= high:
        raise NumberError(f"must be {_range(low, high, False, value)}, got {shown(value)}")
    return value


def number(
    value: object,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> float:
    """A finite number in the range; `low_open` excludes `low` itself."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        allowed = _of_type("a number", low, high, low_open)
        raise NumberError(f"must be {allowed}, got {shown(value)}")
    try:
        result = float(value)
    except OverflowError:  # an integer beyond any float
        result = math.inf if value > 0 else -math.inf
    if not math.isfinite(result):
        raise NumberError(f"must be a finite number, got {shown(value)}")
    too_low = low is not None and (result <= low if low_open else result < low)
    if too_low or (high is not None and result > high):
        allowed = _range(low, high, low_open, result)
        if allowed == "positive":
            raise NumberError(f"must be a positive number, got {shown(value)}")
        raise NumberError(f"must be {allowed}, got {shown(value)}")
    return result
