"""Queue status (docs/queues.md#live-mode): what each Queue holds, lends and waits for, and
whether its tree keeps the rules, as the worlds that write status report it.

A queue's *allocated* amounts are the requests of the bound pods of its subtree, for the
resources it names; *borrowed* what of them is above `nominal`; *fair share* what it is
entitled to now (docs/queues.md#fair-share); *pending pods* the pending pods of its subtree.

A queue that breaks the tree's rules (an unknown parent, a cycle of parents, children
guaranteed more than it), or sits below one that does, is not valid: its pods wait, and the
condition names the queue and field at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from batchsched.objects.errors import ManifestError
from batchsched.objects.queues import QUEUE_API, stored_usage
from batchsched.state.cluster import ClusterState

VALID = "Valid"  # the condition's type
VALID_REASON = "Valid"
INVALID_REASON = "InvalidQueueTree"


@dataclass(frozen=True, slots=True)
class QueueStatus:
    allocated: dict[str, int]  # resource -> amount, in batchsched's units
    borrowed: dict[str, int]
    fair_share: dict[str, int]
    pending_pods: int
    problem: str = ""  # why the queue is ignored for admission ("": it is valid)
    own_problem: bool = False  # the problem is this queue's own (not an ancestor's)
    # With decay on (docs/queues.md#fairness-over-time), per resource the queue names: its
    # decayed usage (batchsched's units x seconds) and its effective weight.
    decayed_usage: dict[str, float] | None = None
    effective_weight: dict[str, float] | None = None


def pending_by_queue(state: ClusterState) -> dict[str, int]:
    """Pending pods per queue, each counted at its leaf and at every ancestor."""
    tree = state.queues
    pending: dict[str, int] = {}
    for pod in state.pods.pending.values():
        leaf = state.queue_of(pod).queue
        for queue in tree.path(leaf) if leaf else ():
            pending[queue.name] = pending.get(queue.name, 0) + 1
    return pending


def queue_statuses(state: ClusterState) -> dict[str, QueueStatus]:
    """Every queue's status, by name."""
    tree = state.queues
    usage = state.queue_usage()
    shares = state.queue_fair_shares()
    pending = pending_by_queue(state)
    problems = tree.problems()
    decayed = tree.decayed
    weights = decayed.effective_weights(tree.queues) if decayed is not None else {}
    out: dict[str, QueueStatus] = {}
    for name in sorted(tree.queues):
        queue = tree.queues[name]
        used = usage.get(name, {})
        allocated = {r: used.get(r, 0) for r in sorted(queue.resources)}
        borrowed = {
            r: max(0, amount - queue.resources[r].nominal) for r, amount in allocated.items()
        }
        share = shares.get(name, {})
        broken = tree.ignored(name)
        out[name] = QueueStatus(
            allocated,
            borrowed,
            {r: share.get(r, 0) for r in allocated},
            pending.get(name, 0),
            problem="" if broken is None else str(broken),
            own_problem=name in problems,
        )
        if decayed is not None:
            past = decayed.usage.get(name, {})
            weight = weights.get(name, {})
            out[name] = replace(
                out[name],
                decayed_usage={r: past.get(r, 0.0) for r in allocated},
                effective_weight={r: weight.get(r, queue.weight) for r in allocated},
            )
    return out


def restore_usage(state: ClusterState, now: float) -> dict[str, ManifestError]:
    """Each batchsched Queue's decayed usage as its status.usage stores it, decayed to `now`
    (docs/queues.md#fairness-over-time); what cannot be read is left out (its usage starts
    from 0) and returned by queue, each error naming the field. Nothing when decay is off."""
    decayed = state.queues.decayed
    if decayed is None:
        return {}
    errors: dict[str, ManifestError] = {}
    for name, queue in sorted(state.queues.queues.items()):
        if queue.api_version != QUEUE_API:
            continue
        try:
            stored = stored_usage(queue)
        except ManifestError as err:
            errors[name] = err
            continue
        if stored is not None:
            decayed.restore(name, stored.amounts, stored.at.timestamp(), now)
    return errors
