"""Coscheduling (QueueSort, PreFilter, Permit): all-or-nothing scheduling of PodGroups,
whichever API declared them (the CRD, the annotation/label, upstream's Workload API).

- QueueSort: higher priority first (an upstream group's own priority, if it names one), then
  the group's time (the PodGroup's creation time, else the pod's enqueue time), then the group
  key, so a group's members leave the queue together.
- Permit (the group hook): when a member is popped, the whole group's pending members are
  placed together on one tentative snapshot; they are bound only if bound + placed +
  succeeded members reach minMember, otherwise nothing is bound or held and the group backs
  off (`podGroupBackoffSeconds`, default 0 = until the cluster changes). Members beyond
  minMember that do not fit stay pending and bind later, one by one. Members of an upstream
  `basic` group are not claimed: they are scheduled one by one.
- PreFilter: the group must exist (of the API the pod names), have minMember members, and
  its minResources must fit in what is free or could be freed by its preemption.
- Events on the group as Warn decisions on `PodGroup ns/name`; after each pass, for groups
  whose running members can no longer reach minMember. An upstream group's failed attempt
  sets its scheduled condition False (conditions.py); the rest of a PodGroup's status is the
  PodGroup status controller's (controllers/podgroups.py), which every world runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from batchsched.decisions import Decision, Evict, GroupPlaced, PodGroupUpdate, Warn
from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    Diagnosis,
    GroupAttempt,
    GroupOutcome,
    GroupPlugin,
    PlacementFramework,
    PodsHint,
    PostFilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    QueueSortPlugin,
)
from batchsched.objects.errors import unreadable_message
from batchsched.objects.podgroup import group_key_of, kind_mismatch
from batchsched.objects.records import Pod, PodGroup, PodGroupStatus
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.coscheduling.admission import (
    MISSING_GROUP,
    existing_members,
    member_count_message,
    min_resources_message,
    mixed_schedulers,
)
from batchsched.plugins.coscheduling.conditions import disruption_targets, scheduled_condition
from batchsched.plugins.coscheduling.domain_preemption import victims_in_one_domain
from batchsched.plugins.coscheduling.placement import (
    ADMITTED,
    TentativePlacement,
    place_members,
)
from batchsched.plugins.coscheduling.preemption import (
    GroupFit,
    UnitIndex,
    decisions_for,
    find_victims,
    freeable_room,
    index_key,
    refusal_message,
    waiting_for_victims,
)
from batchsched.plugins.coscheduling.preferred import place_preferred
from batchsched.plugins.coscheduling.reclaim import reclaim_for_group
from batchsched.plugins.coscheduling.status import stranded_message
from batchsched.plugins.coscheduling.topology import place_in_one_domain
from batchsched.preemption.evaluator import PreemptionStrategy, strategy_of
from batchsched.preemption.reasons import GROUP_PLACED
from batchsched.preemption.reclaim import ReclaimStrategy
from batchsched.preemption.victims import VictimRule
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.topology import DomainPreemption, DomainSearch, placement_message


class Coscheduling(QueueSortPlugin, PreFilterPlugin, GroupPlugin):
    name = "Coscheduling"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(self.name, args, ("podGroupBackoffSeconds",))
        self.backoff_seconds = reader.int_in("podGroupBackoffSeconds", 0, 0)
        self.state: ClusterState | None = None
        self._backoff_until: dict[str, float] = {}
        self._events: dict[str, str] = {}  # last event per group, so each is told once
        self._units: UnitIndex | None = None  # victim units, kept while they stay valid
        self._preemption: PreemptionStrategy | None = None  # the profile's (use_post_filters)
        self._reclaim: ReclaimStrategy | None = None  # the profile's, if any (docs/queues.md)

    def attach(self, state: ClusterState) -> None:
        self.state = state

    def use_post_filters(self, plugins: Sequence[PostFilterPlugin]) -> None:
        self._preemption = strategy_of(plugins)
        self._reclaim = next((p for p in plugins if isinstance(p, ReclaimStrategy)), None)

    # ---- queueing hints ----------------------------------------------------------------

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        # Placing the members is the filters' business (their hints are asked too) and
        # preempting for them the preemption plugin's; a group's own rules read the group,
        # its members, and for minResources the room of the whole cluster and what its
        # preemption could free there (which classes and budgets change).
        return {
            ClusterEvent.POD_GROUP: None,
            ClusterEvent.NODE: None,
            ClusterEvent.NODE_ROOM: PodsHint(self._reads_room),
            ClusterEvent.POLICY: PodsHint(self._reads_room),
        }

    @staticmethod
    def _reads_room(change: ClusterChange, pods: Sequence[Pod]) -> list[bool]:
        """Per pod, whether its group asks minResources (checked against the whole
        cluster's room, which any change of room may help) or a required topology (whose
        domains are chosen by their room, docs/topology.md)."""
        groups = change.state.groups.by_key
        if not groups:
            return [False] * len(pods)
        return [
            (key := group_key_of(pod)) is not None
            and (group := groups.get(key)) is not None
            and bool(group.min_resources or group.topology.required)
            for pod in pods
        ]

    # ---- QueueSort ---------------------------------------------------------------------

    def sort_key(self, pod: Pod, enqueued: float) -> tuple[Any, ...]:
        group = group_key_of(pod)
        priority = pod.priority or 0
        if group is None:
            return (-priority, enqueued, pod.key)
        created = None
        if self.state is not None and (pg := self.state.groups.by_key.get(group)) is not None:
            created = pg.creation_timestamp
            own = self.state.policy.group_priority(pg)  # an upstream group's priority orders it
            if own is not None:
                priority = own
        since = created.timestamp() if created is not None else enqueued
        return (-priority, since, group, pod.key)

    # ---- PreFilter ---------------------------------------------------------------------

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        group = group_key_of(cycle.pod)
        if group is None or cycle.scratch.get(ADMITTED) == group:
            return None
        members = _members(cycle.state, group)
        pending = _pending(cycle.state, members, lambda key: True)
        # A pre-filter returns no decisions: a malformed toleration annotation first met
        # here is only logged (by the preemption plugin), not reported as a Warn.
        ignored: list[Decision] = []
        message = self._admission(
            cycle.state, group, cycle.pod, members, pending, cycle.now, ignored
        )
        until = self._backoff_until.get(group)
        if until is not None and cycle.now.timestamp() < until:
            cycle.changes_at(until)  # the group's backoff ends then: admission may change
        return PreFilterResult(reject=f"PodGroup {group}: {message}") if message else None

    def _admission(
        self,
        state: ClusterState,
        key: str,
        pod: Pod,
        members: list[Pod],
        pending: list[Pod],
        now: datetime,
        warnings: list[Decision],
    ) -> str:
        """Why the group of `pod` may not be attempted now, or "" if it may. `pending`: the
        members to place, in `_pending`'s order (its preemptors, for minResources)."""
        group = state.groups.by_key.get(key)
        if group is None:
            why = state.groups.unreadable.get(key)
            return unreadable_message(why) if why else MISSING_GROUP
        mismatch = kind_mismatch(pod, group)
        if mismatch or not group.gang:  # a basic group's members go one by one
            return mismatch
        if group.upstream and (split := mixed_schedulers(members)):
            return split
        existing = existing_members(members)
        if existing < group.min_member:
            return member_count_message(group, existing)
        until = self._backoff_until.get(key)
        if until is not None and now.timestamp() < until:
            return f"backing off for {self.backoff_seconds}s after a failed attempt"
        return min_resources_message(
            state, group, members, self._freeable(state, members, pending, now, warnings)
        )

    def _freeable(
        self,
        state: ClusterState,
        members: list[Pod],
        pending: list[Pod],
        now: datetime,
        warnings: list[Decision],
    ) -> Callable[[], IntArray] | None:
        """The room, summed over the cluster, that the group's preemption could free (as
        `_preempt` would search it: the same units), asked for only when the free room falls
        short; None when the group may not preempt."""
        if self._eligibility(state, pending) is not None:
            return None

        def room() -> IntArray:
            index, usable = self._victim_units(state, members, pending, now, warnings)
            return freeable_room(state, index, usable)

        return room

    def _eligibility(self, state: ClusterState, pending: list[Pod]) -> str | None:
        """Why the group may not preempt at all, or None if it may."""
        if self._preemption is None or not pending:
            return ""
        if any(state.policy.preemption_policy_of(p) == "Never" for p in pending):
            return "preemption: not eligible due to preemptionPolicy=Never."
        return None

    def _victim_units(
        self,
        state: ClusterState,
        members: list[Pod],
        pending: list[Pod],
        now: datetime,
        warnings: list[Decision],
    ) -> tuple[UnitIndex, BoolArray]:
        """The units the group may take, against its lowest pending priority, and which of
        them are usable now; kept while they stay valid."""
        assert self._preemption is not None
        lead, priority = pending[0], min(p.priority or 0 for p in pending)
        verdicts = self._preemption.class_verdicts(state, lead, priority, warnings)
        rule = VictimRule(state, lead, priority, now, verdicts)
        key = index_key(state, rule)
        if self._units is None or self._units.key != key:
            self._units = UnitIndex(state, rule, key)
        return self._units, self._units.usable(state, {m.key for m in members})

    # ---- Permit: the group as one unit -------------------------------------------------

    def group_of(self, pod: Pod) -> str | None:
        key = group_key_of(pod)
        group = self.state.group_of(pod) if self.state else None
        if group is not None and not group.gang and not kind_mismatch(pod, group):
            return None  # upstream's basic policy: scheduled pod by pod (PreFilter admits)
        return key

    def schedule_group(self, attempt: GroupAttempt) -> GroupOutcome:
        state, key = attempt.state, attempt.group
        members = _members(state, key)
        pending = _pending(state, members, attempt.queued)
        # A pod naming the group through the other API is not one of its members: it waits
        # on its own, and the members' fate must not depend on which of them sorts first.
        group = state.groups.by_key.get(key)
        strays: dict[str, str] = {}
        if group is not None:
            strays = {p.key: why for p in pending if (why := kind_mismatch(p, group))}
            members = [m for m in members if not kind_mismatch(m, group)]
            pending = [p for p in pending if p.key not in strays]
        if not pending:
            outcome = GroupOutcome(rejected_by=frozenset({self.name}) if strays else None)
        else:
            outcome = self._schedule_members(attempt, members, pending)
        if strays and outcome.rejected_by is not None:
            outcome.rejected_by |= {self.name}
        for pod_key, why in sorted(strays.items()):
            outcome.unschedulable[pod_key] = f"PodGroup {key}: {why}"
        return outcome

    def _schedule_members(
        self, attempt: GroupAttempt, members: list[Pod], pending: list[Pod]
    ) -> GroupOutcome:
        state, key, now = attempt.state, attempt.group, attempt.now
        outcome = GroupOutcome()
        message = self._admission(state, key, pending[0], members, pending, now, outcome.decisions)
        outcome.rejected_by = frozenset({self.name})
        if message:
            self._wait(key, pending, message, outcome)
            until = self._backoff_until.get(key)
            if until is not None and until > now.timestamp():
                outcome.retry_at = datetime.fromtimestamp(until, now.tzinfo)
            return outcome
        group = state.groups.by_key[key]
        for pod in pending:
            state.pods.demand(pod)  # intern every resource before the snapshot is copied
        done = _done(state, members)
        need = group.min_member - done
        free = _room_for(state, pending[0], members)
        search = None
        if group.topology.required:
            search = place_in_one_domain(
                attempt.framework,
                state,
                now,
                free,
                key,
                group.topology.required,
                members,
                pending,
                need,
            )
            placed, failures = search.placed, search.failures
        elif group.topology.preferred:
            placed, failures = place_preferred(
                attempt.framework,
                state,
                now,
                free,
                key,
                group.topology.preferred,
                members,
                pending,
                need,
            )
        else:
            placement = TentativePlacement(attempt.framework, state, now, free, key)
            try:
                placed, failures = place_members(placement, pending, need)
            finally:
                placement.undo()  # the scheduler binds the members that are kept
        outcome.rejected_by = _rejecters(self.name, failures)
        if len(placed) >= need:
            self._backoff_until.pop(key, None)
            self._events.pop(key, None)
            outcome.binds = [(pod.key, state.nodes.name(idx)) for pod, idx in placed]
            outcome.unschedulable = {pod.key: diag.message() for pod, diag in failures}
            if group.topology and placed:
                where = placement_message(state, group.topology, [row for _, row in placed])
                outcome.decisions.append(
                    GroupPlaced(key, f"placed {len(placed)} member(s) {where}")
                )
            if search is not None and search.chosen is None:
                # Members beyond minMember, with no room left in the group's domain.
                why = f"PodGroup {key}: {search.shortfall(need)}"
                outcome.unschedulable.update({p.key: why for p in pending})
            return outcome
        if search is not None:
            reason = search.shortfall(need)
        elif failures:
            misfit, diagnosis = failures[0]
            reason = f"{misfit.key}: {diagnosis.message()}"
        else:  # e.g. members of another scheduler: they count, but are not ours to place
            reason = f"only {len(pending)} pending member(s) are this scheduler's to place"
        message = (
            f"{done + len(placed)}/{group.min_member}{GROUP_PLACED}"
            f"{done} bound or succeeded, {len(placed)} fit); {reason}"
        )
        preemption = ""
        if search is not None or failures:
            preemption = self._preempt(attempt, members, pending, need, outcome, search)
            if self._preemption is not None:
                outcome.rejected_by |= {self._preemption.name}
        if preemption:
            message = f"{message} {preemption}"
        self._wait(key, pending, message, outcome)
        self._not_scheduled(group, message, now, outcome.decisions)
        if self.backoff_seconds and not any(isinstance(d, Evict) for d in outcome.decisions):
            outcome.retry_at = now + timedelta(seconds=self.backoff_seconds)
            self._backoff_until[key] = outcome.retry_at.timestamp()
        return outcome

    def domains_tried(
        self, framework: PlacementFramework, state: ClusterState, now: datetime, key: str
    ) -> DomainSearch | None:
        """The domains the group's next attempt would try, for a group with pending members
        and a required topology (explain shows them); None for any other group."""
        group = state.groups.by_key.get(key)
        members = _members(state, key)
        pending = _pending(state, members, lambda k: True)
        if group is None or not group.topology.required or not pending:
            return None
        need = group.min_member - _done(state, members)
        free = _room_for(state, pending[0], members)
        required = group.topology.required
        return place_in_one_domain(
            framework, state, now, free, key, required, members, pending, need
        )

    def domain_preemption(
        self, framework: PlacementFramework, state: ClusterState, now: datetime, key: str
    ) -> DomainPreemption | None:
        """Each domain as the group's preemption inside one domain would search it now, for
        a group with pending members and a required topology that may preempt (explain
        shows it); None for any other group."""
        group = state.groups.by_key.get(key)
        members = _members(state, key)
        pending = _pending(state, members, lambda k: True)
        if group is None or not group.topology.required or not pending:
            return None
        if self._preemption is None or self._eligibility(state, pending) is not None:
            return None
        if waiting_for_victims(state, pending, min(p.priority or 0 for p in pending)):
            return None  # its victims are leaving: it searches for no more
        need = group.min_member - _done(state, members)
        index, usable = self._victim_units(state, members, pending, now, [])
        free = _room_for(state, pending[0], members)
        fit_for = partial(GroupFit, framework, state, now, key, free, pending, need, index)
        required = group.topology.required
        return victims_in_one_domain(
            state, required, members, pending, need, free, index, usable, fit_for
        ).seen

    def _preempt(
        self,
        attempt: GroupAttempt,
        members: list[Pod],
        pending: list[Pod],
        need: int,
        outcome: GroupOutcome,
        search: DomainSearch | None = None,
    ) -> str:
        """Gang preemption with the profile's preemption plugin; the message part it adds.
        With the `search` of a required topology, inside one domain of its key only.

        Victims and nominations go into `outcome.decisions` only if the whole group gets room.
        """
        state, now = attempt.state, attempt.now
        refused = self._eligibility(state, pending)
        if refused is not None:
            return refused
        plugin = self._preemption
        assert plugin is not None
        priority = min(p.priority or 0 for p in pending)
        if waiting_for_victims(state, pending, priority):
            return "preemption: waiting for the victims of an earlier preemption to go."
        index, usable = self._victim_units(state, members, pending, now, outcome.decisions)
        lead = pending[0]
        free = _room_for(state, lead, members)

        group, framework = attempt.group, attempt.framework
        fit_for = partial(GroupFit, framework, state, now, group, free, pending, need, index)

        where, key, said = "", "", ""
        if search is None:
            found = find_victims(fit_for(None), usable)
            if found is None:
                takeable = sum(len(u.pods) for u, ok in zip(index.units, usable, strict=True) if ok)
                said = refusal_message(index.refused, takeable)
        else:
            key = search.key
            inside = victims_in_one_domain(
                state, key, members, pending, need, free, index, usable, fit_for
            )
            found = inside.found
            if found is None:
                said = refusal_message(index.refused, inside.takeable, key)
            where = f" in {key} {inside.value}"
        if found is None:
            if self._reclaim is None:
                return said
            # Across queues only reclaim evicts (docs/queues.md#reclaim), inside one domain
            # for a required topology.
            reclaimed, decisions, ends = reclaim_for_group(
                self._reclaim, attempt, members, pending, need, free, key
            )
            outcome.decisions.extend(decisions)
            if math.isfinite(ends):  # a protected victim coming of age may make room
                outcome.retry_at = datetime.fromtimestamp(ends, now.tzinfo)
            return f"{said} {reclaimed}" if reclaimed else said
        outcome.decisions.extend(
            decisions_for(state, found, attempt.group, lead, priority, plugin.name)
        )
        return (
            f"preemption: evicting {len(found.victims)} pod(s){where} to make room for "
            f"{len(found.placements)} members."
        )

    def _wait(self, key: str, pending: list[Pod], message: str, outcome: GroupOutcome) -> None:
        """Every pending member stays pending with the group's reason; the group is told."""
        self._event(key, message, outcome.decisions)
        outcome.unschedulable = {p.key: f"PodGroup {key}: {message}" for p in pending}

    def _not_scheduled(
        self, group: PodGroup, message: str, now: datetime, into: list[Decision]
    ) -> None:
        """An upstream group's scheduled condition goes False with why (as kube-scheduler
        writes it after a failed group cycle)."""
        if group.upstream:
            _update(group, scheduled_condition(group, False, message, now), into)

    def _event(self, key: str, message: str, into: list[Decision]) -> None:
        if self._events.get(key) != message:
            self._events[key] = message
            into.append(Warn(f"PodGroup {key}", message))

    # ---- after each pass: group events -------------------------------------------------

    def after_pass(
        self, changed: set[str], evicted: Sequence[Evict], now: datetime
    ) -> list[Decision]:
        """Tell the groups whose running members can no longer reach minMember (their
        status is the PodGroup status controller's)."""
        state = self.state
        decisions: list[Decision] = []
        if state is None or not (changed or evicted):
            return decisions
        for key in sorted(changed | set(disruption_targets(state, evicted))):
            group = state.groups.by_key.get(key)
            if group is None:
                if key not in state.groups.members:  # the group and its pods are gone
                    self._backoff_until.pop(key, None)
                    self._events.pop(key, None)
                continue
            stranded = stranded_message(group, _members(state, key))
            if stranded:
                self._event(key, stranded, decisions)
        return decisions


