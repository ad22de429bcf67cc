"""Status conditions of upstream PodGroups (`scheduling.k8s.io`), as kube-scheduler writes them.
The False side is written here, by a failed group attempt; the PodGroup status controller
(controllers/podgroups.py) sets the rest after each pass.

- The scheduled condition (`PodGroupScheduled` in v1alpha2, `PodGroupInitiallyScheduled` in
  v1beta1) turns True (reason `Scheduled`) once the group has its minimum of members running
  (one member for a basic group), and False (reason `Unschedulable`, with the message the
  pending members get) after a group attempt that could not place it. Once True it never goes
  back to False: kube-scheduler 1.36 does not regress it either, and v1beta1 defines it so.
- `DisruptionTarget` (reason `PreemptionByScheduler`) turns True when the scheduler evicts the
  group's running members as one victim unit (disruptionMode `PodGroup` / `all`). With `Pod` /
  `single` its members are preempted one by one and the group itself is not the target.

`lastTransitionTime` moves only when a condition's status changes (metav1 conditions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from batchsched.decisions import Evict
from batchsched.objects.records import PodCondition, PodGroup, PodGroupStatus
from batchsched.objects.workload_api import SCHEDULED_CONDITION
from batchsched.preemption.gang_victims import whole_group_of
from batchsched.state.cluster import ClusterState

UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"


def set_condition(
    status: PodGroupStatus, type_: str, value: bool, reason: str, message: str, now: datetime
) -> PodGroupStatus:
    """`status` with one condition set (in place of the old one of its type)."""
    text = "True" if value else "False"
    old = status.condition(type_)
    if old is not None and (old.status, old.reason, old.message) == (text, reason, message):
        return status
    since = old.last_transition_time if old is not None and old.status == text else now
    new = PodCondition(type_, text, since, reason, message)
    if old is None:
        return replace(status, conditions=(*status.conditions, new))
    return replace(status, conditions=tuple(new if c is old else c for c in status.conditions))


def scheduled_condition(
    group: PodGroup, value: bool, message: str, now: datetime
) -> PodGroupStatus:
    """The group's status with its scheduled condition set, unless it was True already."""
    type_ = SCHEDULED_CONDITION[group.api_version]
    old = group.status.condition(type_)
    if old is not None and old.status == "True":
        return group.status
    reason = SCHEDULED if value else UNSCHEDULABLE
    return set_condition(group.status, type_, value, reason, message, now)


def disruption_targets(state: ClusterState, evicted: Sequence[Evict]) -> dict[str, Evict]:
    """Upstream groups preempted whole in this pass, each with the first eviction of it."""
    out: dict[str, Evict] = {}
    for decision in evicted:
        pod = state.pods.by_key.get(decision.pod)
        key = whole_group_of(state, pod) if pod is not None else None
        if key is not None and state.groups.by_key[key].upstream:
            out.setdefault(key, decision)
    return out
