"""Device selectors in CEL, as DRA evaluates them; the one module that knows the CEL library.

The library is `common-expression-language` (Rust bindings): measured at ~50 µs per
evaluation against ~950 µs for the pure-Python `cel-python` (docs/dra.md). Each expression is
compiled once. A device is seen as upstream's `device` variable: `driver`, `attributes` and
`capacity` (maps from domain to maps from name to value). Kubernetes' CEL libraries that DRA's
environment has are added as functions: quantities (`quantity`, `isQuantity`, `compareTo`,
`isLessThan`, `isGreaterThan`, `add`, `sub`, `sign`, `isInteger`, `asInteger`,
`asApproximateFloat`) and semantic versions (`semver`, `isSemver`, `compareTo`,
`isLessThan`, `isGreaterThan`, `major`, `minor`, `patch`). The library has no custom types,
so both travel as tagged maps (objects/cel_values.py); a function given the wrong kind of
value fails, as a missing overload does upstream.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from batchsched.objects.cel_values import QUANTITY, SEMVER, quantity_value, semver_value
from batchsched.objects.dra import milli_quantity
from batchsched.objects.quantity import QuantityError
from batchsched.objects.semver import SemverError, Version, parse_semver


class CelError(Exception):
    """A selector that does not compile, or fails or yields no bool on a device."""


def _maker(
    function: str, parse: Callable[[str], Any], error: type[Exception]
) -> tuple[Callable[[object], Any], Callable[[object], bool]]:
    """`quantity`/`semver` (the parsed value, or an error naming the text) and
    `isQuantity`/`isSemver` (whether the text parses) for one parser."""

    def make(text: object) -> Any:
        try:
            return parse(_string(function, text))
        except error as err:
            raise ValueError(f"{function}({text!r}): {err}") from None

    def valid(text: object) -> bool:
        try:
            parse(_string(function, text))
        except error:
            return False
        return True

    return make, valid


_quantity, _is_quantity = _maker(
    "quantity", lambda t: quantity_value(milli_quantity(t)), QuantityError
)
_semver, _is_semver = _maker("semver", lambda t: semver_value(parse_semver(t)), SemverError)


def _string(function: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{function}() takes a string, not {type(value).__name__}")
    return value


def _milli(function: str, value: object) -> int:
    if isinstance(value, Mapping) and QUANTITY in value:
        return int(value[QUANTITY])
    raise TypeError(f"{function}() applies to quantities")


def _version(function: str, value: object) -> Version:
    if isinstance(value, Mapping) and SEMVER in value:
        return parse_semver(str(value[SEMVER]))
    raise TypeError(f"{function}() applies to semver values")


def _order(function: str, a: object, b: object) -> int:
    """-1, 0 or 1: two quantities, or two semantic versions, compared."""
    if isinstance(a, Mapping) and SEMVER in a:
        x, y = _version(function, a).key(), _version(function, b).key()
        return (x > y) - (x < y)
    m, n = _milli(function, a), _milli(function, b)
    return (m > n) - (m < n)


def _plus(function: str, sign: int) -> Callable[[object, object], dict[str, Any]]:
    def apply(q: object, other: object) -> dict[str, Any]:
        if isinstance(other, int) and not isinstance(other, bool):
            amount = other * 1000  # an integer operand counts whole units
        else:
            amount = _milli(function, other)
        return quantity_value(_milli(function, q) + sign * amount)

    return apply


def _sign(q: object) -> int:
    milli = _milli("sign", q)
    return (milli > 0) - (milli < 0)


def _as_integer(q: object) -> int:
    milli = _milli("asInteger", q)
    if milli % 1000:
        raise ValueError("asInteger(): the quantity is not an integer")
    return milli // 1000


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": lambda a, b: _order("compareTo", a, b),
    "isLessThan": lambda a, b: _order("isLessThan", a, b) < 0,
    "isGreaterThan": lambda a, b: _order("isGreaterThan", a, b) > 0,
    "add": _plus("add", 1),
    "sub": _plus("sub", -1),
    "sign": _sign,
    "isInteger": lambda q: _milli("isInteger", q) % 1000 == 0,
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: _milli("asApproximateFloat", q) / 1000,
    "major": lambda v: _version("major", v).major,
    "minor": lambda v: _version("minor", v).minor,
    "patch": lambda v: _version("patch", v).patch,
}


def _context(device: Mapping[str, Any]) -> Any:
    import cel  # deferred, as in Selector

    context = cel.Context()
    for name, function in _FUNCTIONS.items():
        context.add_function(name, function)
    context.add_variable("device", device)
    return context


# `attributes["domain"]` or `capacity['domain']` in an expression: a domain looked up by name.
_DOMAIN_LOOKUP = re.compile(
    r"""\b(?P<map>attributes|capacity)\s*\[\s*(?P<domain>"[^"\\]*"|'[^'\\]*')\s*\]"""
)


class Selector:
    """One compiled CEL selector expression."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        # Imported here, not at the top: the library's package also loads a REPL
        # (prompt_toolkit, rich), a quarter of a second that every `batchsched run` would pay
        # before its first binding, though most clusters have no device selectors.
        import cel

        try:
            self._program = cel.compile(expression)
        except Exception as err:  # the library raises several types for syntax errors
            raise CelError(f"does not compile: {err}") from None
        self._domains = {(m["map"], m["domain"][1:-1]) for m in _DOMAIN_LOOKUP.finditer(expression)}

    def matches(self, device: Mapping[str, Any]) -> bool:
        """Whether the device satisfies the expression; CelError if evaluation fails."""
        missing = [(k, d) for k, d in self._domains if d not in device[k]]
        if missing:
            # Upstream's maps answer an unknown domain with an empty map (so
            # `has(device.attributes["other.example.com"].x)` is false, not an error); this
            # library's maps cannot, so the domains the expression names are filled in.
            device = {**device}
            for k, d in missing:
                device[k] = {**device[k], d: {}}
        try:
            result = self._program.execute(_context(device))
        except Exception as err:
            raise CelError(f"failed on this device: {err}") from None
        if not isinstance(result, bool):
            raise CelError(f"yields {type(result).__name__}, not bool")
        return result


@functools.cache
def compile_selector(expression: str) -> Selector:
    """The compiled selector for an expression; compiled once per process."""
    return Selector(expression)
