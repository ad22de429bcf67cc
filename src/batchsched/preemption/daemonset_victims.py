"""Choosing victims on a DaemonSet pod's node (docs/daemonset.md).

Candidates are the node's running pods minus the protected ones (DaemonSet pods, pods of
higher priority than the DaemonSet pod, pods exempt under section 3's toleration rules, pods
whose PriorityClass is missing). They fall into classes, tried in order, each fully before the
next: regular pods, owner pods (named by other pods in an ownerReference, e.g. a Spark driver),
opt-out pods (`yunikorn.apache.org/allow-preemption: "false"`). Within the classes allowed so
far the configured strategies run in order:

- `single`: one pod of the newest class whose removal makes room and whose request deviates
  from the DaemonSet pod's by at most the configured percentage in every resource either pod
  requests (a resource only one of them requests deviates without bound), closest first;
- `multiple`: walk the candidates in victim order, taking pods until the pod fits, then
  reprieve (most important first) every pod not needed; at most `max_victims` pods.

A member of a running PodGroup is a candidate only if every running member of its group could
be a victim too; choosing it evicts the whole group (docs/gang.md: no gang is partially
evicted). Room and `max_victims` count the pods on this node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from batchsched.decisions import Warn
from batchsched.objects.daemonset import daemonset_node
from batchsched.objects.parse import format_time
from batchsched.objects.records import Pod
from batchsched.preemption.gang_victims import running_members
from batchsched.preemption.toleration_policy import (
    PolicyCache,
    TolerationPolicy,
    is_exempt,
    protected_until,
    scheduled_since,
)
from batchsched.state.cluster import ClusterState

OPT_OUT_KEY = "yunikorn.apache.org/allow-preemption"
CLASSES = ("regular", "owner", "opt-out")
SINGLE, MULTIPLE = "single", "multiple"
STRATEGIES = (SINGLE, MULTIPLE)

Resources = Mapping[str, int]
# Whether the DaemonSet pod still clashes (host port, anti-affinity) with the node's pods once
# the keyed pods are gone (the filter's `still_fails` on its node).
Clash = Callable[[Collection[str]], bool]


@dataclass(frozen=True, slots=True)
class VictimSettings:
    strategies: tuple[str, ...] = (SINGLE, MULTIPLE)
    deviation_percent: int = 10
    max_victims: int = 5


@dataclass(frozen=True, slots=True)
class Candidate:
    pod: Pod
    klass: int  # index into CLASSES
    order: tuple[object, ...]  # victim order within the class: evict first sorts first


@dataclass(slots=True)
class Selection:
    """Victims chosen, or why there are none; problems found with PriorityClasses on the way."""

    victims: list[Pod] = field(default_factory=list)
    why_none: str = ""
    warnings: list[Warn] = field(default_factory=list)
    # When the first time-limited toleration that protected a pod ends (seconds since the
    # epoch; inf: none did): the choice may differ from then on.
    protection_ends: float = math.inf


def victim_class(state: ClusterState, pod: Pod) -> int:
    """0 regular, 1 owner, 2 opt-out (the most protective class a pod qualifies for wins)."""
    pc = state.policy.priority_classes.get(pod.priority_class_name)
    if (
        pod.labels.get(OPT_OUT_KEY) == "false"
        or pod.annotations.get(OPT_OUT_KEY) == "false"
        or (pc is not None and pc.annotations.get(OPT_OUT_KEY) == "false")
    ):
        return 2
    return 1 if state.pods.is_owner(pod) else 0


def _started(pod: Pod) -> datetime | None:
    return pod.start_time or scheduled_since(pod) or pod.creation_timestamp


def _size(pod: Pod, preemptor: Pod, allocatable: Resources) -> float:
    """The victim's share of the node in the resources the preemptor needs."""
    return sum(
        pod.requests.get(name, 0) / allocatable[name]
        for name in preemptor.requests
        if allocatable.get(name, 0) > 0
    )


