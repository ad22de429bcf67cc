"""Kubernetes resource quantities (`100m`, `4Gi`, `1.5`, `1e3`, `12k`).

CPU is held in millicores and everything else in integer base units, both rounded up, as the
API server rounds a quantity to the precision it stores.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
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
    """The exact value of a quantity written as a string or a number."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(
            f"{value!r} is not a quantity (expected e.g. 100m, 2, 1.5, 4Gi, 500M, 1e3)"
        )
    number = Fraction(match["num"])
    if match["exp"]:
        return number * Fraction(10) ** int(match["exp"][1:])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


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
        raise QuantityError(f"{value!r} is negative")
    if resource == CPU:
        exact *= 1000
    return math.ceil(exact)


def format_amount(resource: str, amount: int) -> str:
    """A compact, readable quantity for messages and reports."""
    if resource == CPU:
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    if resource == MEMORY or resource.endswith("storage"):
        for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= factor and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)
