"""One decision dispatcher: each world registers what it does with each kind of decision.

A pass's decisions are data (docs/architecture.md); the worlds carry them out their own way
(one-shot: a report; simulate: the in-memory cluster; run: API writes). Each registers a
handler per decision type here and hands over every decision in order; a decision it
registered nothing for is not its business (e.g. a Nominate the scheduler already keeps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from batchsched.decisions import Decision

D = TypeVar("D", bound=Decision)


class Dispatcher:
    def __init__(self) -> None:
        self._handlers: dict[type[Any], list[Callable[[Any], object]]] = {}

    def on(self, kind: type[D], handler: Callable[[D], object]) -> None:
        """Call `handler` with every decision of type `kind`, after the handlers registered
        for it before."""
        self._handlers.setdefault(kind, []).append(handler)

    def dispatch(self, decisions: Iterable[Decision]) -> None:
        handlers = self._handlers
        for decision in decisions:
            for handler in handlers.get(type(decision), ()):
                handler(decision)
