"""The one definition of "pods that schedule alike": a pod's signature.

Two pods with equal signatures get equal answers from an attempt in one state of the
cluster, so what one attempt found (a placement, a failure, a hint's answer) serves the
other (docs/scheduling.md, "Shapes, not pods"). The signature is built in levels, each the
one below plus what the next user reads; a user keeps the level it needs, never a rule of
its own:

1. `requests_of`: the pod's requests. `Pods.demand` (state/pods.py) interns one `Demand` per
   distinct requests; `Demand.key` (columns and amounts) is how the levels above compare it.
2. `preemptor_key`: the priority and the demand. For one such key the victim search's
   results on a node follow from that node alone (preemption/search.py keeps them per key).
3. `ShapeKeys.key`, per profile: the static filters' shapes, the demand, the non-zero
   requests scoring counts and what the other plugins `reads` of the pod: equal keys, equal
   filter and score results (the framework's kept placements, verdicts and skip sets; see
   framework/placements.py). None when a static filter's answer is the pod's alone.
4. `Twins.shape`: the profile, the shape key, the priority, the preemption policy, the
   pod group and, with Queue objects, its queue (`ClusterState.queue_of`): equal answers
   from a whole attempt, post-filter (preemption) included. A failed pod's twins are told
   its answer (`Twins.twin`: the same with `kin_reads` for `reads`, so pods that differ
   only in what a plugin judges by `verdicts` are twins while their verdicts are equal;
   pods with a nomination have none, their own nomination changes what they see), and the
   queue files a waiting pod under
   `Twins.group`: the shape of a pod without a nomination (or the pod alone) with the
   plugins that rejected it names a `ShapeGroup`, whose members one hint answers for.

Of a pod's labels, a shape holds only those some pod's affinity term names
(`Pods.term_label_keys`), so pods that differ by a label of their own (a job's name)
share it. That set only grows: a shape holds while its size does, and is made again after.

This module sits with `state` in the layer order (tests/unit/test_architecture.py): the
state interns demands by level 1, counts the non-zero requests of level 3 and the queue
names its groups by level 4. It reads the state only through the attributes named above.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from typing import TYPE_CHECKING

from batchsched.objects.podgroup import group_key_of
from batchsched.objects.quantity import CPU, DEFAULT_CPU_REQUEST, DEFAULT_MEMORY_REQUEST, MEMORY
from batchsched.objects.records import Pod

if TYPE_CHECKING:
    from batchsched.state.cluster import ClusterState
    from batchsched.state.resources import Demand

# The per-pod memo is forgotten only past twice the pending pods, and at least this many.
_MEMO_FLOOR = 4096

Requests = tuple[tuple[str, int], ...]
StaticShapes = tuple[Hashable, ...] | None
# What the queue files a waiting pod under (level 4; `Twins.group`): its shape (or its key)
# and the plugins that rejected it.
HintGroup = tuple[Hashable, frozenset[str]]
PreemptorKey = tuple[int, tuple[tuple[int, int], ...]]
ShapeOf = Callable[[Pod], Hashable | None]
ReadsOf = Callable[["ClusterState", Pod], Hashable]


def requests_of(pod: Pod) -> Requests:
    """Level 1: what a pod's demand follows from (one `Demand` per distinct value)."""
    return tuple(pod.requests.items())


def nonzero_of(pod: Pod) -> tuple[int, int]:
    """Part of level 3: the pod's cpu and memory as scoring counts them (at least the
    non-zero defaults when it requests none); from its containers when it was read from a
    manifest."""
    if pod.nonzero_requests is not None:
        return pod.nonzero_requests
    return (
        pod.requests.get(CPU) or DEFAULT_CPU_REQUEST,
        pod.requests.get(MEMORY) or DEFAULT_MEMORY_REQUEST,
    )


def preemptor_key(priority: int, demand: Demand) -> PreemptorKey:
    """Level 2: what the victim search on a node reads of the preemptor."""
    return (priority, demand.key)


