"""PodGroup status, as scheduler-plugins' PodGroup controller keeps it (docs/gang.md); every
world runs it after each scheduling pass.

Phases: Pending -> Scheduling once minMember members exist -> Running once running +
succeeded >= minMember; Failed when any member failed and failed + running + succeeded >=
minMember; Finished when succeeded >= minMember. Finished and Failed are terminal. A group
whose running members were all taken away (e.g. preempted as a unit) goes back to
Scheduling or Pending. Upstream groups (`scheduling.k8s.io`) carry conditions instead: the
scheduled condition turns True once minimum members run, `DisruptionTarget` when the scheduler
evicted the group as one victim unit (see plugins/coscheduling/conditions.py for the False
side, written by the group's failed attempt).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from batchsched.decisions import Decision, Evict, PodGroupUpdate, Warn
from batchsched.objects.records import (
    DISRUPTION_TARGET,
    PREEMPTION_BY_SCHEDULER,
    Pod,
    PodGroup,
    PodGroupStatus,
)
from batchsched.objects.workload_api import SCHEDULED_CONDITION
from batchsched.plugins.coscheduling.admission import existing_members
from batchsched.plugins.coscheduling.conditions import (
    SCHEDULED,
    disruption_targets,
    set_condition,
)
from batchsched.plugins.coscheduling.status import stranded_message
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import StartReservation
from batchsched.state.topology import placement_message

TERMINAL = frozenset({"Finished", "Failed"})


class PodGroupStatusController:
    """After each pass: the status of the groups whose members changed or that were
    preempted whole, as PodGroupUpdate decisions (the group records updated already)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        # Upstream groups whose Reserved condition is True (docs/backfill.md).
        self._reserved: set[str] = set()

    def after_pass(
        self, changed: set[str], evicted: Sequence[Evict], now: datetime
    ) -> list[Decision]:
        state = self.state
        decisions: list[Decision] = []
        if not (changed or evicted or self._reserved or state.start_reservations.by_holder):
            return decisions  # no group to look at (most passes)
        disrupted = disruption_targets(state, evicted)
        held = {
            holder.removeprefix("PodGroup "): reservation
            for holder, reservation in state.start_reservations.by_holder.items()
            if holder.startswith("PodGroup ")
        }
        for key in sorted(changed | set(disrupted) | set(held) | self._reserved):
            group = state.groups.by_key.get(key)
            if group is None:
                self._reserved.discard(key)
                continue
            members = members_of(state, key)
            status = compute_status(group, members, now)
            if group.upstream:
                where = placed_where(state, group, members)
                status = upstream_conditions(group, status, disrupted.get(key), now, where)
                status = self._reservation(group, status, held.get(key), now)
            if status != group.status:
                group.status = status
                decisions.append(PodGroupUpdate(group.key, status))
        return decisions

    def record(self, update: PodGroupUpdate) -> None:
        """A status decided elsewhere (a group attempt's condition, or a test's) is the
        group's now."""
        group = self.state.groups.by_key.get(update.group)
        if group is not None:
            group.status = update.status

    def statuses(self) -> dict[str, PodGroupUpdate]:
        """Every PodGroup with members, with its current status (changed or not)."""
        state = self.state
        out: dict[str, PodGroupUpdate] = {}
        for key in state.groups.members:
            group = state.groups.by_key.get(key)
            if group is not None:
                out[key] = PodGroupUpdate(key, group.status)
        return out

    def _reservation(
        self,
        group: PodGroup,
        status: PodGroupStatus,
        held: StartReservation | None,
        now: datetime,
    ) -> PodGroupStatus:
        """The `Reserved` condition: True with the reservation's nodes and expected start
        while the group holds one; False once it started (reason `Started`) or gave it back
        (`Released`)."""
        if held is not None:
            self._reserved.add(group.key)
            message = held.message(now)
            return set_condition(status, RESERVED_CONDITION, True, "Reserved", message, now)
        self._reserved.discard(group.key)
        old = status.condition(RESERVED_CONDITION)
        if old is None or old.status != "True":
            return status
        started = status.running + status.succeeded >= group.min_member
        reason = "Started" if started else "Released"
        return set_condition(status, RESERVED_CONDITION, False, reason, "", now)


# batchsched's own condition on upstream PodGroups: the expected start of its reservation.
RESERVED_CONDITION = "Reserved"


def members_of(state: ClusterState, key: str) -> list[Pod]:
    return [state.pods.by_key[k] for k in sorted(state.groups.members.get(key, ()))]


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


def placed_where(state: ClusterState, group: PodGroup, members: Sequence[Pod]) -> str:
    """For a group with a topology request, where its members on nodes are (e.g. `4
    member(s) in example.com/rack rack-a`); "" for any other group or none on a node."""
    rows = [row for m in members if (row := state.pods.bound.get(m.key)) is not None]
    if not group.topology or not rows:
        return ""
    return f"{len(rows)} member(s) {placement_message(state, group.topology, rows)}"


def upstream_conditions(
    group: PodGroup,
    status: PodGroupStatus,
    evicted: Evict | None,
    now: datetime,
    where: str = "",
) -> PodGroupStatus:
    """`status` (counts just computed) with the conditions the members' state implies;
    `where`: the scheduled condition's message when it turns True (a topology group's
    domain)."""
    if status.running + status.succeeded >= group.min_member:
        type_ = SCHEDULED_CONDITION[group.api_version]
        old = status.condition(type_)
        if old is None or old.status != "True":
            status = set_condition(status, type_, True, SCHEDULED, where, now)
    if evicted is not None:
        status = set_condition(
            status, DISRUPTION_TARGET, True, PREEMPTION_BY_SCHEDULER, evicted.reason, now
        )
    return status


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
    members = members_of(state, key)
    if not members or any(m.key in state.pods.pending for m in members):
        return True  # still waiting, or about pods that are not its members (e.g. wrong kind)
    group = state.groups.by_key.get(key)
    return group is not None and warning.message == stranded_message(group, members)
