"""Kubernetes resource quantities (`100m`, `4Gi`, `1.5`, `1e3`, `12k`).

CPU is held in millicores and everything else in integer base units, both rounded up, as the
API server rounds a quantity to the precision it stores. Amounts beyond a signed 64-bit integer
are refused, as the API server bounds them; the magnitude is judged from the digits and the
exponent before any arithmetic, so `1e99999999` costs no more than `1e9`.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from batchsched.objects.errors import shown

INT64_MAX = 2**63 - 1
# Beyond 10^25 no quantity fits in int64 (even in millicores), below 10^-30 any positive
# quantity rounds up to one unit; in between, at most _DIGITS significant digits are kept.
_MAX_MAGNITUDE, _MIN_MAGNITUDE, _DIGITS = 25, -30, 40
_SUFFIX_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_SUFFIX_EXPONENT["E"] = 18
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
# What scoring counts for a container that requests no cpu or memory (kube-scheduler's
# DefaultMilliCPURequest and DefaultMemoryRequest), so empty pods do not all pile on one node.
DEFAULT_CPU_REQUEST = 100  # millicores
DEFAULT_MEMORY_REQUEST = 200 * 2**20


class QuantityError(ValueError):
    pass


def parse_quantity(value: object) -> Fraction:
    """The value of a quantity written as a string or a number, exact unless it is beyond
    what any resource can hold (an error) or below 10^-30 (kept as 10^-30, so that it still
    rounds up to one unit)."""
    if isinstance(value, bool):
        raise QuantityError(f"{shown(value)} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{shown(value)} is not a quantity")
        value = repr(value)
    if not isinstance(value, str):
        raise QuantityError(f"{shown(value)} is not a quantity")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(
            f"{shown(value)} is not a quantity (expected e.g. 100m, 2, 1.5, 4Gi, 500M, 1e3)"
        )
    whole, _, fraction = match["num"].lstrip("+-").partition(".")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return Fraction(0)
    sign = -1 if match["num"].startswith("-") else 1
    exponent = -len(fraction) + _SUFFIX_EXPONENT.get(match["suffix"] or "", 0)
    if match["exp"]:
        written = match["exp"][1:].lstrip("+")
        if len(written.lstrip("-")) > 9:  # no arithmetic on an exponent of a billion digits
            written = "-999999999" if written.startswith("-") else "999999999"
        exponent += int(written)
    binary = _BINARY.get(match["suffix"] or "", 1)
    magnitude = len(digits) + exponent + (binary.bit_length() - 1) * 0.302
    if magnitude > _MAX_MAGNITUDE:
        raise QuantityError(
            f"{shown(value)} is too large (at most {INT64_MAX} base units, a signed 64-bit "
            "integer, as the API server allows)"
        )
    if magnitude < _MIN_MAGNITUDE:
        return sign * Fraction(1, 10**-_MIN_MAGNITUDE)
    if len(digits) > _DIGITS:
        # Drop digits nobody can mean, rounding up so that a later ceiling is unchanged.
        kept, dropped = digits[:_DIGITS], digits[_DIGITS:]
        digits = str(int(kept) + (1 if dropped.strip("0") else 0))
        exponent += len(dropped)
    return sign * Fraction(int(digits)) * Fraction(10) ** exponent * binary


def resource_amount(resource: str, value: object) -> int:
    """A quantity in the unit batchsched holds for this resource: millicores for CPU."""
    if isinstance(value, str):
        # The same few strings (`100m`, `500Mi`) recur in every pod of a big list.
        return _string_amount(resource, value)
    return _amount(resource, value)


@functools.lru_cache(maxsize=4096)
def _string_amount(resource: str, value: str) -> int:
    return _amount(resource, value)


def _amount(resource: str, value: object) -> int:
    exact = parse_quantity(value)
    if exact < 0:
        raise QuantityError(f"{shown(value)} is negative")
    if resource == CPU:
        exact *= 1000
    amount = math.ceil(exact)
    if amount > INT64_MAX:
        unit = "millicores" if resource == CPU else "base units"
        raise QuantityError(
            f"{shown(value)} is too large (at most {INT64_MAX} {unit}, a signed 64-bit integer)"
        )
    return amount


def format_amount(resource: str, amount: int) -> str:
    """A compact, readable quantity for messages and reports."""
    if resource == CPU:
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    if resource == MEMORY or resource.endswith("storage"):
        for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= factor and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)
