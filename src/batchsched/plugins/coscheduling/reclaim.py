"""Gang reclaim (docs/queues.md#reclaim): a gang of queue Q that fits nowhere, also not by
preemption inside Q, takes back room other queues borrowed, the way gang preemption finds
room (docs/gang.md): the fewest units, in reclaim's victim order, that let minMember members
fit at once, all or nothing. It reclaims for those members only (minMember first, as upstream
coscheduling starts a gang): the others join later, one by one. The units and the rules
they keep are the reclaim strategy's (the Queues plugin, preemption/reclaim.py); this module
only places the members.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from batchsched.decisions import Decision, Evict
from batchsched.objects.records import Pod
from batchsched.plugins.coscheduling.preemption import (
    Found,
    GroupFit,
    UnitIndex,
    decisions_for,
    find_victims,
    units_of,
)
from batchsched.preemption.reclaim import ReclaimStrategy, summed_requests
from batchsched.preemption.victims import VictimRule
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.topology import domains, pinned_domain

if TYPE_CHECKING:
    from batchsched.framework.interface import GroupAttempt


def reclaim_for_group(
    strategy: ReclaimStrategy,
    attempt: GroupAttempt,
    members: list[Pod],
    pending: list[Pod],
    need: int,
    free: IntArray,
    key: str = "",
) -> tuple[str, list[Decision], float]:
    """The message part ("reclaim: ...", "" when the group is in no queue) and, when the
    group gets room, the evictions (each naming both queues) and nominations; when the
    group gets none, the time a protected pod of another queue stops being protected (inf:
    never): the group is tried again then (docs/queues.md#reclaim). With the `key` of a
    required topology, inside one domain of it only (docs/topology.md)."""
    state, now, group = attempt.state, attempt.now, attempt.group
    lead = pending[0]
    if any(
        other.deletion_timestamp is not None
        for pod in pending
        if (row := state.nominations.get(pod.key)) is not None
        for other in state.nodes.pods_on[row].values()
    ):
        return "reclaim: waiting for the victims of an earlier reclaim to go.", [], math.inf
    # minMember first, as upstream coscheduling starts a gang: the members this attempt
    # places are what it asks of its queue's share; the rest join later, one by one.
    first = pending[: max(need, 1)]
    asks = summed_requests(state, first)
    rule = VictimRule(state, lead, 0, now, lambda name: (False, None))
    own = {m.key for m in members}

    ends = math.inf  # when a protected pod anywhere searched stops being protected

    def search(within: BoolArray | None) -> tuple[str, Found | None, str, int]:
        """Reclaim's units on the rows of `within` (None: anywhere) and the fewest of them
        that place minMember members there: (leaf, victims or None, why none, their pods)."""
        nonlocal ends
        given = strategy.group_units(state, lead, asks, now, within)
        ends = min(ends, given.changes_at)
        if not given.leaf or not given.units:
            return given.leaf, None, given.message, 0
        index = UnitIndex(state, rule, (), units_of(rule, given.units))
        fit = GroupFit(attempt.framework, state, now, group, free, first, need, index, within)
        takeable = sum(len(unit) for unit in given.units)
        return given.leaf, find_victims(fit, index.usable(state, own)), "", takeable

    where = ""
    if key:
        best: tuple[tuple[object, ...], str, str, Found] | None = None
        found_rows = domains(state, key)
        pinned = pinned_domain(state, members, key)  # members running: their domain only
        takeable, said = 0, ""
        for value in found_rows.values if pinned is None else [pinned]:
            within: BoolArray = np.zeros(state.nodes.rows, dtype=np.bool_)
            within[found_rows.rows[value]] = True
            leaf, victims, why, count = search(within)
            if not leaf:
                return why, [], math.inf  # in no queue: no reclaim anywhere
            takeable, said = max(takeable, count), said or why
            if victims is not None and (best is None or (*victims.cost(), value) < best[0]):
                best = ((*victims.cost(), value), leaf, value, victims)
        if best is None and not takeable:
            return said, [], ends
        if best is None:
            return (
                f"reclaim: the pod(s) other queues may give back inside any one {key} domain "
                f"(at most {takeable}) are not enough for minMember.",
                [],
                ends,
            )
        _, leaf, value, found = best
        where = f" in {key} {value}"
    else:
        leaf, maybe, why, takeable = search(None)
        if not leaf or (maybe is None and not takeable):
            return why, [], ends
        if maybe is None:
            return (
                f"reclaim: the {takeable} pod(s) other queues may give back are not enough "
                "for minMember.",
                [],
                ends,
            )
        found = maybe
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
        f"reclaim: evicting {len(found.victims)} pod(s) of other queues{where} to make room "
        f"for {placed} members."
    )
    return message, out, math.inf