def victim_order(pod: Pod, preemptor: Pod, allocatable: Resources) -> tuple[object, ...]:
    """Lower priority first, then younger first (unknown age counts as youngest), then the
    larger request first, then name."""
    started = _started(pod)
    age_key = (0, 0.0) if started is None else (1, -started.timestamp())
    return (pod.priority or 0, *age_key, -_size(pod, preemptor, allocatable), pod.key)


def deviation_percent(victim: Pod, preemptor: Pod) -> float:
    """The largest relative difference between the two requests, in percent."""
    worst = 0.0
    for name in set(victim.requests) | set(preemptor.requests):
        want = preemptor.requests.get(name, 0)
        have = victim.requests.get(name, 0)
        if want == 0:
            if have:
                return math.inf
            continue
        worst = max(worst, abs(have - want) * 100 / want)
    return worst


def fits(room: Resources, need: Resources) -> bool:
    return all(room.get(name, 0) >= amount for name, amount in need.items())


def room_with(room: Resources, pods: list[Pod]) -> dict[str, int]:
    out = dict(room)
    for pod in pods:
        for name, amount in pod.requests.items():
            out[name] = out.get(name, 0) + amount
    return out


def _with_groups(state: ClusterState, victims: list[Pod]) -> list[Pod]:
    """The victims plus every running member of their PodGroups, each once, in order."""
    out: dict[str, Pod] = {}
    for victim in victims:
        for pod in running_members(state, victim):
            out.setdefault(pod.key, pod)
    return list(out.values())


