"""Whether a group may be attempted at all, before any node is looked at (docs/gang.md).

A group waits until its PodGroup exists and enough members exist, and is rejected early,
without preemption, when the whole cluster cannot cover its minResources even with the room
its preemption could free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from batchsched.objects.quantity import PODS, format_amount
from batchsched.objects.records import Pod, PodGroup
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray

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


def min_resources_message(
    state: ClusterState,
    group: PodGroup,
    members: Sequence[Pod],
    freeable: Callable[[], IntArray] | None = None,
) -> str:
    """Why the group cannot have its minResources, or "" if it can.

    What it can have is summed over all nodes: the free room and its own running members'
    room (they are part of what minResources describes), and, when the group may preempt,
    the room preemption could free for it (`freeable`, asked only when the rest falls short:
    pods already terminating and the pods its preemption may take). minResources is a filter
    on what could be freed, not only on what is free (docs/gang.md). `pods: minMember` is
    added to it.
    """
    if not group.min_resources:
        return ""
    needed = dict(group.min_resources)
    needed[PODS] = needed.get(PODS, 0) + group.min_member
    have = state.nodes.free[: state.nodes.rows][state.nodes.valid[: state.nodes.rows]].sum(axis=0)
    for pod in members:
        if pod.key in state.pods.bound:
            demand = state.pods.demand(pod)
            have[demand.cols] += demand.amounts
    short = _short(state, needed, have)
    if not short:
        return ""
    if freeable is None:
        listed = ", ".join(f"{_needs(r, needed)} (free: {_held(state, have, r)})" for r in short)
        return f"the cluster cannot hold its minResources: needs {listed}"
    more = freeable()
    short = _short(state, needed, have + more)
    if not short:
        return ""
    listed = ", ".join(
        f"{_needs(r, needed)} (free: {_held(state, have, r)}, "
        f"preemption could free {_held(state, more, r)} more)"
        for r in short
    )
    return f"the cluster cannot hold its minResources even with preemption: needs {listed}"


def _short(state: ClusterState, needed: dict[str, int], have: IntArray) -> list[str]:
    """The resources of `needed` that `have` (room per resource column) falls short of."""
    return [
        resource
        for resource, amount in sorted(needed.items())
        if _amount(state, have, resource) < amount
    ]


def _amount(state: ClusterState, room: IntArray, resource: str) -> int:
    col = state.nodes.resources.get(resource)
    return 0 if col is None or col >= room.shape[0] else int(room[col])


def _held(state: ClusterState, room: IntArray, resource: str) -> str:
    return format_amount(resource, _amount(state, room, resource))


def _needs(resource: str, needed: dict[str, int]) -> str:
    return f"{resource} {format_amount(resource, needed[resource])}"
