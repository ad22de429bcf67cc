"""The preemption evaluator (docs/preemption-toleration.md): for one preemptor, which pods it
may take and the minimal victims on a candidate node, ranked by the node-choice order.

A strategy says who may be taken:
- default (DefaultPreemption): every pod of lower priority;
- toleration (PreemptionToleration): a victim's PriorityClass may tolerate the preemptor, for
  a while after the victim was scheduled or for ever; a victim naming a missing class makes
  its node unusable;
- gang: a victim whose PodGroup is preempted whole goes with its running members, on any
  node (`gang_victims.running_members`), and pods already terminating give their room;
- DaemonSet (DaemonSetPreemption): victims on the pod's one node only, in its own order
  (plugins/daemonsetpreemption).

The plugins run the same rule on every candidate node at once (`preemption.search`, held to
the same answer by a property test); `batchsched explain` asks the evaluator node by node, to
show each candidate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from batchsched.decisions import Decision, Nominate
from batchsched.framework.interface import PreemptionTieBreak
from batchsched.objects.records import Pod
from batchsched.preemption.gang_victims import running_members, terminating_room
from batchsched.preemption.toleration_policy import FOREVER, scheduled_since, toleration_end
from batchsched.preemption.victims import (
    ClassVerdicts,
    NodeVictims,
    VictimRule,
    choice_key,
    pdb_violating,
    select_victims_on_node,
)
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray
from batchsched.state.resources import Demand


class PreemptionStrategy:
    """Who a preemptor may take: the class verdicts of a preemption plugin."""

    name: ClassVar[str]
    reads_tolerations: ClassVar[bool] = False  # whether a victim's class may protect it

    def class_verdicts(
        self, state: ClusterState, preemptor: Pod, priority: int, warnings: list[Decision]
    ) -> ClassVerdicts:
        """Victim classes as this strategy sees them (default: none missing, none tolerating
        anything); problems with a class go into `warnings` once."""
        return lambda name: (False, None)


def outranked_nominations(
    state: ClusterState, row: int, preemptor: Pod, priority: int
) -> list[Nominate]:
    """The nominations to node `row` of pods below `priority` other than the preemptor's,
    cleared when a preemption nominates the preemptor there (as upstream does)."""
    cleared = []
    for key in state.nominations.on_row(row):
        other = state.pods.by_key.get(key)
        if key != preemptor.key and other is not None and (other.priority or 0) < priority:
            cleared.append(Nominate(key, None))
    return cleared


def strategy_of(plugins: Iterable[object]) -> PreemptionStrategy | None:
    """The profile's preemption strategy among its post-filter plugins, if it has one."""
    return next((p for p in plugins if isinstance(p, PreemptionStrategy)), None)


@dataclass(frozen=True, slots=True)
class Protection:
    """A lower-priority pod the preemptor may not take, for now: its class tolerates it."""

    pod: Pod
    until: datetime | None  # None: for as long as the class's policy stands


@dataclass(slots=True)
class Standing:
    """The lower-priority pods of a node that the preemptor may not take, and why."""

    missing_class: list[Pod] = field(default_factory=list)  # naming a missing PriorityClass
    protected: list[Protection] = field(default_factory=list)


class Evaluator:
    """One preemption attempt's victim search, node by node."""

    def __init__(
        self,
        state: ClusterState,
        preemptor: Pod,
        priority: int,
        now: datetime,
        strategy: PreemptionStrategy,
        warnings: list[Decision] | None = None,
    ) -> None:
        self.state = state
        self.strategy = strategy
        verdicts = strategy.class_verdicts(state, preemptor, priority, warnings or [])
        self.rule = VictimRule(state, preemptor, priority, now, verdicts)

    def on_node(self, row: int, demand: Demand, free: IntArray) -> NodeVictims | None:
        """The minimal victims on node `row` (its room as the preemptor sees it: `free`), or
        None if no set of takeable pods makes room there. Pods already terminating give their
        room; a victim's gang goes with it."""
        state = self.state
        base = free + terminating_room(state, row)
        return select_victims_on_node(
            self.rule, demand, base, row, units=lambda p: running_members(state, p)
        )

    def best(
        self, found: Sequence[NodeVictims], tie_break: PreemptionTieBreak | None = None
    ) -> NodeVictims | None:
        """The node the node-choice order prefers among those that can make room (with the
        profile's `tie_break`, if it has one)."""
        return min(found, key=lambda v: choice_key(v, self.state, tie_break)) if found else None

    def pdb_violations(self, found: NodeVictims) -> list[Pod]:
        """The victims whose eviction takes a PodDisruptionBudget below zero."""
        flags = pdb_violating(self.rule, list(found.victims))
        return [v for v, bad in zip(found.victims, flags, strict=True) if bad]

    def standing(self, row: int) -> Standing:
        """The lower-priority pods on node `row` the preemptor may not take, in name order."""
        rule = self.rule
        out = Standing()
        for other in sorted(self.state.nodes.pods_on[row].values(), key=lambda p: p.key):
            if not rule.lower(other):
                continue
            if rule.missing_class(other):
                out.missing_class.append(other)
            elif rule.exempt(other):
                out.protected.append(Protection(other, self._protected_until(other)))
        return out

    def _protected_until(self, pod: Pod) -> datetime | None:
        toleration = self.rule.verdict(pod.priority_class_name)[1]
        since = scheduled_since(pod)
        if toleration is None or toleration == FOREVER or since is None:
            return None
        return toleration_end(since, toleration)
