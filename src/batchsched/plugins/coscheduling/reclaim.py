"""Gang reclaim (docs/queues.md#reclaim): a gang of queue Q that fits nowhere, also not by
preemption inside Q, takes back room other queues borrowed, the way gang preemption finds
room (docs/gang.md): the fewest units, in reclaim's victim order, that let minMember members
fit at once, all or nothing. The units and the rules they keep are the reclaim strategy's
(the Queues plugin, preemption/reclaim.py); this module only places the members.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from batchsched.decisions import Decision, Evict
from batchsched.objects.records import Pod
from batchsched.plugins.coscheduling.preemption import (
    GroupFit,
    UnitIndex,
    decisions_for,
    find_victims,
    units_of,
)
from batchsched.preemption.reclaim import ReclaimStrategy
from batchsched.preemption.victims import VictimRule
from batchsched.state.nodes import IntArray

if TYPE_CHECKING:
    from batchsched.framework.interface import GroupAttempt


def reclaim_for_group(
    strategy: ReclaimStrategy,
    attempt: GroupAttempt,
    members: list[Pod],
    pending: list[Pod],
    need: int,
    free: IntArray,
) -> tuple[str, list[Decision]]:
    """The message part ("reclaim: ...", "" when the group is in no queue) and, when the
    group gets room, the evictions (each naming both queues) and nominations."""
    state, now, group = attempt.state, attempt.now, attempt.group
    lead = pending[0]
    if any(
        other.deletion_timestamp is not None
        for pod in pending
        if (row := state.nominations.get(pod.key)) is not None
        for other in state.nodes.pods_on[row].values()
    ):
        return "reclaim: waiting for the victims of an earlier reclaim to go.", []
    asks: dict[str, int] = {}
    for pod in pending:
        for resource, amount in state.requests_by_name(pod).items():
            asks[resource] = asks.get(resource, 0) + amount
    leaf, chosen, why = strategy.group_units(state, lead, asks, now)
    if not leaf or not chosen:
        return why, []
    rule = VictimRule(state, lead, 0, now, lambda name: (False, None))
    index = UnitIndex(state, rule, (), units_of(rule, chosen))
    usable = index.usable(state, {m.key for m in members})
    fit = GroupFit(attempt.framework, state, now, group, free, pending, need, index)
    found = find_victims(fit, usable)
    if found is None:
        takeable = sum(len(unit) for unit in chosen)
        return (
            f"reclaim: the {takeable} pod(s) other queues may give back are not enough for "
            "minMember.",
            [],
        )
    priority = min(p.priority or 0 for p in pending)
    decisions = decisions_for(state, found, group, lead, priority, strategy.name)
    placed = len(found.placements)
    out: list[Decision] = []
    for decision in decisions:
        if isinstance(decision, Evict):
            theirs = state.queue_of(state.pods.by_key[decision.pod]).queue
            reason = (
                f"{strategy.name}: reclaimed by PodGroup {group} of queue {leaf} from queue "
                f"{theirs} to make room for {placed} of its members"
            )
            decision = replace(decision, reason=reason, reclaim=(leaf, theirs))
        out.append(decision)
    message = (
        f"reclaim: evicting {len(found.victims)} pod(s) of other queues to make room for "
        f"{placed} members."
    )
    return message, out
