"""Queueing hints: after a change, which waiting pods may now pass the plugins that
rejected them (upstream's QueueingHints; docs/scheduling.md, "One question per refresh").

`HintPlans` asks one profile's plugins' hints, each once per change for every pod that needs
its answer. `ClusterHints` is what the scheduling queue asks (its `Hints`): the cluster's
position (`marks`), whether anything moved since one, and per waiting group the event, if
any, that may wake it, from the profiles' plans.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import compress

import numpy as np

from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    IndexArray,
    Plugin,
    PodsHint,
    QueueingHint,
)
from batchsched.framework.signature import HintGroup
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.mark import ClusterMark
from batchsched.state.nodes import BoolArray

_CACHE_LIMIT = 4096

# Cheap and specific events first: the hint that wakes a pod names the event it counts under.
_EVENT_ORDER = [
    ClusterEvent.NODE,
    ClusterEvent.POLICY,
    ClusterEvent.POD_GROUP,
    ClusterEvent.NAMESPACE,
    ClusterEvent.VOLUME,
    ClusterEvent.DEVICES,
    ClusterEvent.NODE_ROOM,
    ClusterEvent.ANY,
]
# Per event (its place in _EVENT_ORDER), the hints to ask (queueing_hints).
_Plan = tuple[tuple[int, tuple[QueueingHint | None, ...]], ...]
# The event each version of a `ClusterMark` stands for, when it moved.
_EVENT_OF = {
    "nodes": ClusterEvent.NODE,
    "policy": ClusterEvent.POLICY,
    "generation": ClusterEvent.ANY,
    "groups": ClusterEvent.POD_GROUP,
    "volumes": ClusterEvent.VOLUME,
    "devices": ClusterEvent.DEVICES,
    "namespaces": ClusterEvent.NAMESPACE,
}


class HintPlans:
    """One profile's plugins' hints, asked per change (`queueing_hints`)."""

    def __init__(self, plugins: Iterable[Plugin]) -> None:
        self._events = {p.name: p.events_to_register() for p in plugins}
        self._plans: dict[tuple[frozenset[str], frozenset[ClusterEvent]], _Plan] = {}

    def queueing_hints(
        self, change: ClusterChange, rejected: Sequence[frozenset[str]], pods: Sequence[Pod]
    ) -> list[ClusterEvent | None]:
        """Per waiting pod, rejected by the plugins named in `rejected` (in the same order):
        the first event in `change` after which such a plugin may let it pass, or None if
        none may (the pod would be told the same again). Each hint is asked once for all the
        pods that need its answer for an event (a `PodsHint` in one step), not pod by pod."""
        found: list[ClusterEvent | None] = [None] * len(pods)
        by_rejection: dict[frozenset[str], list[int]] = {}
        for i, rejected_by in enumerate(rejected):
            if (alike := by_rejection.get(rejected_by)) is None:
                by_rejection[rejected_by] = [i]
            else:
                alike.append(i)
        # Per event (its place in _EVENT_ORDER), per hint (None: may, unasked), the pods whose
        # rejecting plugins have it.
        steps: dict[int, dict[QueueingHint | None, list[int]]] = {}
        for rejected_by, alike in by_rejection.items():
            for rank, hints in self._hint_plan(rejected_by, change.events):
                by_hint = steps.setdefault(rank, {})
                for hint in hints:
                    if (items := by_hint.get(hint)) is None:
                        by_hint[hint] = list(alike)
                    else:
                        items.extend(alike)
        woken = False
        for rank in sorted(steps):
            event = _EVENT_ORDER[rank]
            for hint, items in steps[rank].items():
                # A pod an earlier event or hint wakes already is not asked again.
                waiting = [i for i in items if found[i] is None] if woken else items
                if not waiting:
                    continue
                if hint is None:
                    yes = waiting
                else:
                    asked = [pods[i] for i in waiting]
                    if isinstance(hint, PodsHint):
                        answers = hint.ask(change, asked)
                    else:
                        answers = [hint(change, pod) for pod in asked]
                    assert len(answers) == len(asked)
                    yes = list(compress(waiting, answers))
                for i in yes:
                    found[i] = event
                woken = woken or bool(yes)
        return found

    def _hint_plan(self, rejected_by: frozenset[str], events: frozenset[ClusterEvent]) -> _Plan:
        """Per event in `events` (by its place in _EVENT_ORDER), in order, the hints of the
        plugins in `rejected_by` that can lift their rejection after it (None: may, unasked),
        in name order; made once per pair of sets, as the hint groups asked each pass mostly
        share them."""
        key = (rejected_by, events)
        plan = self._plans.get(key)
        if plan is None:
            steps = []
            for event in sorted(events, key=_EVENT_ORDER.index):
                hints: list[QueueingHint | None] = []
                for name in sorted(rejected_by):
                    registered = self._events[name]
                    if registered is None:  # no hints: any event may
                        hints.append(None)
                    elif event in registered:
                        hints.append(registered[event])
                if hints:
                    steps.append((_EVENT_ORDER.index(event), tuple(hints)))
            if len(self._plans) >= _CACHE_LIMIT:
                self._plans.clear()
            plan = self._plans[key] = tuple(steps)
        return plan


class ClusterHints:
    """The scheduling queue's `Hints`. `plans_for` gives the hints of a pod's profile;
    `failed_as_is` is the scheduler's (whether a pod just failed as a twin would)."""

    def __init__(
        self,
        state: ClusterState,
        plans_for: Callable[[Pod], HintPlans],
        failed_as_is: Callable[[str], bool],
    ) -> None:
        self.state = state
        self._plans_for = plans_for
        self.failed_as_is = failed_as_is

    def marks(self) -> ClusterMark:
        return self.state.mark()

    def moved(self, since: Hashable) -> bool:
        assert isinstance(since, ClusterMark)
        # Device objects move no generation of their own (the allocator follows their epoch).
        state = self.state
        return since.generation != state.generation or since.devices != state.devices.epoch

    def wakes(self, asked: Sequence[tuple[HintGroup, Pod, Hashable]]) -> list[str | None]:
        events: list[str | None] = [None] * len(asked)
        # One question per change and profile (a refresh's groups mostly share both), for
        # all its groups at once: their places in `asked`.
        questions: dict[tuple[Hashable, str], list[int]] = {}
        for i, (_, pod, since) in enumerate(asked):
            if (places := questions.get(key := (since, pod.scheduler_name))) is None:
                questions[key] = [i]
            else:
                places.append(i)
        changes = self._changes([since for since, _ in questions])
        for places, change in zip(questions.values(), changes, strict=True):
            plans = self._plans_for(asked[places[0]][1])  # the places' profile
            found = plans.queueing_hints(
                change,
                [asked[i][0][1] for i in places],  # `Twins.group`: (shape, rejecting plugins)
                [asked[i][1] for i in places],
            )
            for i, event in zip(places, found, strict=True):
                if event is not None:
                    events[i] = event.value
        return events

    def _changes(self, sinces: Sequence[Hashable]) -> list[ClusterChange]:
        """What changed since each of `sinces` (marks). A refresh judges groups of many
        marks (hundreds at 5000 nodes, most with thousands of rows changed since): the log is
        read once, from the oldest mark it reaches, and walked from the newest mark back,
        each mark adding the rows logged between it and the next one's."""
        state = self.state
        events = [self._events_since(since) for since in sinces]
        positions: list[int] = []
        for since in sinces:
            assert isinstance(since, ClusterMark)
            positions.append(since.rows)
        rows: list[IndexArray | None] = [None] * len(sinces)
        order = sorted(range(len(sinces)), key=positions.__getitem__)
        log: list[int] | None = None
        first = 0  # the mark `log` begins at
        for i in order:
            log = state.nodes.rows_changed_since(positions[i])
            if log is not None:
                first = positions[i]
                break
        if log is not None:
            changed: BoolArray = np.zeros(state.nodes.rows, dtype=np.bool_)
            upto = len(log)
            for i in reversed(order):
                start = positions[i] - first
                if start < 0:
                    break  # older than the log reaches
                if start < upto:
                    changed[log[start:upto]] = True
                    upto = start
                rows[i] = np.flatnonzero(changed)
        changes = []
        for found, position, kinds in zip(rows, positions, events, strict=True):
            mark: int | None = position
            if found is None:  # the log no longer reaches back: every row may have changed
                found, mark = np.arange(state.nodes.rows, dtype=np.intp), None
            if found.shape[0]:
                kinds = kinds | {ClusterEvent.NODE_ROOM}
            changes.append(ClusterChange(state, frozenset(kinds), found, mark))
        return changes

    def _events_since(self, since: Hashable) -> set[ClusterEvent]:
        """The events other than NODE_ROOM since `since` (a mark)."""
        assert isinstance(since, ClusterMark)
        return {_EVENT_OF[name] for name in self.state.changed_since(since)}
