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
_NONE_F: Mapping[str, float] = {}
_STEPS_KEPT = 4096  # steps kept before every queue is brought up to date (bounds memory)


@dataclass(frozen=True, slots=True)
class Decay:
    half_life: float  # seconds, > 0
    k: float = 1.0  # how strongly past usage moves the weights, >= 0


class DecayedUsage:
    """Decayed usage, stepped lazily: the clock's steps are kept in order, and per queue its
    amounts as of some step with the usage it had from each step on where its usage moved. A
    queue is brought up to date (its steps done one by one, as they came, each with the usage
    that held then, so the floating-point result is the same as stepping every queue at every
    step) only when its amounts are read or restored. Between two readings a step costs one
    entry, and a move of a queue's usage one more (not a pass over the steps it missed)."""

    def __init__(self, decay: Decay) -> None:
        self.decay = decay
        self.at: float | None = None  # the world's time of the last step (seconds)
        self.version = 0  # moves whenever the amounts do (each step, a restore, a forget)
        # Per queue: its amounts as of step `_done[queue]` (an index into `_steps`, counted
        # from the start), the usage that held from there (`_held`), and each later move of
        # it, in order: (the step from which it holds, the usage). `_rates`: its usage now.
        # (Usages are of the resources in `_resources`.)
        self._amounts: Decayed = {}
        self._rates: dict[str, dict[str, int]] = {}
        self._held: dict[str, Mapping[str, int]] = {}
        self._moves: dict[str, list[tuple[int, Mapping[str, int]]]] = {}
        self._done: dict[str, int] = {}
        self._steps: list[tuple[float, float]] = []  # (factor, dt) of the steps since `_base`
        self._base = 0  # the index of `_steps[0]`
        self._resources: tuple[str, ...] = ()  # those the steps since `_base` keep
        self._given: Collection[str] = ()  # as last given (one set per version of the tree)

    @property
    def usage(self) -> Decayed:
        """Per queue (those with some) and resource, the decayed amount as of the last step."""
        self._catch_up_all()
        return self._amounts

    @usage.setter
    def usage(self, amounts: Decayed) -> None:
        self._catch_up_all()
        self._amounts = {queue: dict(kept) for queue, kept in amounts.items() if kept}
        self.version += 1

    def advance(
        self,
        now: float,
        current: Mapping[str, Mapping[str, int]],
        resources: Collection[str],
        moved: Collection[str] | None = None,
    ) -> None:
        """Step to `now`, `current` (each queue's usage now) having held since the last step;
        kept for `resources` only (those the fair shares read, QueueTree.shared). `moved`: the
        queues whose usage may differ from what `current` gave at the last call (None: any)."""
        if self.at is None or now <= self.at:  # no step: the clock starts, stays or went back
            self._note(current, None if self.at is None else moved)
            if self.at is None or now < self.at:
                self.at = now
            return
        if resources is not self._given and set(resources) != set(self._resources):
            self._catch_up_all()
            self._resources = tuple(resources)
            self._amounts = {
                queue: kept
                for queue, amounts in self._amounts.items()
                if (kept := {r: v for r, v in amounts.items() if r in resources})
            }
            moved = None  # each rate is of the resources kept now
        self._given = resources
        if moved is None or moved:
            self._note(current, moved)
        self._steps.append((0.5 ** ((now - self.at) / self.decay.half_life), now - self.at))
        self.at = now
        self.version += 1
        if len(self._steps) >= _STEPS_KEPT:
            self._catch_up_all()

    def _note(self, current: Mapping[str, Mapping[str, int]], moved: Iterable[str] | None) -> None:
        """The usage of the `moved` queues (None: of all) as `current` gives it, from the next
        step on (noted: the steps with the usage each had are done when read)."""
        resources, rates = self._resources, self._rates
        for queue in rates.keys() | current.keys() if moved is None else moved:
            used = current.get(queue, _NONE)
            before = rates.get(queue, _NONE)
            if used == before:  # (the ledger's totals hold only amounts kept: as they were)
                continue
            rate = {}  # (a loop: a comprehension is a call, and this runs at most instants)
            for resource in resources:
                if amount := used.get(resource, 0):
                    rate[resource] = amount
            if rate != before:
                self._moved(queue, rate)
                if rate:
                    rates[queue] = rate
                else:
                    rates.pop(queue, None)

    def _moved(self, queue: str, rate: Mapping[str, int]) -> None:
        """`queue`'s usage is `rate` from the next step on: noted, its steps done later."""
        end = self._base + len(self._steps)
        moves = self._moves.get(queue)
        if moves is None:
            if self._done.get(queue, self._base) == end:  # up to date: no step to do yet
                if rate:
                    self._held[queue] = rate
                else:
                    self._held.pop(queue, None)
                return
            moves = self._moves[queue] = []
        elif moves[-1][0] == end:  # moved again before a step: the last move holds
            moves.pop()
        moves.append((end, rate))

    def _catch_up(self, queue: str) -> None:
        """Do the steps `queue` has not had yet, each as `U * factor + usage * dt` with the
        usage that held at that step and amounts below _NEGLIGIBLE dropped, as they came."""
        end = self._base + len(self._steps)
        start = self._done.get(queue, self._base)
        moves = self._moves.pop(queue, ())
        if start == end and not moves:
            return
        self._done[queue] = end
        held = self._held.get(queue, _NONE)
        now = moves[-1][1] if moves else held
        if now:
            self._held[queue] = now
        else:
            self._held.pop(queue, None)
        old = self._amounts.get(queue, _NONE_F)
        if not old and not held and not moves:
            return
        steps, base = self._steps, self._base
        kept: dict[str, float] = {}
        for resource in self._resources:
            amount = old.get(resource, 0.0)
            at, used = start, held.get(resource, 0)
            for until, rate in (*moves, (end, _NONE)):
                if used:
                    for factor, dt in steps[at - base : until - base]:
                        amount = amount * factor + used * dt
                        if not amount > _NEGLIGIBLE:
                            amount = 0.0
                elif amount:  # (U * factor + 0 * dt: exactly U * factor)
                    for factor, _ in steps[at - base : until - base]:
                        amount *= factor
                        if not amount > _NEGLIGIBLE:
                            amount = 0.0
                            break
                at, used = until, rate.get(resource, 0)
            if amount:
                kept[resource] = amount
        if kept:
            self._amounts[queue] = kept
        else:
            self._amounts.pop(queue, None)

    def _catch_up_all(self) -> None:
        for queue in self._amounts.keys() | self._held.keys() | self._moves.keys():
            self._catch_up(queue)
        self._base += len(self._steps)
        self._steps = []
        self._done = {}

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
        self._catch_up(queue)  # the steps so far are behind it: not to be done to `kept`
        if kept:
            self._amounts[queue] = kept
        else:
            self._amounts.pop(queue, None)
        self.version += 1

    def forget(self, gone: Iterable[str]) -> None:
        for queue in gone:
            self._catch_up(queue)
            if self._amounts.pop(queue, None) is not None:
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
        usage = self.usage
        for group in siblings.values():
            total_weight = sum(q.weight for q in group)
            resources = {r for q in group for r in usage.get(q.name, {})}
            if only is not None:
                resources &= set(only)
            if not total_weight:
                continue
            for resource in sorted(resources):
                used = {q.name: usage.get(q.name, {}).get(resource, 0.0) for q in group}
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
