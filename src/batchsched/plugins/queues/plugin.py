"""Queues. Extension points: PreFilter, PostFilter.

PreFilter: a pod, or a gang as one unit, is placed only if at its leaf queue and at every
ancestor its usage plus the request stays within `limit` for each resource the queue names
(docs/queues.md#admission). Usage is the requests (as NodeResourcesFit counts them) of the
bound and assumed pods of the queue's subtree; the tree and its usage are the state's
(state/queues.py). Room Backfill reserved for another pod or gang of the subtree counts as
usage (docs/backfill.md#queue-limits). A pod the limits hold back stays pending with a message
naming the level that blocks; neither preemption nor reclaim is tried for it.

PostFilter: reclaim (docs/queues.md#reclaim, preemption/reclaim.py), after priority
preemption found no way inside the pod's queue: it evicts pods of queues above their fair
share and nominates the node, as preemption does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from batchsched.decisions import Decision, Evict
from batchsched.framework.interface import (
    GROUP_PLACED,
    PREEMPTION_GUARDS,
    ClusterEvent,
    Cycle,
    Diagnosis,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
)
from batchsched.objects.errors import shown
from batchsched.objects.go_duration import go_duration_seconds
from batchsched.objects.records import Pod
from batchsched.plugins.args import ArgsReader, ConfigError
from batchsched.preemption.evaluator import outranked_nominations
from batchsched.preemption.reclaim import (
    GroupUnits,
    Reclaimer,
    ReclaimStrategy,
    first_members_asks,
)
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray
from batchsched.state.queue_decay import Decay
from batchsched.state.queues import Usage
from batchsched.state.reservations import holders_of
from batchsched.state.reserved_quota import reserved_usage

ARGS = ("usageHalfLife", "usageWeightK")


class Queues(PreFilterPlugin, PostFilterPlugin, ReclaimStrategy):
    name = "Queues"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        """Args: `usageHalfLife` (a duration; unset: fair share forgets past usage) and
        `usageWeightK` (>= 0, default 1): docs/queues.md#fairness-over-time."""
        r = ArgsReader(self.name, args, ARGS)
        raw = r.get("usageHalfLife", str, "")
        seconds = go_duration_seconds(raw) if raw else None
        if raw and (seconds is None or not 0 < seconds < math.inf):
            raise r.fail(
                "usageHalfLife", f"{shown(raw)} is not a positive duration (such as 30m or 168h)"
            )
        k = r.number_from("usageWeightK", 1.0, 0.0)
        self.decay = Decay(seconds, k) if seconds else None
        self._reclaimer: Reclaimer | None = None

    def attach(self, state: ClusterState) -> None:
        if self.decay is None:
            return
        kept = state.queues.decayed
        if kept is not None and kept.decay != self.decay:
            raise ConfigError(
                f"pluginConfig {self.name} args.usageHalfLife: profiles ask for different "
                f"decays ({_said(kept.decay)} and {_said(self.decay)}); the queue tree is the "
                "cluster's, so every profile must ask for the same"
            )
        state.queues.use_decay(self.decay)

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        # A pod leaving frees its queue's usage; a Queue, PodGroup or Namespace changing may
        # change the limits or which queue a pod is in: each moves the state's generation.
        return {ClusterEvent.ANY: None}

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        state = cycle.state
        if not state.queues:  # no Queue objects: nothing is held back, at no cost
            return None
        member = state.queue_of(cycle.pod)
        if member.problem:
            return PreFilterResult(reject=member.problem)
        if not member.queue or not state.queues.limited(member.queue):
            return None  # (no limit on its path: nothing to hold it back)
        usage = state.queue_usage()
        asks: Mapping[str, int]
        placed = cycle.scratch.get(GROUP_PLACED)
        if placed is not None:  # placed with its group: the members before it are in use
            usage = _with(state, member.queue, usage, placed)
            asks = state.requests_by_name(cycle.pod)
        else:
            asks = first_members_asks(state, cycle.pod)
        # Room a reservation of another pod or gang holds counts as used (docs/backfill.md).
        reserved = reserved_usage(state, holders_of(cycle.pod))
        blocked = state.queues.blocking(member.queue, usage, asks, reserved)
        return PreFilterResult(reject=blocked) if blocked else None

    def post_filter(self, cycle: Cycle, diagnosis: Diagnosis) -> PostFilterResult:
        state, pod = cycle.state, cycle.pod
        if not state.queues:
            return PostFilterResult()
        leaf = state.queue_of(pod).queue
        if not leaf or state.policy.preemption_policy_of(pod) == "Never":
            return PostFilterResult()  # pods in no queue never reclaim
        if cycle.scratch.get(PREEMPTION_GUARDS):
            return PostFilterResult(
                message="reclaim: not tried for a pod whose required affinity reads other pods."
            )
        candidates = diagnosis.resolvable.copy()
        for nodes, _ in diagnosis.clashes:  # in the way there are pods, not too little room
            candidates &= ~nodes
        found = self._reclaimer_for(state).find(
            pod,
            leaf,
            cycle.demand,
            cycle.free,
            candidates,
            cycle.now,
            state.queue_fair_shares(),
            cycle.plain_room,
        )
        cycle.changes_at(found.changes_at)
        if found.row is None:
            # A protected pod coming of age may let the pod reclaim with nothing else changed.
            retry = None
            if math.isfinite(found.changes_at):
                retry = datetime.fromtimestamp(found.changes_at, cycle.now.tzinfo)
            return PostFilterResult(message=found.message, retry_at=retry)
        node = state.nodes.name(found.row)
        decisions: list[Decision] = []
        for victim in found.victims:
            queue = found.queues[victim.key]
            reason = (
                f"{self.name}: reclaimed by {pod.key} of queue {leaf} from queue {queue} "
                f"to make room on node {node}"
            )
            decisions.append(Evict(victim.key, victim.node_name, pod.key, reason, (leaf, queue)))
        priority = state.policy.priority_of(pod)
        decisions.extend(outranked_nominations(state, found.row, pod, priority))
        return PostFilterResult(nominated_node=node, decisions=decisions)

    def group_units(
        self,
        state: ClusterState,
        lead: Pod,
        asks: Mapping[str, int],
        now: datetime,
        within: BoolArray | None = None,
    ) -> GroupUnits:
        leaf = state.queue_of(lead).queue if state.queues else ""
        if not leaf:
            return GroupUnits()
        reclaimer = self._reclaimer_for(state)
        shares = state.queue_fair_shares()
        return reclaimer.group_units(lead, leaf, asks, now, shares, within)

    def _reclaimer_for(self, state: ClusterState) -> Reclaimer:
        if self._reclaimer is None or self._reclaimer.state is not state:
            self._reclaimer = Reclaimer(state)
        return self._reclaimer


def _with(state: ClusterState, leaf: str, usage: Usage, placed: Sequence[Pod]) -> Usage:
    """`usage` with the requests of `placed` (members of the pod's group, in its queue)
    added on `leaf`'s path."""
    if not placed:
        return usage
    out = dict(usage)
    for queue in state.queues.path(leaf):
        amounts = out[queue.name] = dict(usage.get(queue.name, {}))
        for pod in placed:
            for resource, amount in state.requests_by_name(pod).items():
                amounts[resource] = amounts.get(resource, 0) + amount
    return out


def _said(decay: Decay) -> str:
    return f"half-life {decay.half_life:g}s, k {decay.k:g}"
