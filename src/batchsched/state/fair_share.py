"""Fair share (docs/queues.md#fair-share): per resource, what each queue of a tree is entitled
to now, by water-filling from each parent down to its children over what the parent has (at
the roots: the cluster's allocatable).

Each child is capped by its demand (usage plus the requests of its pending pods) and its
`limit`. What the parent has goes first to each child's `guaranteed`, then up to its `nominal`,
then the surplus to higher `priority` first and, within a priority, in proportion to `weight`,
what capped children do not take spread again over the others; what the weighted children of
a priority leave (each capped) goes to those of weight 0: in proportion to their own weights
(0 only through decayed usage), then equally (weight 0 of their own). So the parent's amount
is handed out whole whenever its children demand as much. A resource a queue does not
name counts as guaranteed = nominal = 0 without a limit: the queue still gets its weight's
share of it.

Amounts are integers (batchsched's units) and so is the arithmetic: siblings' weights are
scaled to whole numbers with one common power-of-two denominator (a float's own is one), which
leaves every proportion as it was. Where a split is not exact, the units left go one each to
the largest remainders, ties by name, so the same input always gives the same shares.
A pure computation over plain mappings: the state caches its result (state/queues.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

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
    weight: int  # scaled with its siblings' to whole numbers (whole_weights)
    own_weight: int  # the queue's own, scaled so too: `weight` is moved by decayed usage


def fair_shares(
    queues: Mapping[str, Queue],
    demand: Mapping[str, Mapping[str, int]],
    cluster: Mapping[str, int],
    weights: Mapping[str, Mapping[str, float]] | None = None,
    resources: Collection[str] | None = None,
) -> Shares:
    """Every queue's fair share of every resource in play (the cluster's, those any queue
    names, those any queue demands), or of `resources` only. `demand` is per queue, of its
    whole subtree; `weights` (queue -> resource -> weight) replaces queues' own `weight` where
    given (weights moved by past usage, state/queue_decay.py)."""
    if resources is None:
        resources = {*cluster, *(r for q in queues.values() for r in q.resources)} | {
            r for amounts in demand.values() for r in amounts
        }
    return FairSharePlan(queues, resources).shares((demand,), cluster, weights)


@dataclass(frozen=True, slots=True)
class _Sibling:
    name: str
    priority: int
    weight: float
    quotas: dict[str, tuple[int, int, int | None]]  # resource -> guaranteed, nominal, limit


class FairSharePlan:
    """What water-filling reads of a tree, derived once per tree and set of resources: the
    groups of siblings top-down, each sibling's quotas, and their own weights as whole
    numbers. Only demand, the cluster and moved weights vary from one computation to the
    next."""

    def __init__(self, queues: Mapping[str, Queue], resources: Collection[str]) -> None:
        self.resources = sorted(resources)
        self.names = list(queues)
        children: dict[str, list[Queue]] = {}
        for queue in sorted(queues.values(), key=lambda q: q.name):
            parent = queue.parent if queue.parent in queues else ""
            children.setdefault(parent, []).append(queue)
        # Top-down from the roots. Queues in a cycle of parents (refused elsewhere, but live
        # objects arrive one by one) are reached from no root: they keep 0.
        self.groups: list[tuple[str, list[_Sibling], list[int]]] = []
        level = [""]
        while level:
            below: list[str] = []
            for parent in level:
                kids = children.get(parent, [])
                if kids:
                    group = [_sibling(q, self.resources) for q in kids]
                    whole = whole_weights([q.weight for q in kids])
                    self.groups.append((parent, group, whole))
                    below.extend(q.name for q in kids)
            level = below

    def shares(
        self,
        demand: Sequence[Mapping[str, Mapping[str, int]]],
        cluster: Mapping[str, int],
        weights: Mapping[str, Mapping[str, float]] | None = None,
    ) -> Shares:
        """Every queue's fair share of the plan's resources; `demand` per queue, of its whole
        subtree, is the sum of the given parts (usage and pending, say)."""
        shares: Shares = {name: dict.fromkeys(self.resources, 0) for name in self.names}
        for resource in self.resources:
            have = {"": cluster.get(resource, 0)}
            for parent, group, whole in self.groups:
                effective = whole
                if weights is not None:
                    moved = [weights.get(s.name, {}).get(resource, s.weight) for s in group]
                    effective = whole_weights(moved)
                claims = []
                for sibling, weight, own in zip(group, effective, whole, strict=True):
                    guaranteed, nominal, limit = sibling.quotas[resource]
                    cap = 0
                    for part in demand:
                        cap += part.get(sibling.name, {}).get(resource, 0)
                    cap = max(0, cap)
                    if limit is not None:
                        cap = min(cap, limit)
                    claims.append(
                        Claim(sibling.name, cap, guaranteed, nominal, sibling.priority, weight, own)
                    )
                for name, amount in divide(have[parent], claims).items():
                    shares[name][resource] = have[name] = amount
        return shares


def _sibling(queue: Queue, resources: Sequence[str]) -> _Sibling:
    quotas = {}
    for resource in resources:
        quota = queue.resources.get(resource, _UNNAMED)
        quotas[resource] = (quota.guaranteed, quota.nominal, quota.limit)
    return _Sibling(queue.name, queue.priority, queue.weight, quotas)


def whole_weights(weights: Sequence[float]) -> list[int]:
    """`weights` as whole numbers in the same proportions, exactly: each float is a whole
    number over a power of two, so all are scaled by the largest such denominator."""
    ratios = [float(w).as_integer_ratio() for w in weights]
    scale = max((d for _, d in ratios), default=1)
    return [n * (scale // d) for n, d in ratios]


def divide(available: int, claims: Sequence[Claim]) -> dict[str, int]:
    """Split `available` among sibling claims: guaranteed, then nominal, then the surplus by
    priority and weight, never more than a claim's cap."""
    left = max(0, available)
    if sum(c.cap for c in claims) <= left:
        # Room for every cap: each gets its cap, as the levels below would give.
        return {c.name: c.cap for c in claims}
    given = {c.name: 0 for c in claims}
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
        peers = [c for c in claims if c.priority == priority]
        # By weight; what the weighted claims leave (all capped), to those of weight 0 by
        # their own weights, then equally: no room is kept from a claim that asks for it.
        for weights in (
            {c.name: c.weight for c in peers},
            {c.name: c.own_weight for c in peers},
            dict.fromkeys([c.name for c in peers], 1),
        ):
            if not left:
                return given
            left -= _fill_by_weight(left, peers, weights, given)
    return given


