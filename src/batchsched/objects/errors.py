"""Errors for bad input: each names where the problem is and what is allowed."""

from __future__ import annotations

import reprlib


class InputError(Exception):
    """Invalid user input (manifest, annotation, configuration). Never a bug in batchsched.

    The message is capped in length: it may quote input, and input can be huge.
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(capped(message))


class ManifestError(InputError):
    """A manifest field is missing or malformed.

    The message reads `FILE: Kind namespace/name: field: what is wrong`, so an administrator can
    go straight to the object and the field.
    """

    def __init__(self, what: str, *, obj: str = "", field: str = "", source: str = "") -> None:
        self.what = what
        self.obj = obj
        self.field = field
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [p for p in (self.source, self.obj, self.field) if p]
        return ": ".join([*parts, self.what])

    def located(self, source: str) -> ManifestError:
        """The same error, with the file (or API path) it came from."""
        return ManifestError(self.what, obj=self.obj, field=self.field, source=source)


def unreadable_message(why: str) -> str:
    """Why the pods of an object that exists but cannot be read wait (a PodGroup's members, a
    Queue's pods), `why` naming its field and what is allowed (docs/input-limits.md#live-mode)."""
    return f"cannot be read: {why}; waiting for it to be fixed"


MAX_VALUE_CHARS = 60
MAX_MESSAGE_CHARS = 1000
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxdict, _SHOWN.maxlist = 2, 3, 3
_SHOWN.maxstring, _SHOWN.maxlong, _SHOWN.maxother = MAX_VALUE_CHARS, 30, 30


def shown(value: object) -> str:
    """A value as an error message quotes it: its repr, abbreviated so that a huge or deeply
    nested value (e.g. one expanded from YAML aliases) costs a few lines, not megabytes."""
    return _SHOWN.repr(value)


def capped(message: str) -> str:
    """A message cut to MAX_MESSAGE_CHARS, saying how much was left out."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    cut = MAX_MESSAGE_CHARS - 40
    return f"{message[:cut]}... ({len(message) - cut} more characters)"
