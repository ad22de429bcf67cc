"""Victim-side preemption policy read from PriorityClass annotations
(docs/preemption-toleration.md).

Keys, under `preemption-toleration.scheduling.x-k8s.io/` (current upstream) or
`preemption-toleration.scheduling.sigs.k8s.io/` (the seeds; x-k8s.io wins when both exist):
- `minimum-preemptable-priority`: a preemptor needs at least this priority (default: the
  class's value + 1, i.e. plain Kubernetes behaviour);
- `toleration-seconds`: how long after the victim was scheduled it tolerates preemption by
  pods below the minimum (default 0, none; negative: forever).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from batchsched.objects.errors import shown
from batchsched.objects.numbers import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from batchsched.objects.records import Pod, PriorityClass

PREFIXES = (
    "preemption-toleration.scheduling.x-k8s.io/",
    "preemption-toleration.scheduling.sigs.k8s.io/",
)
MINIMUM_KEY = "minimum-preemptable-priority"
SECONDS_KEY = "toleration-seconds"
_INTEGER = re.compile(r"^[+-]?[0-9]+$")


@dataclass(frozen=True, slots=True)
class TolerationPolicy:
    minimum_preemptable_priority: int
    toleration_seconds: int  # 0: none, < 0: forever
    error: str = ""  # non-empty: the annotations could not be read; the class grants nothing

    @property
    def valid(self) -> bool:
        return not self.error


def _annotation(pc: PriorityClass, key: str) -> tuple[str, str] | None:
    for prefix in PREFIXES:
        value = pc.annotations.get(prefix + key)
        if value is not None:
            return prefix + key, value
    return None


def parse_policy(pc: PriorityClass) -> TolerationPolicy:
    """The class's policy; a malformed value yields a policy with `error` set."""
    minimum = pc.value + 1
    seconds = 0
    found = _annotation(pc, MINIMUM_KEY)
    if found is not None:
        key, raw = found
        if not _INTEGER.match(raw):
            return TolerationPolicy(minimum, 0, f"{key}: {shown(raw)} is not a base-10 integer")
        if len(raw.lstrip("+-")) > 19:
            return TolerationPolicy(
                minimum, 0, f"{key}: {shown(raw)} is outside the 32-bit integer range"
            )
        minimum = int(raw)
        if not INT32_MIN <= minimum <= INT32_MAX:
            return TolerationPolicy(
                pc.value + 1, 0, f"{key}: {raw} is outside the 32-bit integer range"
            )
    found = _annotation(pc, SECONDS_KEY)
    if found is not None:
        key, raw = found
        if not _INTEGER.match(raw):
            return TolerationPolicy(pc.value + 1, 0, f"{key}: {raw!r} is not a base-10 integer")
        # As upstream parses it (a 64-bit integer); the length test keeps int() cheap.
        if len(raw.lstrip("+-")) > 19 or not INT64_MIN <= int(raw) <= INT64_MAX:
            return TolerationPolicy(
                pc.value + 1, 0, f"{key}: {shown(raw)} is outside the 64-bit integer range"
            )
        seconds = int(raw)
    return TolerationPolicy(minimum, seconds)


class PolicyCache:
    """Parsed policies per PriorityClass version, so each problem is reported once."""

    def __init__(self) -> None:
        self._policies: dict[
            tuple[str, str, int, tuple[tuple[str, str], ...]], TolerationPolicy
        ] = {}

    def get(self, pc: PriorityClass) -> tuple[TolerationPolicy, bool]:
        """The policy, and whether this is the first time this version was seen."""
        version = (pc.name, pc.resource_version, pc.value, tuple(sorted(pc.annotations.items())))
        policy = self._policies.get(version)
        if policy is not None:
            return policy, False
        policy = parse_policy(pc)
        self._policies[version] = policy
        return policy, True


def scheduled_since(pod: Pod) -> datetime | None:
    """When the pod's PodScheduled condition became True, if it is True."""
    cond = pod.condition("PodScheduled")
    if cond is None or cond.status != "True":
        return None
    return cond.last_transition_time


def protected_until(
    victim: Pod, policy: TolerationPolicy, preemptor_priority: int
) -> datetime | None:
    """For a victim that tolerates the preemptor only for a time: when that time ends."""
    if not policy.valid or preemptor_priority >= policy.minimum_preemptable_priority:
        return None
    if policy.toleration_seconds <= 0:
        return None
    since = scheduled_since(victim)
    if since is None:
        return None
    return toleration_end(since, policy.toleration_seconds)


def toleration_end(since: datetime, seconds: int) -> datetime | None:
    """When a toleration of `seconds` from `since` ends; None when that is past any date a
    clock can show (e.g. `toleration-seconds: "315360000000"`, ten thousand years): for as
    long as anyone can measure, so as good as forever."""
    try:
        return since + timedelta(seconds=seconds)
    except OverflowError:
        return None


FOREVER = -1


def toleration_for(
    policy: TolerationPolicy | None, preemptor: Pod, preemptor_priority: int
) -> int | None:
    """How a victim of this class tolerates `preemptor`, before looking at the victim itself.

    None: not at all; FOREVER: always; n >= 0: for n seconds after the victim was scheduled
    (a victim not scheduled yet tolerates it). The caller handles a named class that is
    missing. Splitting the rule here lets callers evaluate it once per class and apply it to
    many victims at once.
    """
    if policy is None:
        return None
    if preemptor.preemption_policy == "Never":
        # Upstream's order: such a preemptor never preempts anyway; naming it here keeps the
        # rule total for callers that evaluate victims without checking eligibility first.
        return FOREVER
    if not policy.valid or preemptor_priority >= policy.minimum_preemptable_priority:
        return None
    return FOREVER if policy.toleration_seconds < 0 else policy.toleration_seconds


def is_exempt(
    victim: Pod,
    policy: TolerationPolicy | None,
    preemptor: Pod,
    preemptor_priority: int,
    now: datetime,
) -> bool:
    """Whether `victim` is exempt from preemption by `preemptor` at `now`
    (docs/preemption-toleration.md).

    `policy` is the victim's class's policy, or None when the victim names no class. A class
    that is named but missing is the caller's to handle (the node is skipped with an error).
    """
    return exempt_for(toleration_for(policy, preemptor, preemptor_priority), victim, now)


def exempt_for(toleration: int | None, victim: Pod, now: datetime) -> bool:
    """Apply a `toleration_for` verdict to one victim at `now` (expiry is strict)."""
    if toleration is None:
        return False
    if toleration == FOREVER:
        return True
    since = scheduled_since(victim)
    if since is None:
        return True
    end = toleration_end(since, toleration)
    return end is None or end > now
