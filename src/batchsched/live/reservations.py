"""What live mode tells of Backfill's reservations after each pass (docs/backfill.md): an
Event on the holder (the Pod or PodGroup) when a reservation is made (`Reserved`), moved to
other nodes or another expected start (`ReservationMoved`) or started (`ReservationStarted`:
the holder was placed), and the gauge `batchsched_reservations`."""

from __future__ import annotations

from batchsched.live.events import EventRecorder, ObjectRef, ref_from_label
from batchsched.live.metrics import Metrics
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import StartReservation


def _placed(state: ClusterState, holder: str) -> bool:
    """Whether a holder that no longer holds a reservation has its pods bound."""
    kind, _, key = holder.partition(" ")
    if kind == "Pod":
        return key in state.pods.bound
    members = state.groups.members.get(key, ())
    return bool(members) and not any(m in state.pods.pending for m in members)


class ReservationEvents:
    def __init__(self, events: EventRecorder, metrics: Metrics) -> None:
        self.events = events
        self.metrics = metrics
        self._last: dict[str, StartReservation] = {}

    def after_pass(self, state: ClusterState) -> None:
        now = dict(state.start_reservations.by_holder)
        self.metrics.reservations.set(len(now))
        for holder, held in sorted(now.items()):
            before = self._last.get(holder)
            if before is None:
                self._record(state, holder, "Reserved", held.message())
            elif (before.nodes, before.start) != (held.nodes, held.start):
                self._record(state, holder, "ReservationMoved", held.message())
        for holder in sorted(self._last.keys() - now.keys()):
            if _placed(state, holder):
                nodes = ", ".join(self._last[holder].nodes)
                self._record(state, holder, "ReservationStarted", f"started on reserved {nodes}")
        self._last = now

    def _record(self, state: ClusterState, holder: str, reason: str, note: str) -> None:
        ref = _holder_ref(state, holder)
        self.events.record(ref, "Normal", reason, "Reserving", note)


def _holder_ref(state: ClusterState, holder: str) -> ObjectRef:
    ref = ref_from_label(holder)
    if ref.kind == "PodGroup":
        group = state.groups.by_key.get(f"{ref.namespace}/{ref.name}")
        if group is not None:
            return ObjectRef(ref.kind, ref.namespace, ref.name, api_version=group.api_version)
        return ref
    pod = state.pods.by_key.get(f"{ref.namespace}/{ref.name}")
    return ref if pod is None else ObjectRef("Pod", pod.namespace, pod.name, pod.uid)