def _update(group: PodGroup, status: PodGroupStatus, into: list[Decision]) -> None:
    if status != group.status:
        group.status = status
        into.append(PodGroupUpdate(group.key, status))


def _members(state: ClusterState, key: str) -> list[Pod]:
    return [state.pods.by_key[k] for k in sorted(state.groups.members.get(key, ()))]


def _done(state: ClusterState, members: list[Pod]) -> int:
    """Members bound or succeeded: they count towards minMember."""
    return sum(1 for p in members if p.phase == "Succeeded" or p.key in state.pods.bound)


def _pending(state: ClusterState, members: list[Pod], queued: Callable[[str], bool]) -> list[Pod]:
    """The pending members `queued` accepts, highest priority first, then by name."""
    return sorted(
        (p for p in members if p.key in state.pods.pending and queued(p.key)),
        key=lambda p: (-(p.priority or 0), p.key),
    )


def _room_for(state: ClusterState, lead: Pod, members: list[Pod]) -> IntArray:
    """Free room as the group sees it: nominated pods of the lead's priority or above hold
    their room, except the group's own members, whose room is the group's to place."""
    free = state.free_for(lead)
    priority = lead.priority or 0
    own = [
        m
        for m in members
        if m.key != lead.key and m.key in state.nominations and (m.priority or 0) >= priority
    ]
    if own and not state.nodes.is_shared_free(free):
        for m in own:
            demand = state.pods.demand(m)
            free[state.nominations[m.key], demand.cols] += demand.amounts
    return free


def _rejecters(name: str, failures: Sequence[tuple[Pod, Diagnosis]]) -> frozenset[str]:
    """This plugin and the filters that kept members off nodes."""
    found = {name}
    for _, diagnosis in failures:
        found |= diagnosis.rejected_by
    return frozenset(found)