class ShapeKeys:
    """Level 3 for one profile, remembered per pod object: its static filters' shapes (None
    if any says 'do not cache') and its shape key. The queue's grouping, the scheduler's
    twin check and the placement all ask, not one after the other, so the memo is forgotten
    only when the pod leaves (`forget`) and past twice the pending pods (and at least
    `_MEMO_FLOOR`): a gang search or a pass asks for its pods in turn, and a smaller memo
    would drop each pod's entry before its next turn once more pods wait than it holds."""

    def __init__(
        self,
        shapes: Sequence[ShapeOf],
        readers: Sequence[ReadsOf],
        kin_readers: Sequence[ReadsOf | None] = (),
    ) -> None:
        self._shapes = list(shapes)  # the static filters', in filter order
        self._readers = list(readers)  # the other filters' and scores' `reads`
        # Beside each of `readers`, when some plugin judges by `verdicts`: its `kin_reads`,
        # or None where that is its `reads` (the value read for the shape key is taken).
        self._kin_readers = list(kin_readers)
        # By pod key, for the version kept with its entry.
        self._memo: dict[
            str,
            tuple[
                Pod,
                Demand,
                StaticShapes,
                Hashable | None,
                tuple[int, int, str, int],
                Hashable | None,
            ],
        ] = {}

    def static_shapes(self, pod: Pod) -> StaticShapes:
        shapes = tuple([shape(pod) for shape in self._shapes])
        return None if None in shapes else shapes  # no shape is equal to None but None

    def keys(
        self, state: ClusterState, pod: Pod, demand: Demand
    ) -> tuple[StaticShapes, Hashable | None]:
        """The pod's static filter shapes and its shape key."""
        memo = self._memo.get(pod.key)
        # What the key reads of the cluster: the labels affinity terms name, and what moves
        # the node generation (e.g. which resources DeviceClasses map, for DynamicResources),
        # the pod's node, which `assume` and `forget` set on the same object (NodeName's
        # shape), and the PodGroups' stated runtimes (Backfill's, for members stating none).
        seen = (
            len(state.pods.term_label_keys),
            state.nodes.generation,
            pod.node_name,
            state.groups.runtime_version,
        )
        if memo is None or memo[0] is not pod or memo[1] is not demand or memo[4] != seen:
            shapes = self.static_shapes(pod)
            key, kin = self._shape_keys(state, pod, demand, shapes)
            if len(self._memo) >= max(_MEMO_FLOOR, 2 * len(state.pods.pending)):
                self._memo.clear()
            memo = self._memo[pod.key] = (pod, demand, shapes, key, seen, kin)
        return memo[2], memo[3]

    def kin_key(self, state: ClusterState, pod: Pod, demand: Demand) -> Hashable | None:
        """The shape key with `kin_reads` in place of `reads` (the shape key itself when
        no plugin judges by `verdicts`): pods of one kin key whose verdicts are equal get
        equal filter results."""
        self.keys(state, pod, demand)
        return self._memo[pod.key][5]

    def _shape_keys(
        self, state: ClusterState, pod: Pod, demand: Demand, shapes: StaticShapes
    ) -> tuple[Hashable | None, Hashable | None]:
        """The shape key and the kin key (`kin_key`), each plugin's `reads` read once."""
        if shapes is None:
            return None, None
        # The non-zero requests are what the resource scores read besides the demand.
        nonzero = nonzero_of(pod)
        read = tuple([reads(state, pod) for reads in self._readers])
        key = (shapes, demand.key, nonzero, read)
        if not self._kin_readers:
            return key, key
        kin_read = tuple(
            [
                value if kin_reads is None else kin_reads(state, pod)
                for value, kin_reads in zip(read, self._kin_readers, strict=True)
            ]
        )
        return key, (shapes, demand.key, nonzero, kin_read)

    def forget(self, keys: Collection[str]) -> None:
        """These pods left (docs/live.md, memory)."""
        for key in keys:
            self._memo.pop(key, None)

    def key(self, state: ClusterState, pod: Pod, demand: Demand) -> Hashable | None:
        """What the filters and scores read of the pod: equal keys, equal placements."""
        return self.keys(state, pod, demand)[1]


