"""Semantic versions (semver.org 2.0.0), as DRA's `version` attributes and CEL `semver()` read
them: strict parsing (no `v` prefix, all of major, minor and patch, no leading zeros) and
precedence (build metadata ignored), as upstream's blang/semver does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = r"0|[1-9][0-9]*"
_IDENT = r"[0-9A-Za-z-]+"
_PATTERN = re.compile(
    rf"^(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?$"
)


class SemverError(ValueError):
    """Text that is not a semantic version."""


@dataclass(frozen=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...]

    def key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        """Orders versions by precedence: a release after its pre-releases; numeric
        pre-release identifiers before alphanumeric ones, numerically among themselves."""
        idents = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, idents)

    def text(self) -> str:
        """The version without build metadata: equal texts are equal versions."""
        core = f"{self.major}.{self.minor}.{self.patch}"
        return f"{core}-{'.'.join(self.pre)}" if self.pre else core


def parse_semver(text: str) -> Version:
    match = _PATTERN.match(text)
    if match is None:
        raise SemverError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH[-pre][+build])")
    pre = tuple(match["pre"].split(".")) if match["pre"] else ()
    for ident in pre:
        if ident.isdigit() and len(ident) > 1 and ident.startswith("0"):
            raise SemverError(f"{text!r}: pre-release number {ident} has a leading zero")
    return Version(int(match["major"]), int(match["minor"]), int(match["patch"]), pre)
