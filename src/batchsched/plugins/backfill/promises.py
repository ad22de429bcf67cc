"""What a reservation is owed once its expected start has come
(docs/backfill.md#broken-promises): the pods on its nodes that run past the runtime they
stated by label or annotation are evicted, the fewest that let the holder start
(preemption/broken_promises.py), and its pods nominated to their reserved nodes. Before the
start, the holder is tried again at it when a pod it waits for could break its promise
(nothing else would wake it then)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from batchsched.decisions import Decision, Evict, Nominate
from batchsched.framework.interface import Overdue
from batchsched.objects.go_duration import format_go_duration
from batchsched.objects.parse import format_time
from batchsched.objects.records import Pod
from batchsched.preemption.broken_promises import BrokenPromises, promise
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import StartReservation

PLUGIN = "Backfill"


def owed(
    promises: BrokenPromises,
    state: ClusterState,
    held: StartReservation,
    waiting: Sequence[Pod],
    now: datetime,
) -> Overdue:
    """The evictions and nominations owed to `held`'s holder, whose pods `waiting` are left
    pending with no way found; or when to look again."""
    if held.start is None:
        return Overdue()  # it waits for pods stating no runtime: none of them is evicted
    if held.start > now:
        bounded = state.pods.by_key
        if any(
            (pod := bounded.get(key)) is not None and promise(state, pod) is not None
            for key in held.waits_for
        ):
            return Overdue(retry_at=held.start.timestamp())
        return Overdue()
    if any(state.policy.preemption_policy_of(p) == "Never" for p in waiting):
        return Overdue(message="broken promise: not evicting for preemptionPolicy=Never.")
    rank = state.nodes.name_rank()
    rows = sorted(held.shares, key=lambda row: int(rank[row]))
    found = promises.search(state, waiting, rows, now)
    if found.victims is None:
        return Overdue(message=f"broken promise: {found.why}." if found.why else "")
    lead = waiting[0]
    decisions: list[Decision] = []
    for late in found.victims.overruns:
        pod = late.pod
        reason = (
            f"{PLUGIN}: broken promise: ran {format_go_duration(late.past)} past its stated "
            f"runtime {format_go_duration(late.bound)}; evicted for the reservation of "
            f"{held.holder} (expected start {format_time(held.start)}) on node {pod.node_name}"
        )
        decisions.append(
            Evict(pod.key, pod.node_name, lead.key, reason, broken_promise=held.holder)
        )
    decisions.extend(
        Nominate(pod.key, state.nodes.name(row)) for pod, row in found.victims.placements
    )
    said = "; ".join(o.said() for o in found.victims.overruns)
    return Overdue(decisions, f"broken promise: evicting {said} so that it starts.")
