"""PodGroup status from its members (docs/gang.md, after scheduler-plugins' controller).

Phases: Pending -> Scheduling once minMember members exist -> Running once running +
succeeded >= minMember; Failed when any member failed and failed + running + succeeded >=
minMember; Finished when succeeded >= minMember. Finished and Failed are terminal. A group
whose running members were all taken away (e.g. preempted as a unit) goes back to
Scheduling or Pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from batchsched.decisions import Warn
from batchsched.objects.records import Pod, PodGroup, PodGroupStatus
from batchsched.plugins.coscheduling.admission import existing_members
from batchsched.state.cluster import ClusterState

TERMINAL = frozenset({"Finished", "Failed"})


def compute_status(group: PodGroup, members: Sequence[Pod], now: datetime) -> PodGroupStatus:
    old = group.status
    running = sum(1 for p in members if p.node_name and not p.terminated)
    succeeded = sum(1 for p in members if p.phase == "Succeeded")
    failed = sum(1 for p in members if p.phase == "Failed")
    admitted = sum(1 for p in members if p.node_name)
    need = group.min_member
    if old.phase in TERMINAL:
        phase = old.phase
    elif succeeded >= need:
        phase = "Finished"
    elif failed and failed + running + succeeded >= need:
        phase = "Failed"
    elif running + succeeded >= need:
        phase = "Running"
    elif existing_members(members) >= need:
        phase = "Scheduling"
    else:
        phase = "Pending"
    start = old.schedule_start_time
    if start is None and phase != "Pending":
        start = now
    return PodGroupStatus(
        phase=phase,
        running=running,
        succeeded=succeeded,
        failed=failed,
        admitted=admitted,
        occupied_by=occupied_by(members) or old.occupied_by,
        schedule_start_time=start,
        conditions=old.conditions,
    )


def occupied_by(members: Sequence[Pod]) -> str:
    """The workloads owning the members, as `namespace/owner` joined by commas."""
    owners = {f"{p.namespace}/{ref.name}" for p in members for ref in p.owner_references}
    return ",".join(sorted(owners))


def stranded_message(group: PodGroup, members: Sequence[Pod]) -> str:
    """The Unschedulable event text when running members can no longer reach minMember."""
    running = sum(1 for p in members if p.node_name and not p.terminated)
    if not running:
        return ""
    succeeded = sum(1 for p in members if p.phase == "Succeeded")
    pending = sum(1 for p in members if not p.node_name and not p.terminated)
    if succeeded + pending + running >= group.min_member:
        return ""
    return (
        f"Unschedulable: {running} running, {succeeded} succeeded and {pending} pending "
        f"members, fewer than minMember {group.min_member}"
    )


def current_warnings(state: ClusterState, warnings: Sequence[Warn]) -> list[Warn]:
    """The warnings that still hold in `state`, in order, each once.

    A PodGroup's warnings are events about its attempts, each telling its state then: only
    its last one is kept, and only while it holds (a member is still pending, or its
    running members still fall short of minMember). A gang that became Running no longer
    warns that it cannot run, and a group retried as the cluster changed gets one row, not
    one per attempt.
    """
    last = {w.obj: i for i, w in enumerate(warnings) if w.obj.startswith(_GROUP)}
    out: list[Warn] = []
    seen: set[tuple[str, str]] = set()
    for i, warning in enumerate(warnings):
        if (warning.obj, warning.message) in seen:
            continue
        group = last.get(warning.obj)
        if group is not None and (group != i or not _group_warning_holds(state, warning)):
            continue
        seen.add((warning.obj, warning.message))
        out.append(warning)
    return out


_GROUP = "PodGroup "


def _group_warning_holds(state: ClusterState, warning: Warn) -> bool:
    key = warning.obj.removeprefix(_GROUP)
    members = [state.pods.by_key[k] for k in sorted(state.groups.members.get(key, ()))]
    if not members or any(m.key in state.pods.pending for m in members):
        return True  # still waiting, or about pods that are not its members (e.g. wrong kind)
    group = state.groups.by_key.get(key)
    return group is not None and warning.message == stranded_message(group, members)
