"""Whether a group may be attempted at all (docs/gang.md), before any node is looked at.

A group waits until its PodGroup exists and enough members exist, and is rejected early,
without preemption, when the whole cluster's free room cannot cover its minResources.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from batchsched.objects.quantity import PODS, format_amount
from batchsched.objects.records import Pod, PodGroup
from batchsched.state.cluster import ClusterState

MISSING_GROUP = "does not exist: waiting for it to be created"


def member_count_message(group: PodGroup, existing: int) -> str:
    return f"{existing}/{group.min_member} members exist"


def mixed_schedulers(members: Sequence[Pod]) -> str:
    """Why an upstream gang waits when its members name different schedulers, or "".

    Upstream's gang is placed by one scheduler in one cycle, so every member must name it;
    a gang split between schedulers could never be placed whole by either.
    """
    names = sorted({p.scheduler_name for p in members if not p.terminated})
    if len(names) < 2:
        return ""
    listed = ", ".join(name or '""' for name in names)
    return f"members name different schedulers ({listed}): every member must name the same one"


def existing_members(members: Sequence[Pod]) -> int:
    """Members that can count towards minMember: all but the failed ones.

    Succeeded members count, as they do in the all-or-nothing rule (bound + placed +
    succeeded >= minMember); a member on its way out does not.
    """
    return sum(1 for p in members if p.phase != "Failed" and p.deletion_timestamp is None)


def min_resources_message(state: ClusterState, group: PodGroup, members: Sequence[Pod]) -> str:
    """Why the cluster cannot hold the group's minResources, or "" if it can.

    Free room is summed over all nodes, counting the group's own running members as free
    (they are part of what minResources describes), plus `pods: minMember`.
    """
    if not group.min_resources:
        return ""
    needed = dict(group.min_resources)
    needed[PODS] = needed.get(PODS, 0) + group.min_member
    free = state.free[: state.rows][state.valid[: state.rows]].sum(axis=0)
    own = np.zeros_like(free)
    for pod in members:
        if pod.key in state.bound:
            demand = state.demand(pod)
            own[demand.cols] += demand.amounts
    short = []
    for resource, amount in sorted(needed.items()):
        col = state.resources.get(resource)
        have = 0 if col is None or col >= free.shape[0] else int(free[col] + own[col])
        if have < amount:
            short.append(
                f"{resource} {format_amount(resource, amount)} "
                f"(free: {format_amount(resource, have)})"
            )
    if not short:
        return ""
    return "the cluster cannot hold its minResources: needs " + ", ".join(short)
