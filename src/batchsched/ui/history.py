"""What happened to the pods, as the web UI tells it in live mode (docs/ui.md): each pod's last
events and the last preemptions, from the decisions of the passes.

Kept by the thread that owns the state (it records a pass's decisions, then copies the history
into the board it publishes); bounded, the oldest forgotten first.
"""

from __future__ import annotations

from collections import ChainMap, OrderedDict, deque
from collections.abc import Iterable, Mapping
from datetime import datetime

from batchsched.decisions import Bind, Decision, Evict, Nominate, Unschedulable
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.ui.board import Event, Preemption

EVENTS_PER_POD = 20
PODS_KEPT = 5000
PREEMPTIONS_KEPT = 100


class History:
    def __init__(
        self,
        events_per_pod: int = EVENTS_PER_POD,
        pods_kept: int = PODS_KEPT,
        preemptions_kept: int = PREEMPTIONS_KEPT,
    ) -> None:
        self._events: OrderedDict[str, tuple[Event, ...]] = OrderedDict()
        self._per_pod = events_per_pod
        self._pods_kept = pods_kept
        self._preemptions: deque[Preemption] = deque(maxlen=preemptions_kept)

    def record(
        self,
        decisions: Iterable[Decision],
        state: ClusterState,
        now: datetime,
        gone: Mapping[str, Pod] | None = None,
    ) -> None:
        """A pass's decisions; `gone`: pods the state no longer holds (a plan's victims)."""
        known = ChainMap(state.pods.by_key, dict(gone or {}))
        for decision in decisions:
            if isinstance(decision, Bind):
                message = f"Successfully assigned {decision.pod} to {decision.node}"
                self._add(decision.pod, Event(now, "Normal", "Scheduled", message))
            elif isinstance(decision, Unschedulable):
                self._add(decision.pod, Event(now, "Warning", "FailedScheduling", decision.message))
            elif isinstance(decision, Nominate) and decision.node is not None:
                message = f"nominated to {decision.node}: room is being freed for it there"
                self._add(decision.pod, Event(now, "Normal", "Nominated", message))
            elif isinstance(decision, Evict):
                reason = "Reclaimed" if decision.reclaim else "Preempted"
                message = f"{reason} by {decision.preemptor} on node {decision.node}"
                self._add(decision.pod, Event(now, "Normal", reason, message))
                preemptor_queue = _queue(state, known.get(decision.preemptor))
                victim_queue = _queue(state, known.get(decision.pod))
                if decision.reclaim is not None:
                    preemptor_queue, victim_queue = decision.reclaim
                self._preemptions.appendleft(
                    Preemption(
                        now,
                        decision.pod,
                        victim_queue,
                        decision.preemptor,
                        preemptor_queue,
                        decision.node,
                        decision.reason,
                        reclaim=decision.reclaim is not None,
                    )
                )

    def _add(self, pod: str, event: Event) -> None:
        events = self._events.get(pod, ())
        if events and (events[-1].reason, events[-1].message) == (event.reason, event.message):
            return  # the same again (a pod retried and refused alike): its first time stands
        self._events[pod] = (*events, event)[-self._per_pod :]
        self._events.move_to_end(pod)
        while len(self._events) > self._pods_kept:
            self._events.popitem(last=False)

    def events(self) -> dict[str, tuple[Event, ...]]:
        return dict(self._events)

    def preemptions(self) -> tuple[Preemption, ...]:
        return tuple(self._preemptions)


def plan_preemptions(
    evictions: Iterable[Evict], state: ClusterState, now: datetime, pods: Iterable[Pod]
) -> tuple[Preemption, ...]:
    """A one-shot plan's evictions as the preemptions page lists them; `pods`: the pods read
    (the victims among them, gone from the state)."""
    history = History()
    history.record(evictions, state, now, {p.key: p for p in pods})
    return history.preemptions()


def _queue(state: ClusterState, pod: Pod | None) -> str:
    return state.queue_of(pod).queue if pod is not None else ""