class Hashed(tuple[Hashable, ...]):
    """A tuple that works its hash out once: a pod's level-4 key is deep (the shapes of
    all its filters) and is looked up several times per attempt, where a plain tuple is
    hashed anew each time. Equal to, and hashed as, the plain tuple."""

    _hash: int

    def __new__(cls, items: tuple[Hashable, ...]) -> Hashed:
        made = super().__new__(cls, items)
        made._hash = tuple.__hash__(made)
        return made

    def __hash__(self) -> int:
        return self._hash


class Twins:
    """Level 4, computed once per queued pod (by key) and dropped when the pod changes
    (`forget`) or affinity terms come to read more labels (`follow`, which then also calls
    `dropped`: what was kept by these shapes no longer holds either)."""

    def __init__(self, state: ClusterState, dropped: Callable[[], None]) -> None:
        self._state = state
        self._dropped = dropped
        self._shapes: dict[str, Hashable | None] = {}
        self._kin: dict[str, Hashable | None] = {}
        self._label_keys_seen = 0  # the size of state.pods.term_label_keys the shapes were made at
        self._membership: tuple[int, int, int] | None = None  # the queues they were made at

    def follow(self) -> None:
        """Drop every shape if affinity terms read more labels now, or pods may be in other
        queues now: pods that shared a shape may differ now."""
        state = self._state
        membership = state.membership_version() if state.queues else None
        if (
            len(state.pods.term_label_keys) != self._label_keys_seen
            or membership != self._membership
        ):
            self._label_keys_seen = len(state.pods.term_label_keys)
            self._membership = membership
            self._shapes.clear()
            self._kin.clear()
            self._dropped()

    def forget(self, pod_key: str) -> None:
        self._shapes.pop(pod_key, None)
        self._kin.pop(pod_key, None)

    def shape(self, profile: str, keys: ShapeKeys, pod: Pod) -> Hashable | None:
        """What an attempt of `profile` reads of the pod; None if a filter reads more."""
        return self._level(self._shapes, profile, keys.key, pod)

    def twin(self, profile: str, keys: ShapeKeys, pod: Pod) -> Hashable | None:
        """A key shared by pods that get the same answer in the current state once their
        plugins' `verdicts` are equal too: the shape with `kin_reads` for `reads`
        (`ShapeKeys.kin_key`), for pods without a nomination."""
        if pod.key in self._state.nominations:
            return None
        return self._level(self._kin, profile, keys.kin_key, pod)

    def _level(
        self,
        kept: dict[str, Hashable | None],
        profile: str,
        key: Callable[[ClusterState, Pod, Demand], Hashable | None],
        pod: Pod,
    ) -> Hashable | None:
        """`key` (level 3) with what the rest of an attempt reads of the pod, kept per pod
        in `kept`."""
        self.follow()
        pod_key = pod.key
        if pod_key in kept:
            return kept[pod_key]
        state = self._state
        shape = key(state, pod, state.pods.demand(pod))
        found = None
        if shape is not None:
            # With queues, a pod's queue decides its admission, whom it may preempt and
            # reclaim.
            queue = state.queue_of(pod) if state.queues else None
            priority, policy = pod.priority, pod.preemption_policy
            found = Hashed((profile, shape, priority, policy, group_key_of(pod), queue))
        kept[pod_key] = found
        return found

    def group(
        self, profile: str, keys: ShapeKeys, pod: Pod, rejected_by: frozenset[str]
    ) -> HintGroup:
        """The pods whose hints one check answers: those of one shape without a nomination
        (or the pod alone: a nominated pod's room is held for it, its twins would fail
        where it fits) rejected by the same plugins. The shape, not the twin key: a hint
        answers for the pod it is asked about, and pods told apart by their verdicts may
        get other answers."""
        nominated = pod.key in self._state.nominations
        shape = None if nominated else self.shape(profile, keys, pod)
        return (pod.key if shape is None else shape, rejected_by)
