"""Backfill's reservations count against their queues' limits as usage does
(docs/backfill.md#queue-limits): what a holder's reservation will take, on its nodes
together, is counted at its leaf queue and every ancestor, so that reserved room plus usage
stays within each limit and other pods of the queue do not take the headroom it counted.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from batchsched.objects.records import Pod
from batchsched.state.reservations import holder_pods

if TYPE_CHECKING:
    from batchsched.state.cluster import ClusterState
    from batchsched.state.queues import Usage
    from batchsched.state.reservations import StartReservation


def holder_leaf(state: ClusterState, holder: str) -> str:
    """The leaf queue of a holder's pods ("": none, or not known)."""
    keys = holder_pods(holder, state.groups.members)
    pod = next((p for k in keys if (p := state.pods.by_key.get(k)) is not None), None)
    return "" if pod is None else state.queue_of(pod).queue


def reserved_usage(
    state: ClusterState,
    other_than: Collection[str] = (),
    held: Iterable[StartReservation] | None = None,
) -> Usage:
    """Per queue, the amounts the reservations of its subtree's holders hold (all of their
    nodes' shares together), leaving out the holders named in `other_than`; of `held`, or
    else of the reservations the state holds."""
    if held is None:
        held = state.start_reservations.by_holder.values()
    if not state.queues:
        return {}
    out: dict[str, dict[str, int]] = {}
    for reservation in held:
        holder = reservation.holder
        leaf = holder_leaf(state, holder) if holder not in other_than else ""
        if not leaf:
            continue
        for queue in state.queues.path(leaf):
            total = out.setdefault(queue.name, {})
            for share in reservation.shares.values():
                for resource, amount in share.items():
                    total[resource] = total.get(resource, 0) + amount
    return out


def limit_refusal(
    state: ClusterState,
    holder: str,
    pods: Sequence[Pod],
    held: Iterable[StartReservation] | None = None,
) -> str:
    """Why reserving room for `pods` (the holder's pending pods) would take their queue or an
    ancestor over a limit, counting the usage and the other holders' reservations (`held`,
    else the state's) ("" when it would not)."""
    if not state.queues or not pods:
        return ""
    leaf = state.queue_of(pods[0]).queue
    if not leaf:
        return ""
    reserved = reserved_usage(state, (holder,), held)
    return state.queues.blocking(leaf, state.queue_usage(), requests_of(state, pods), reserved)


def requests_of(state: ClusterState, pods: Iterable[Pod]) -> dict[str, int]:
    """What the pods request together, by resource name (what a reservation of them holds)."""
    asks: dict[str, int] = {}
    for pod in pods:
        for resource, amount in state.requests_by_name(pod).items():
            asks[resource] = asks.get(resource, 0) + amount
    return asks
