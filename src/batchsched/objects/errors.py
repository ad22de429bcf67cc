"""Errors for bad input: each names where the problem is and what is allowed."""

from __future__ import annotations


class InputError(Exception):
    """Invalid user input (manifest, annotation, configuration). Never a bug in batchsched."""


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
