"""A pod's stated maximum runtime, which reservations plan with (docs/backfill.md).

In order: `spec.activeDeadlineSeconds` (the kubelet enforces it), else the label
`kueue.x-k8s.io/max-exec-time-seconds` (integer seconds), else the annotation
`batchsched.io/max-runtime` (a duration such as `90m`, `2h`, `3600s` or `1h30m`) on the pod
or, for a member without one, on its PodGroup. A running pod is expected to end at
`status.startTime` plus its bound; a pod without a bound never, for planning.
"""

from __future__ import annotations

import re

from batchsched.objects.records import Pod, PodGroup

KUEUE_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
RUNTIME_ANNOTATION = "batchsched.io/max-runtime"
# A year: longer bounds plan nothing useful and would overflow datetime arithmetic sooner.
MAX_BOUND_SECONDS = 366 * 24 * 3600

_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:[0-9]+[hms])+")
_PART = re.compile(r"([0-9]+)([hms])")


class BoundError(ValueError):
    """A stated runtime that is not one; the message says what is allowed."""


def duration_seconds(text: str) -> int:
    """`90m`, `2h`, `3600s`, `1h30m` in seconds: positive, at most MAX_BOUND_SECONDS."""
    if not _DURATION.fullmatch(text):
        raise BoundError(
            f"{text!r} is not a duration: whole numbers with units h, m or s "
            "(e.g. 90m, 2h, 3600s, 1h30m)"
        )
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _PART.findall(text))
    return _in_range(seconds, text)


def label_seconds(text: str) -> int:
    """The Kueue label's value: a positive integer number of seconds."""
    if not (text.isascii() and text.isdigit()):  # str.isdigit alone takes "٣" (3)
        raise BoundError(f"{text!r} is not a whole number of seconds (e.g. 3600)")
    return _in_range(int(text), text)


def _in_range(seconds: int, text: str) -> int:
    if seconds <= 0:
        raise BoundError(f"{text!r} must be more than 0 seconds")
    if seconds > MAX_BOUND_SECONDS:
        raise BoundError(f"{text!r} is more than {MAX_BOUND_SECONDS} seconds (366 days)")
    return seconds


def planned_as_none(error: str) -> tuple[str, str]:
    """A bad stated runtime of a running pod or of a PodGroup (its `runtime_error`, naming
    the object and the field) as a warning: the object, and what is wrong with it. Nothing
    keeps such a pod pending to say so; it is planned as stating no runtime."""
    obj, _, what = error.partition(": ")
    return obj, f"{what}; planned as stating no runtime"


def stated_runtime(pod: Pod, group: PodGroup | None) -> int | None:
    """The pod's bound in seconds, else its PodGroup's; None if neither states one."""
    if pod.max_runtime_seconds is not None:
        return pod.max_runtime_seconds
    return None if group is None else group.max_runtime_seconds