class VictimChooser:
    """Chooses victims for DaemonSet pods; keeps parsed toleration policies between calls."""

    def __init__(self, settings: VictimSettings) -> None:
        self.settings = settings
        self.policies = PolicyCache()

    def _policy(
        self, state: ClusterState, pod: Pod, warnings: list[Warn]
    ) -> TolerationPolicy | str | None:
        """The victim's class policy, None without a class, or why it is kept if the class is
        missing (its policy is unknown, so it is not evicted; section 3 skips such a node)."""
        if not pod.priority_class_name:
            return None
        pc = state.policy.priority_classes.get(pod.priority_class_name)
        if pc is None:
            name = pod.priority_class_name
            warnings.append(
                Warn(f"Pod {pod.key}", f"PriorityClass {name} not found: not a preemption victim")
            )
            return f"pod(s) whose PriorityClass is missing ({name})"
        policy, first = self.policies.get(pc)
        if first and not policy.valid:
            warnings.append(Warn(f"PriorityClass {pc.name}", policy.error))
        return policy

    def _protection(
        self, state: ClusterState, preemptor: Pod, pod: Pod, now: datetime, into: Selection
    ) -> str | None:
        """Why `pod` may not be a victim of `preemptor`, or None if it may (the problems
        found and when a toleration that protects it ends go `into` the selection)."""
        priority = preemptor.priority or 0
        if daemonset_node(pod) is not None:
            return "DaemonSet pod(s)"
        if (pod.priority or 0) > priority:
            return f"pod(s) of higher priority than {priority}"
        policy = self._policy(state, pod, into.warnings)
        if isinstance(policy, str):
            return policy
        if is_exempt(pod, policy, preemptor, priority, now):
            assert policy is not None
            until = protected_until(pod, policy, priority)
            if until is not None:
                into.protection_ends = min(into.protection_ends, until.timestamp())
            detail = f", until {format_time(until)}" if until is not None else ""
            return f"pod(s) tolerating preemption ({pod.priority_class_name}{detail})"
        return None

    def candidates(
        self,
        state: ClusterState,
        preemptor: Pod,
        pods: list[Pod],
        allocatable: Resources,
        now: datetime,
        into: Selection,
    ) -> tuple[list[Candidate], dict[str, int]]:
        """Eligible victims in victim order, and counts of the protected pods by reason."""
        eligible: list[Candidate] = []
        protected: dict[str, int] = {}
        for pod in pods:
            reason = self._protection(state, preemptor, pod, now, into)
            if reason is None:
                # Gang as victim (docs/gang.md): the whole running group goes, or none of it.
                others = [m for m in running_members(state, pod) if m.key != pod.key]
                if any(self._protection(state, preemptor, m, now, into) for m in others):
                    reason = "member(s) of a running PodGroup with protected members"
            if reason is not None:
                protected[reason] = protected.get(reason, 0) + 1
                continue
            klass = victim_class(state, pod)
            eligible.append(Candidate(pod, klass, victim_order(pod, preemptor, allocatable)))
        eligible.sort(key=lambda c: (c.klass, c.order))
        return eligible, protected

    def choose(
        self,
        state: ClusterState,
        preemptor: Pod,
        pods: list[Pod],
        allocatable: Resources,
        room: Resources,
        now: datetime,
        clash: Clash | None = None,
    ) -> Selection:
        """Victims among `pods` (the node's running pods) so that `preemptor` fits in `room`
        plus what they free, and no longer clashes with the pods that stay."""
        selection = Selection()
        eligible, protected = self.candidates(state, preemptor, pods, allocatable, now, selection)
        need = preemptor.requests

        def works(victims: list[Pod]) -> bool:
            if not fits(room_with(room, victims), need):
                return False
            return clash is None or not clash({v.key for v in victims})

        too_many = 0
        for klass in range(len(CLASSES)):
            allowed = [c for c in eligible if c.klass <= klass]
            if not any(c.klass == klass for c in allowed):
                continue
            for strategy in self.settings.strategies:
                if strategy == SINGLE:
                    newest = [c for c in allowed if c.klass == klass]
                    victims = self._single(newest, preemptor, works)
                else:
                    victims = self._multiple(allowed, works)
                    if len(victims) > self.settings.max_victims:
                        too_many = len(victims)
                        victims = []
                if victims:
                    selection.victims = _with_groups(state, victims)
                    return selection
        selection.why_none = self._why_none(eligible, protected, works, too_many)
        return selection

    def _single(
        self, allowed: list[Candidate], preemptor: Pod, works: Callable[[list[Pod]], bool]
    ) -> list[Pod]:
        limit = self.settings.deviation_percent
        best: tuple[float, Candidate] | None = None
        for cand in allowed:
            if not works([cand.pod]):
                continue
            deviation = deviation_percent(cand.pod, preemptor)
            if deviation <= limit and (best is None or deviation < best[0]):
                best = (deviation, cand)
        return [] if best is None else [best[1].pod]

    @staticmethod
    def _multiple(allowed: list[Candidate], works: Callable[[list[Pod]], bool]) -> list[Pod]:
        taken: list[Pod] = []
        for cand in allowed:
            taken.append(cand.pod)
            if works(taken):
                break
        else:
            return []
        # Reprieve the most important first: the walk took them last.
        for pod in reversed(list(taken)):
            rest = [p for p in taken if p is not pod]
            if works(rest):
                taken = rest
        return taken

    def _why_none(
        self,
        eligible: list[Candidate],
        protected: dict[str, int],
        works: Callable[[list[Pod]], bool],
        too_many: int,
    ) -> str:
        kept = ", ".join(f"{n} {reason}" for reason, n in sorted(protected.items()))
        kept_note = f" (not eligible: {kept})" if kept else ""
        if not eligible:
            return f"no pod there may be evicted{kept_note}"
        if not works([c.pod for c in eligible]):
            by_class = ", ".join(
                f"{n} {name}"
                for name, n in (
                    (name, sum(c.klass == i for c in eligible)) for i, name in enumerate(CLASSES)
                )
                if n
            )
            return (
                f"evicting all {len(eligible)} eligible pod(s) ({by_class}) would not make "
                f"enough room{kept_note}"
            )
        if too_many:
            return (
                f"making room needs {too_many} victims, more than maxVictims "
                f"({self.settings.max_victims})"
            )
        return (
            f"no single pod within {self.settings.deviation_percent}% of this pod's request "
            f"makes enough room (victimSelectionStrategy: {', '.join(self.settings.strategies)})"
        )
