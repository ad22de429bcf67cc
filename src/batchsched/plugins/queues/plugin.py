"""Queues. Extension points: PreFilter.

A pod, or a gang as one unit, is placed only if at its leaf queue and at every ancestor its
usage plus the request stays within `limit` for each resource the queue names
(docs/queues.md#admission). Usage is the requests (as NodeResourcesFit counts them) of the
bound and assumed pods of the queue's subtree; the tree and its usage are the state's
(state/queues.py). A pod the limits hold back stays pending with a message naming the level
that blocks; preemption is not tried for it (reclaim is a separate step, not there yet).
"""

from __future__ import annotations

from collections.abc import Mapping

from batchsched.framework.interface import (
    ClusterEvent,
    Cycle,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
)
from batchsched.objects.podgroup import group_key_of
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState


class Queues(PreFilterPlugin):
    name = "Queues"

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
        if not member.queue:
            return None
        blocked = state.queues.blocking(member.queue, state.queue_usage(), _asks(state, cycle.pod))
        return PreFilterResult(reject=blocked) if blocked else None


def _asks(state: ClusterState, pod: Pod) -> Mapping[str, int]:
    """What placing the pod asks of its queue: its own requests, or for a gang member the
    requests of every pending member together, so a gang is admitted whole or not at all."""
    key = group_key_of(pod)
    group = state.groups.by_key.get(key) if key is not None else None
    if group is None or not group.gang:
        return state.requests_by_name(pod)
    pending = state.pods.pending
    total: dict[str, int] = {}
    for member in sorted(state.groups.members.get(group.key, ())):
        if member in pending:
            for resource, amount in state.requests_by_name(pending[member]).items():
                total[resource] = total.get(resource, 0) + amount
    return total
