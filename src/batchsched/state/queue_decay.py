"""Fairness over time (docs/queues.md#fairness-over-time): each queue's usage integrated over
time with an exponential half-life, and the weights it gives the surplus split.

Per queue (every level, its subtree's usage) and resource, at each step of the world's clock:
`U <- U * 0.5^(dt / halfLife) + usage * dt`, in batchsched's units times seconds. Among
siblings, for each resource, a queue's *effective weight* is `max(w + k * (w - u), 0)`, with
`w` its share of the siblings' weights and `u` its share of their decayed usage, renormalised
to the siblings' total weight (as KAI does): a queue that used less than its weight share gets
more of the surplus beyond nominal, one that used more gets less. Guaranteed and nominal
amounts never change. Siblings none of whom used a resource keep their own weights for it.

The clock is the caller's: a world passes its `now` (a pass's time), the core never reads one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from batchsched.objects.queues import Queue

Decayed = dict[str, dict[str, float]]  # queue -> resource -> amount x seconds
Weights = dict[str, dict[str, float]]  # queue -> resource -> effective weight
_NEGLIGIBLE = 1e-9  # decayed amounts below this are dropped
_NONE: Mapping[str, int] = {}


@dataclass(frozen=True, slots=True)
class Decay:
    half_life: float  # seconds, > 0
    k: float = 1.0  # how strongly past usage moves the weights, >= 0


class DecayedUsage:
    def __init__(self, decay: Decay) -> None:
        self.decay = decay
        self.usage: Decayed = {}
        self.at: float | None = None  # the world's time of the last step (seconds)
        self.version = 0  # moves whenever `usage` does

    def advance(
        self, now: float, current: Mapping[str, Mapping[str, int]], resources: Collection[str]
    ) -> None:
        """Step to `now`, `current` (each queue's usage now) having held since the last step;
        kept for `resources` only (those the fair shares read, QueueTree.shared)."""
        if self.at is None or now < self.at:
            self.at = now
            return
        dt = now - self.at
        if dt == 0:
            return
        factor = 0.5 ** (dt / self.decay.half_life)
        stepped: Decayed = {}
        before = self.usage
        for queue, old in before.items():
            used = current.get(queue, _NONE)
            kept = {}
            for r in resources:
                amount = old.get(r, 0.0) * factor + used.get(r, 0) * dt
                if amount > _NEGLIGIBLE:
                    kept[r] = amount
            if kept:
                stepped[queue] = kept
        for queue, used in current.items():  # the queues that had no decayed usage yet
            if queue not in before:
                kept = {}
                for r in resources:
                    amount = used.get(r, 0) * dt  # (0 * factor + it: exactly it)
                    if amount > _NEGLIGIBLE:
                        kept[r] = amount
                if kept:
                    stepped[queue] = kept
        self.usage, self.at = stepped, now
        self.version += 1

    def restore(
        self, queue: str, amounts: Mapping[str, float], stored_at: float, now: float
    ) -> None:
        """A queue's decayed usage as stored at `stored_at` (read back from its status after a
        restart or a failover), decayed to the last step (to `now` if there was none), in place
        of what is kept."""
        if self.at is None:
            self.at = now
        factor = 0.5 ** (max(self.at - stored_at, 0.0) / self.decay.half_life)
        kept = {r: v * factor for r, v in amounts.items() if v * factor > _NEGLIGIBLE}
        if kept:
            self.usage[queue] = kept
        else:
            self.usage.pop(queue, None)
        self.version += 1

    def forget(self, gone: Iterable[str]) -> None:
        for queue in gone:
            if self.usage.pop(queue, None) is not None:
                self.version += 1

    def effective_weights(
        self, queues: Mapping[str, Queue], only: Collection[str] | None = None
    ) -> Weights:
        """Per queue and resource, the weight its decayed usage gives it among its siblings,
        for every resource some sibling used (of those in `only`, if given)."""
        siblings: dict[str, list[Queue]] = {}
        for queue in queues.values():
            parent = queue.parent if queue.parent in queues else ""
            siblings.setdefault(parent, []).append(queue)
        out: Weights = {}
        for group in siblings.values():
            total_weight = sum(q.weight for q in group)
            resources = {r for q in group for r in self.usage.get(q.name, {})}
            if only is not None:
                resources &= set(only)
            if not total_weight:
                continue
            for resource in sorted(resources):
                used = {q.name: self.usage.get(q.name, {}).get(resource, 0.0) for q in group}
                total_used = sum(used.values())
                raw = {
                    q.name: max(
                        q.weight / total_weight
                        + self.decay.k * (q.weight / total_weight - used[q.name] / total_used),
                        0.0,
                    )
                    for q in group
                }
                # The raw weights add up to 1 before the floor at 0, so never to less.
                total_raw = sum(raw.values())
                for name, weight in raw.items():
                    out.setdefault(name, {})[resource] = weight / total_raw * total_weight
        return out
