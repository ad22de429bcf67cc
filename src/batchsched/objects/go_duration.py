"""Go duration strings (`15s`, `1m30s`, `500ms`), as Kubernetes objects and configs write them."""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def go_duration_seconds(raw: str) -> float | None:
    """The seconds a Go duration string stands for; None when it is not one ("0" is 0)."""
    if raw == "0":
        return 0.0
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match[1]) * _UNIT_SECONDS[match[2]]
        pos = match.end()
    return total if raw and pos == len(raw) else None


def format_go_duration(seconds: float) -> str:
    """`seconds` as Go writes a duration, to the second (`90` -> `1m30s`, `600` -> `10m`)."""
    whole = round(seconds)
    if whole <= 0:
        return "0s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts)