def _fill_by_weight(
    left: int, claims: Iterable[Claim], weights: Mapping[str, int], given: dict[str, int]
) -> int:
    """Spread `left` over `claims` in proportion to their `weights` (those of weight 0 take
    none), each up to its cap, what a capped claim leaves spread again over the rest; adds
    to `given`, returns what it gave."""
    open_claims = [c for c in claims if weights[c.name] > 0 and c.cap > given[c.name]]
    spent = 0
    while open_claims and left > spent:
        rest = left - spent
        total = sum(weights[c.name] for c in open_claims)
        # Capped: what it still may take is within its share, rest * weight / total.
        capped = [
            c for c in open_claims if (c.cap - given[c.name]) * total <= rest * weights[c.name]
        ]
        if capped:
            for c in capped:
                spent += c.cap - given[c.name]
                given[c.name] = c.cap
            open_claims = [c for c in open_claims if c not in capped]
            continue
        # No claim reaches its cap: each takes its share, all of `rest`.
        for name, amount in _proportional(
            rest, {c.name: weights[c.name] for c in open_claims}
        ).items():
            given[name] += amount
        spent = left
    return spent


def _proportional(amount: int, weights: Mapping[str, int]) -> dict[str, int]:
    """`amount` split in proportion to positive whole `weights`: each its floor, then the
    units left one each to the largest remainders (ties by name)."""
    total = sum(weights.values())
    out: dict[str, int] = {}
    remainders: dict[str, int] = {}  # of amount * weight / total, in 1 / total
    for name, weight in weights.items():
        out[name], remainders[name] = divmod(amount * weight, total)
    short = amount - sum(out.values())
    if short:
        for name in sorted(remainders, key=lambda n: (-remainders[n], n))[:short]:
            out[name] += 1
    return out
