"""Broken promises (docs/backfill.md#broken-promises): for a reservation whose expected start
has come, the pods on its nodes that run past the runtime they stated by label or annotation
(a promise the kubelet does not keep for them) may be evicted, whatever their priority, so
that its holder starts.

Only such overrunning pods are victims; a pod with no stated runtime, within it, or bounded
by `spec.activeDeadlineSeconds` (the kubelet ends it) never is. Still protected: pods already
terminating, DaemonSet pods (their controller puts them straight back), pods of priority
2,000,000,000 or more (system-critical), and pods inside their PriorityClass's toleration
window (docs/preemption-toleration.md), as reclaim treats them. A pod of a PodGroup that goes
whole goes with its running members, which must all be victims too. The holder's own pods
are never victims.

The victims are the fewest that let all the holder's pending pods fit on its reserved nodes
(packed largest first), PDB-violating ones kept where another choice of as many does
(PodDisruptionBudgets are spent as priority preemption spends them: never a reason to keep a
pod if nothing else makes room).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations

import numpy as np

from batchsched.objects.daemonset import is_daemonset_owned
from batchsched.objects.go_duration import format_go_duration
from batchsched.objects.podgroup import group_key_of
from batchsched.objects.queue_membership import SYSTEM_PRIORITY
from batchsched.objects.records import Pod
from batchsched.objects.runtime_bound import stated_runtime
from batchsched.preemption.gang_victims import running_members
from batchsched.preemption.toleration_policy import PolicyCache, scheduled_since
from batchsched.preemption.victim_table import importance_key
from batchsched.preemption.victims import VictimRule, pdb_violating
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray

# Up to this many units are searched exhaustively for the fewest; beyond, a victim is
# reprieved whenever the holder still fits without it (a minimal set, not always the fewest).
EXACT_UNITS = 10


@dataclass(frozen=True, slots=True)
class Overrun:
    """A running pod past the end of its stated (label or annotation) runtime."""

    pod: Pod
    bound: int  # its stated runtime, seconds
    past: float  # how long it has run past it, seconds

    def how_far(self) -> str:
        """`40m past its stated runtime 1h`."""
        past, bound = format_go_duration(self.past), format_go_duration(self.bound)
        return f"{past} past its stated runtime {bound}"

    def said(self) -> str:
        """`default/run-a (40m past its stated runtime 1h)`."""
        return f"{self.pod.key} ({self.how_far()})"


def promise(state: ClusterState, pod: Pod) -> int | None:
    """The runtime the pod stated by label or annotation (its own or its PodGroup's), which
    nothing but a reservation enforces; None for none, or for activeDeadlineSeconds, which
    the kubelet enforces."""
    if pod.runtime_enforced:
        return None
    return stated_runtime(pod, state.group_of(pod))


def overrun(state: ClusterState, pod: Pod, now: datetime) -> Overrun | None:
    """The pod's overrun if it is still running once its `promise` is up (the planner counts
    it gone by then); None otherwise."""
    bound = promise(state, pod)
    if bound is None or pod.start_time is None:
        return None
    past = (now - pod.start_time).total_seconds() - bound
    return Overrun(pod, bound, past) if past >= 0 else None


@dataclass(frozen=True, slots=True)
class Victims:
    """The pods to evict (importance order) with their overruns, where each pending pod of
    the holder then goes, and how many evictions take a PodDisruptionBudget below zero."""

    overruns: tuple[Overrun, ...]
    placements: tuple[tuple[Pod, int], ...]
    pdb_violations: int


@dataclass(frozen=True, slots=True)
class Search:
    """The victims, or (None) why there are none: "" when nothing needs evicting."""

    victims: Victims | None
    why: str = ""


class BrokenPromises:
    """The search for one cluster state; PriorityClass policies are parsed once per version."""

    def __init__(self) -> None:
        self.policies = PolicyCache()

    def protection(self, state: ClusterState, pod: Pod, now: datetime) -> str:
        """Why an overrunning pod may not be evicted for a reservation ("" when it may)."""
        if pod.deletion_timestamp is not None:
            return "already terminating"
        if is_daemonset_owned(pod):
            return "a DaemonSet pod"
        if (pod.priority or 0) >= SYSTEM_PRIORITY:
            return "of system-critical priority"
        pc = state.policy.priority_classes.get(pod.priority_class_name)
        if pc is not None:
            policy, _ = self.policies.get(pc)
            seconds = policy.toleration_seconds if policy.valid else 0
            since = scheduled_since(pod)
            if seconds < 0 or (
                seconds > 0 and (since is None or since.timestamp() + seconds > now.timestamp())
            ):
                return f"inside PriorityClass {pc.name}'s toleration window"
        return ""

    def search(
        self,
        state: ClusterState,
        pending: Sequence[Pod],
        rows: Sequence[int],
        now: datetime,
    ) -> Search:
        """The victims on `rows` (the holder's reserved nodes, in name order) that let every
        pod of `pending` (the holder's, the first one leading) fit there."""
        if not pending or not rows:
            return Search(None)
        own = {p.key for p in pending} | _own_members(state, pending)
        members = _demands(state, pending)
        room = _room(state, pending, own, rows)
        if _pack(members, room) is not None:
            return Search(None)  # room enough (pods terminating free it): nothing to evict
        units, refused = self._units(state, rows, own, now)
        if not units and not refused:
            return Search(None)  # no pod there broke a promise
        gains = [_gain(state, unit, rows) for unit in units]
        if not units or _pack(members, room + sum(gains)) is None:
            said = "; ".join(f"{key} is {why}" for key, why in refused)
            head = "evicting the pods past their stated runtime would not make room"
            return Search(None, f"{head} ({said})" if said else head)
        rule = VictimRule(state, pending[0], 0, now, lambda name: (False, None))
        chosen = _fewest(units, gains, members, room, rule)
        victims = sorted((m for i in chosen for m in units[i]), key=importance_key)
        overruns = tuple(o for p in victims if (o := overrun(state, p, now)) is not None)
        freed = room + sum((gains[i] for i in chosen), np.zeros_like(room))
        packed = _pack(members, freed)
        assert packed is not None
        placements = tuple((pod, rows[slot]) for pod, slot in zip(pending, packed, strict=True))
        return Search(Victims(overruns, placements, sum(pdb_violating(rule, victims))))

    def _units(
        self, state: ClusterState, rows: Sequence[int], own: set[str], now: datetime
    ) -> tuple[list[tuple[Pod, ...]], list[tuple[str, str]]]:
        """The units that may go (in name order of their first pod) and the overrunning pods
        that may not, with why."""
        units: list[tuple[Pod, ...]] = []
        refused: list[tuple[str, str]] = []
        seen: set[str] = set()
        for row in rows:
            for key, pod in sorted(state.nodes.pods_on[row].items()):
                if key in seen or key in own or overrun(state, pod, now) is None:
                    continue
                unit = running_members(state, pod)
                seen.update(m.key for m in unit)
                why = next((w for m in unit if (w := self._refusal(state, m, own, now))), "")
                if why:
                    refused.append((key, why))
                else:
                    units.append(unit)
        return units, refused

    def _refusal(self, state: ClusterState, member: Pod, own: set[str], now: datetime) -> str:
        if member.key in own:
            return "of the holder's own PodGroup"
        if overrun(state, member, now) is None:
            return "in a PodGroup whose other members keep their promise"
        return self.protection(state, member, now)


def _own_members(state: ClusterState, pending: Sequence[Pod]) -> set[str]:
    key = group_key_of(pending[0])
    return set(state.groups.members.get(key, ())) if key else set()


def _demands(state: ClusterState, pods: Sequence[Pod]) -> IntArray:
    width = state.nodes.free.shape[1]
    out = np.zeros((len(pods), width), dtype=np.int64)
    for i, pod in enumerate(pods):
        demand = state.pods.demand(pod)
        out[i, demand.cols] = demand.amounts
    return out


def _room(
    state: ClusterState, pending: Sequence[Pod], own: set[str], rows: Sequence[int]
) -> IntArray:
    """Room on `rows` as the holder sees it: free, less what nominated pods of its priority
    or above hold (its own pods' nominations excepted), plus what terminating pods free."""
    index = np.asarray(rows, dtype=np.intp)
    room = state.free_for(pending[0])[index].copy()
    priority = pending[0].priority or 0
    for at, row in enumerate(rows):
        for key in state.nominations.on_row(row):
            other = state.pods.by_key.get(key)
            if (
                key in own
                and key != pending[0].key
                and other is not None
                and (other.priority or 0) >= priority
            ):
                demand = state.pods.demand(other)
                room[at, demand.cols] += demand.amounts
        for pod in state.nodes.pods_on[row].values():
            if pod.deletion_timestamp is not None:
                demand = state.pods.demand(pod)
                room[at, demand.cols] += demand.amounts
    return room


def _gain(state: ClusterState, unit: Iterable[Pod], rows: Sequence[int]) -> IntArray:
    """The room a unit frees on each of `rows`."""
    gain = np.zeros((len(rows), state.nodes.free.shape[1]), dtype=np.int64)
    at = {row: i for i, row in enumerate(rows)}
    for member in unit:
        row = state.pods.bound.get(member.key)
        if row in at:
            demand = state.pods.demand(member)
            gain[at[row], demand.cols] += demand.amounts
    return gain


def _pack(members: IntArray, room: IntArray) -> list[int] | None:
    """Where each member goes on `room`'s rows (first fit, largest members first), or None."""
    left = room.copy()
    slots = [0] * members.shape[0]
    rows = members.tolist()
    for i in sorted(range(len(rows)), key=lambda i: rows[i], reverse=True):
        fits = np.flatnonzero(np.all(left >= members[i], axis=1))
        if fits.shape[0] == 0:
            return None
        slots[i] = int(fits[0])
        left[slots[i]] -= members[i]
    return slots


def _fewest(
    units: list[tuple[Pod, ...]],
    gains: list[IntArray],
    members: IntArray,
    room: IntArray,
    rule: VictimRule,
) -> list[int]:
    """The indices of the units to evict: the fewest pods, then the fewest PDB violations,
    then the first such choice in the units' order; a greedy minimal set beyond
    EXACT_UNITS."""
    violating = _violating(units, rule)
    if len(units) > EXACT_UNITS:
        return _reprieved(units, gains, members, room, violating)
    best: tuple[int, int, int, tuple[int, ...]] | None = None
    for count in range(1, len(units) + 1):
        for order, chosen in enumerate(combinations(range(len(units)), count)):
            pods = sum(len(units[i]) for i in chosen)
            if best is not None and pods > best[0]:
                continue
            freed = room + sum((gains[i] for i in chosen), np.zeros_like(room))
            if _pack(members, freed) is None:
                continue
            found = (pods, sum(violating[i] for i in chosen), order, chosen)
            if best is None or found[:2] < best[:2]:
                best = found
        if best is not None and best[0] <= count:
            break  # no choice of more units has fewer pods
    assert best is not None
    return list(best[3])


def _violating(units: list[tuple[Pod, ...]], rule: VictimRule) -> list[int]:
    """Per unit, how many of its pods would take a budget below zero were all units evicted
    (budgets spent in importance order, as priority preemption spends them)."""
    everyone = sorted((m for unit in units for m in unit), key=importance_key)
    flags = dict(zip((p.key for p in everyone), pdb_violating(rule, everyone), strict=True))
    return [sum(flags[m.key] for m in unit) for unit in units]


def _reprieved(
    units: list[tuple[Pod, ...]],
    gains: list[IntArray],
    members: IntArray,
    room: IntArray,
    violating: list[int],
) -> list[int]:
    """Every unit out, then each given back while the holder still fits: PDB-violating ones
    first, then the smallest (so that few large ones go)."""
    freed = room + sum(gains, np.zeros_like(room))
    size = [int(g.sum()) for g in gains]
    chosen = set(range(len(units)))
    for i in sorted(chosen, key=lambda i: (not violating[i], size[i], i)):
        if _pack(members, freed - gains[i]) is not None:
            freed = freed - gains[i]
            chosen.discard(i)
    return sorted(chosen)
