"""Victims for one preemption attempt (docs/preemption-toleration.md): who may be taken, and
from which node.

This is the reusable part of preemption. `VictimRule` says which pods a preemptor may take at
`now`; `select_victims_on_node` finds the minimal victim set on one node; `choice_key` ranks
the result against other nodes by the node-choice order. The plugins (`default_preemption`,
`preemption_toleration`) evaluate every candidate node at once with the array version in
`preemption.nodes` / `preemption.search`, which gives the same answer for single-pod victims
(a property test holds them to it).

API for gang scheduling (issue 4):
- Gang as victim: pass `units`, a callable mapping a candidate victim to every pod that must
  be evicted with it (its running gang members, on any node). A unit is a victim only when
  every member may be taken; removing or reprieving a unit moves all its members at once;
  members on other nodes are evicted too and count in `choice_key`.
- Rule: `VictimRule(state, preemptor, priority, now, plugin.class_verdicts(state, preemptor,
  priority, warnings))` with a `PreemptionToleration` (or `DefaultPreemption`) instance, whose
  policy cache reports malformed annotations once into `warnings`.
- Gang as preemptor: build one `VictimRule` for the gang's priority, then call
  `select_victims_on_node` per member and node against a `base_free` you reduce as members
  are placed; evict nothing unless enough members reach minMember.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from batchsched.framework.interface import PreemptionTieBreak
from batchsched.objects.records import Pod
from batchsched.preemption.toleration_policy import exempt_for
from batchsched.preemption.victim_table import importance_key
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray
from batchsched.state.resources import Demand

VictimUnits = Callable[[Pod], Collection[Pod]]
# A class name -> (class missing?, toleration_for verdict) lookup, memoised per attempt.
ClassVerdicts = Callable[[str], tuple[bool, int | None]]
PRIORITY_SHIFT = 2**31  # upstream shifts each victim priority so sums of negatives still order


def single_pod(pod: Pod) -> Collection[Pod]:
    """The default victim unit: each pod goes alone."""
    return (pod,)


@dataclass(slots=True)
class VictimRule:
    """Which pods `preemptor` (at `priority`) may take at `now`.

    With Queue objects in the cluster, priority preemption stays inside the preemptor's leaf
    queue (pods in no queue: among pods in no queue): a pod of another queue counts as one it
    does not outrank. Across queues only reclaim evicts (docs/queues.md#reclaim)."""

    state: ClusterState
    preemptor: Pod
    priority: int
    now: datetime
    verdicts: ClassVerdicts
    _memo: dict[str, tuple[bool, int | None]] = field(default_factory=dict)
    # The preemptor's leaf queue ("": none); None when the cluster has no Queue objects.
    queue: str | None = field(init=False)
    _queues: dict[str, str] = field(default_factory=dict)  # pod key -> its leaf queue

    def __post_init__(self) -> None:
        state = self.state
        self.queue = state.queue_of(self.preemptor).queue if state.queues else None

    def same_queue(self, pod: Pod) -> bool:
        """Whether priority preemption may reach `pod`: the preemptor's queue is its own."""
        if self.queue is None:
            return True
        found = self._queues.get(pod.key)
        if found is None:
            found = self._queues[pod.key] = self.state.queue_of(pod).queue
        return found == self.queue

    def verdict(self, class_name: str) -> tuple[bool, int | None]:
        found = self._memo.get(class_name)
        if found is None:
            found = self._memo[class_name] = self.verdicts(class_name)
        return found

    def lower(self, pod: Pod) -> bool:
        """Strictly lower priority, not already going away, and in the preemptor's queue."""
        return (
            (pod.priority or 0) < self.priority
            and pod.deletion_timestamp is None
            and self.same_queue(pod)
        )

    def missing_class(self, pod: Pod) -> bool:
        return bool(pod.priority_class_name) and self.verdict(pod.priority_class_name)[0]

    def exempt(self, pod: Pod) -> bool:
        if not pod.priority_class_name:
            return False
        return exempt_for(self.verdict(pod.priority_class_name)[1], pod, self.now)

    def may_take(self, pod: Pod) -> bool:
        return self.lower(pod) and not self.missing_class(pod) and not self.exempt(pod)


@dataclass(frozen=True, slots=True)
class NodeVictims:
    row: int
    victims: tuple[Pod, ...]  # importance order (most important first)
    pdb_violations: int


def fits(free: IntArray, demand: Demand) -> bool:
    return bool((free[demand.cols] >= demand.amounts).all())


def pdb_violating(rule: VictimRule, pods: Sequence[Pod]) -> list[bool]:
    """Which of `pods` (importance order) would take a matching PDB below zero if evicted.

    Each PDB's allowance is spent in order, as upstream does, so the least important
    pods of a budget are the ones that violate it.
    """
    state = rule.state
    spent: dict[str, int] = {}
    out = []
    for pod in pods:
        violated = False
        for key in state.policy.pdb_index.covering(pod):
            spent[key] = spent.get(key, 0) + 1
            violated |= spent[key] > state.policy.pdbs[key].disruptions_allowed
        out.append(violated)
    return out


def select_victims_on_node(
    rule: VictimRule,
    demand: Demand,
    base_free: IntArray,
    row: int,
    units: VictimUnits = single_pod,
    still_fails: Callable[[Collection[str]], bool] | None = None,
) -> NodeVictims | None:
    """The minimal victim set on node `row`, or None if the node cannot host the preemptor.

    `base_free` is the node's room as the preemptor sees it (free, plus room of pods already
    terminating, minus nominated pods of higher or equal priority). All takeable units are
    removed; if the preemptor still does not fit there is no set. Otherwise units are
    reprieved most important first, PDB-violating ones before the others, and every unit
    whose return still lets the preemptor fit stays. `still_fails`, for a node where the
    preemptor clashes with particular pods (ports, anti-affinity, spread), says whether the
    clash remains with the given pod keys removed; a unit whose return brings it back goes.
    """
    state = rule.state
    pods = sorted(state.nodes.pods_on[row].values(), key=importance_key)
    if any(rule.lower(p) and rule.missing_class(p) for p in pods):
        return None
    chosen: list[tuple[Pod, ...]] = []
    seen: set[frozenset[str]] = set()
    for pod in pods:
        if not rule.may_take(pod):
            continue
        unit = tuple(sorted(units(pod), key=importance_key))
        names = frozenset(m.key for m in unit)
        if names in seen or not all(rule.may_take(m) for m in unit):
            continue
        seen.add(names)
        chosen.append(unit)
    free = base_free.copy()
    rooms = [room_on(state, unit, row) for unit in chosen]
    for room in rooms:
        free += room
    gone = {m.key for unit in chosen for m in unit}
    if not fits(free, demand) or (still_fails is not None and still_fails(gone)):
        return None
    flags = iter(pdb_violating(rule, [m for unit in chosen for m in unit]))
    unit_flags = [[next(flags) for _ in unit] for unit in chosen]
    order = sorted(range(len(chosen)), key=lambda i: not any(unit_flags[i]))
    victims: list[Pod] = []
    violations = 0
    for i in order:
        trial = free - rooms[i]
        back = {m.key for m in chosen[i]}
        if fits(trial, demand) and (still_fails is None or not still_fails(gone - back)):
            free = trial
            gone -= back
            continue
        victims.extend(chosen[i])
        violations += sum(unit_flags[i])
    return NodeVictims(row, tuple(sorted(victims, key=importance_key)), violations)


def room_on(state: ClusterState, unit: Sequence[Pod], row: int) -> IntArray:
    room = np.zeros(len(state.nodes.resources), dtype=np.int64)
    for member in unit:
        if state.pods.bound.get(member.key) == row:
            d = state.pods.demand(member)
            room[d.cols] += d.amounts
    return room


def choice_key(
    found: NodeVictims, state: ClusterState, tie_break: PreemptionTieBreak | None = None
) -> tuple[float | int, ...]:
    """Sort key for node choice (smaller is better), in the node-choice order.

    Fewest PDB violations; lowest highest-victim priority; smallest sum of shifted victim
    priorities; fewest victims; a plugin's `tie_break` of the node and its victims, if the
    profile has one; latest start among the highest-priority victims (a victim without a
    start time counts as starting last, as upstream's `now` does); then node name.
    """
    victims = found.victims
    priorities = [v.priority or 0 for v in victims]
    highest = max(priorities, default=-math.inf)
    starts = [
        v.start_time.timestamp() if v.start_time is not None else math.inf
        for v, p in zip(victims, priorities, strict=True)
        if p == highest
    ]
    earliest = min(starts, default=math.inf)
    return (
        found.pdb_violations,
        highest,
        sum(p + PRIORITY_SHIFT for p in priorities),
        len(victims),
        0.0 if tie_break is None else tie_break(found.row, victims),
        -earliest,
        int(state.nodes.name_rank()[found.row]),
    )
