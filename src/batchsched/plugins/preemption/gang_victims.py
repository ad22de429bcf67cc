"""Gang as victim (SPEC section 4): a running PodGroup is preempted whole or not at all.

Evicting one member of a running group below minMember kills the group's progress, so the
victim unit of a group member is every running member of its group (on any node), and node
choice counts them all. Preemption's vectorised search treats victims one by one; on the
candidate nodes that host a lower-priority group member this module runs the per-node search
with gang units instead, and the best node of both, by the SPEC's order, wins.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from batchsched.objects.podgroup import group_key_of
from batchsched.objects.records import Pod
from batchsched.plugins.preemption.reasons import NO_VICTIMS
from batchsched.plugins.preemption.search import Evaluation
from batchsched.plugins.preemption.victims import (
    NodeVictims,
    VictimRule,
    choice_key,
    select_victims_on_node,
)
from batchsched.state.cluster import BoolArray, ClusterState, Demand, IntArray


def running_members(state: ClusterState, pod: Pod) -> tuple[Pod, ...]:
    """The pods that must go with `pod`: its group's running members if the group exists."""
    key = group_key_of(pod)
    if key is None or key not in state.pod_groups:
        return (pod,)
    return running_group(state, key)


def running_group(state: ClusterState, group: str) -> tuple[Pod, ...]:
    """A group's members bound to a node and not finished, in name order."""
    members = (state.pods[k] for k in sorted(state.group_members.get(group, ())))
    return tuple(m for m in members if m.key in state.bound and not m.terminated)


def gang_rows(state: ClusterState, rule: VictimRule, candidates: BoolArray) -> BoolArray:
    """Candidate rows hosting a member of a running group that the preemptor outranks."""
    rows = np.zeros(candidates.shape[0], dtype=np.bool_)
    for group in state.pod_groups:
        for key in state.group_members.get(group, ()):
            row = state.bound.get(key)
            if row is not None and candidates[row] and rule.lower(state.pods[key]):
                rows[row] = True
    return rows


def with_gang_victims(
    rule: VictimRule,
    demand: Demand,
    free: IntArray,
    candidates: BoolArray,
    search: Callable[[BoolArray], Evaluation],
) -> Evaluation:
    """The preemption node and victims among `candidates`, with groups as victim units.

    `search` is the single-victim search over a candidate mask; it runs alone when no
    candidate row hosts a group member, so plain clusters pay one scan of the groups.
    """
    state = rule.state
    gangs = gang_rows(state, rule, candidates)
    if not gangs.any():
        return search(candidates)
    plain = search(candidates & ~gangs)
    options: list[NodeVictims] = []
    if plain.row is not None:
        options.append(NodeVictims(plain.row, tuple(plain.victims), plain.pdb_violations))
    failed = 0
    for row in np.flatnonzero(gangs).tolist():
        found = select_victims_on_node(
            rule,
            demand,
            free[row] + _terminating_room(state, row),
            row,
            units=lambda pod: running_members(state, pod),
        )
        if found is None:
            failed += 1
        else:
            options.append(found)
    if not options:
        reasons = dict(plain.reasons)
        reasons[NO_VICTIMS] = reasons.get(NO_VICTIMS, 0) + failed
        return Evaluation(reasons=reasons)
    best = min(options, key=lambda found: choice_key(found, state))
    return Evaluation(row=best.row, victims=list(best.victims), pdb_violations=best.pdb_violations)


def _terminating_room(state: ClusterState, row: int) -> IntArray:
    """Room of the pods on `row` already on their way out (it comes free without eviction)."""
    room = np.zeros(state.free.shape[1], dtype=np.int64)
    for pod in state.node_pods[row].values():
        if pod.deletion_timestamp is not None:
            demand = state.demand(pod)
            room[demand.cols] += demand.amounts
    return room
