"""Device selectors in CEL, as DRA evaluates them; the one module that knows the CEL library.

The library is `common-expression-language` (Rust bindings): measured at ~50 µs per
evaluation against ~950 µs for the pure-Python `cel-python` (docs/dra.md). Each expression is
compiled once. A device is seen as upstream's `device` variable: `driver`, `attributes` and
`capacity` (maps from domain to maps from name to value), with Kubernetes' `quantity()` and
its comparison methods on capacities.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from batchsched.objects.dra import milli_quantity
from batchsched.objects.quantity import QuantityError


class CelError(Exception):
    """A selector that does not compile, or fails or yields no bool on a device."""


def _quantity(text: str) -> int:
    try:
        return milli_quantity(str(text))
    except QuantityError as err:
        raise ValueError(f"quantity({text!r}): {err}") from None


def _compare(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _context(device: Mapping[str, Any]) -> Any:
    import cel  # deferred, as in Selector

    context = cel.Context()
    context.add_function("quantity", _quantity)
    context.add_function("compareTo", _compare)
    context.add_function("isGreaterThan", lambda a, b: a > b)
    context.add_function("isLessThan", lambda a, b: a < b)
    context.add_variable("device", device)
    return context


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

    def matches(self, device: Mapping[str, Any]) -> bool:
        """Whether the device satisfies the expression; CelError if evaluation fails."""
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
