"""What the informers and the actuator tell the scheduling loop, as data on one queue.

Only the loop thread touches ClusterState: informers and write workers put facts on the queue
and the loop applies them between scheduling passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchsched.live.kinds import Kind
from batchsched.live.malformed import Malformed
from batchsched.objects.kinds import Record
from batchsched.state.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class Upsert:
    kind: Kind
    record: Record


@dataclass(frozen=True, slots=True)
class Remove:
    kind: Kind
    key: str


@dataclass(frozen=True, slots=True)
class BindFailed:
    """A Binding POST failed: the room assumed for the pod is given back."""

    pod: str
    reason: str


@dataclass(frozen=True, slots=True)
class Wakeup:
    """Nothing happened, but the loop should look (e.g. it was asked to stop)."""


# An informer's object it could not read: reported once the replica leads (the state has it as
# removed already, through a Remove).
Fact = Upsert | Remove | BindFailed | Wakeup | Malformed


def apply_fact(state: ClusterState, fact: Fact) -> None:
    if isinstance(fact, Upsert):
        fact.kind.upsert(state, fact.record)
    elif isinstance(fact, Remove):
        fact.kind.remove(state, fact.key)
    elif isinstance(fact, BindFailed):
        state.forget(fact.pod)
    elif isinstance(fact, Malformed) and fact.ref.kind == "PodGroup":
        # Its members wait naming the field, not for a PodGroup "to be created".
        state.pod_group_unreadable(fact.key, fact.message)
    elif isinstance(fact, Malformed) and fact.ref.kind == "Queue":
        # Its pods wait naming the field, rather than run as if it did not exist.
        state.queue_unreadable(fact.key, fact.message)
