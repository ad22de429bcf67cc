"""Fair share (docs/queues.md#fair-share): per resource, what each queue of a tree is entitled
to now, by water-filling from each parent down to its children over what the parent has (at
the roots: the cluster's allocatable).

Each child is capped by its demand (usage plus the requests of its pending pods) and its
`limit`. What the parent has goes first to each child's `guaranteed`, then up to its `nominal`,
then the surplus to higher `priority` first and, within a priority, in proportion to `weight`,
what capped children do not take spread again over the others. A resource a queue does not
name counts as guaranteed = nominal = 0 without a limit: the queue still gets its weight's
share of it.

Amounts are integers (batchsched's units); where a split is not exact, the units left go one
each to the largest remainders, ties by name, so the same input always gives the same shares.
A pure computation over plain mappings: the state caches its result (state/queues.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from batchsched.objects.queues import Queue, QueueQuota

Shares = dict[str, dict[str, int]]  # queue -> resource -> amount

_UNNAMED = QueueQuota()


@dataclass(frozen=True, slots=True)
class Claim:
    """One child's claim on its parent's amount of one resource."""

    name: str
    cap: int  # the most it can take: its demand, within its limit
    guaranteed: int
    nominal: int
    priority: int
    weight: Fraction


def fair_shares(
    queues: Mapping[str, Queue],
    demand: Mapping[str, Mapping[str, int]],
    cluster: Mapping[str, int],
    weights: Mapping[str, Mapping[str, float]] | None = None,
) -> Shares:
    """Every queue's fair share of every resource in play (the cluster's, those any queue
    names, those any queue demands). `demand` is per queue, of its whole subtree; `weights`
    (queue -> resource -> weight) replaces queues' own `weight` where given (weights moved
    by past usage, state/queue_decay.py)."""
    resources = sorted(
        {*cluster, *(r for q in queues.values() for r in q.resources)}
        | {r for amounts in demand.values() for r in amounts}
    )
    children: dict[str, list[Queue]] = {}
    for queue in sorted(queues.values(), key=lambda q: q.name):
        parent = queue.parent if queue.parent in queues else ""
        children.setdefault(parent, []).append(queue)
    # Queues in a cycle of parents (refused elsewhere, but live objects arrive one by one)
    # are reached from no root: they keep 0.
    shares: Shares = {name: dict.fromkeys(resources, 0) for name in queues}
    for resource in resources:
        have = {"": cluster.get(resource, 0)}
        level = [""]
        while level:
            below: list[str] = []
            for parent in level:
                claims = [_claim(q, resource, demand, weights) for q in children.get(parent, ())]
                for name, amount in divide(have[parent], claims).items():
                    shares[name][resource] = have[name] = amount
                    below.append(name)
            level = below
    return shares


def _claim(
    queue: Queue,
    resource: str,
    demand: Mapping[str, Mapping[str, int]],
    weights: Mapping[str, Mapping[str, float]] | None,
) -> Claim:
    quota = queue.resources.get(resource, _UNNAMED)
    cap = max(0, demand.get(queue.name, {}).get(resource, 0))
    if quota.limit is not None:
        cap = min(cap, quota.limit)
    weight = (
        queue.weight if weights is None else weights.get(queue.name, {}).get(resource, queue.weight)
    )
    return Claim(queue.name, cap, quota.guaranteed, quota.nominal, queue.priority, Fraction(weight))


def divide(available: int, claims: Sequence[Claim]) -> dict[str, int]:
    """Split `available` among sibling claims: guaranteed, then nominal, then the surplus by
    priority and weight, never more than a claim's cap."""
    given = {c.name: 0 for c in claims}
    left = max(0, available)
    for level in ("guaranteed", "nominal"):
        wants = {c.name: min(getattr(c, level), c.cap) - given[c.name] for c in claims}
        wants = {name: amount for name, amount in wants.items() if amount > 0}
        asked = sum(wants.values())
        if asked > left:  # not enough even for this level: in proportion to what each asks
            for name, amount in _proportional(left, wants).items():
                given[name] += amount
            return given
        for name, amount in wants.items():
            given[name] += amount
        left -= asked
    for priority in sorted({c.priority for c in claims}, reverse=True):
        if not left:
            break
        left -= _fill_by_weight(left, [c for c in claims if c.priority == priority], given)
    return given


def _fill_by_weight(left: int, claims: Iterable[Claim], given: dict[str, int]) -> int:
    """Spread `left` over `claims` in proportion to their weights, each up to its cap, what a
    capped claim leaves spread again over the rest; adds to `given`, returns what it gave."""
    open_claims = [c for c in claims if c.weight > 0 and c.cap > given[c.name]]
    spent = 0
    while open_claims and left > spent:
        rest = left - spent
        total = sum(c.weight for c in open_claims)
        capped = [c for c in open_claims if c.cap - given[c.name] <= rest * c.weight / total]
        if capped:
            for c in capped:
                spent += c.cap - given[c.name]
                given[c.name] = c.cap
            open_claims = [c for c in open_claims if c not in capped]
            continue
        # No claim reaches its cap: each takes its share, all of `rest`.
        for name, amount in _proportional(rest, {c.name: c.weight for c in open_claims}).items():
            given[name] += amount
        spent = left
    return spent


def _proportional(amount: int, weights: Mapping[str, int | Fraction]) -> dict[str, int]:
    """`amount` split in proportion to positive `weights`, in whole units: each its floor,
    then the units left one each to the largest remainders (ties by name)."""
    total = Fraction(sum(weights.values()))
    exact = {name: amount * Fraction(w) / total for name, w in weights.items()}
    out = {name: int(share) for name, share in exact.items()}  # shares are >= 0: int floors
    short = amount - sum(out.values())
    for name in sorted(exact, key=lambda n: (-(exact[n] - out[n]), n))[:short]:
        out[name] += 1
    return out
