"""VolumeBinding (PreFilter, Filter, Reserve, PreBind): a pod's claims must be usable on the
node.

PreFilter: a missing, lost or deleting claim, or an unbound claim of an Immediate class, keeps
the pod pending with upstream's message (preemption cannot help). Filter: every bound claim's
PersistentVolume must exist and its `nodeAffinity` must match the node (a CSI-migrated in-tree
PV's as translated, on nodes that migrated its plugin: affinity.py); every unbound claim of
a WaitForFirstConsumer class must be matched to an available PV there or be provisionable
there (matching.py). Reserve: the chosen PVs are assumed bound to their claims (or the claims
marked for provisioning on the node), so pods placed later do not take them, and the Binding
carries a PreBind step (decisions.BindVolumes) the world carries out before it: the one-shot
world reports it, the simulator binds at once, live mode writes it and waits for the PV
controller (live/volume_binder.py). A PodGroup's tentative placement reserves and unreserves
its members' volumes as it goes (docs/volumes.md).

Score: how full the chosen PVs, or the driver's published capacity, would be (scoring.py).

Args (VolumeBindingArgs): `bindTimeoutSeconds`, how long PreBind waits (default 600);
`shape`, the Score's utilization -> score points (default {0: 10, 100: 0}).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.decisions import BindVolumes
from batchsched.framework.interface import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Rejection,
    ReservePlugin,
    ScorePlugin,
)
from batchsched.objects.records import Pod
from batchsched.plugins.args import ArgsReader
from batchsched.plugins.volumebinding.affinity import AffinityIndex
from batchsched.plugins.volumebinding.capacity import CapacityIndex
from batchsched.plugins.volumebinding.claims import claims_read, pod_claims, volume_events
from batchsched.plugins.volumebinding.matching import (
    BIND_CONFLICT,
    NOT_ENOUGH_SPACE,
    ClaimOptions,
    choose,
    feasible,
    options,
)
from batchsched.plugins.volumebinding.scoring import CapacityScorer, read_shape
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
_OPTIONS = "volumebinding.options"
DEFAULT_BIND_TIMEOUT = 600  # seconds, as upstream


class VolumeBinding(PreFilterPlugin, FilterPlugin, ReservePlugin, ScorePlugin):
    name = "VolumeBinding"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(self.name, args, ("bindTimeoutSeconds", "shape"))
        # Upstream takes any non-negative int64; int32 seconds (68 years) is wait enough.
        self.bind_timeout = reader.int_in("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT, 0)
        self._scorer = CapacityScorer(read_shape(reader))
        self._affinity = AffinityIndex()
        self._capacity = CapacityIndex()

    def skips(self, state: ClusterState, pod: Pod) -> bool:
        return not pod.volumes

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return volume_events()

    def reads(self, state: ClusterState, pod: Pod) -> Hashable:
        return claims_read(pod)

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        if not cycle.pod.volumes:
            return None
        error = pod_claims(cycle).error
        return PreFilterResult(reject=error) if error else None

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        claims = pod_claims(cycle)
        if any(volume is None for _, volume in claims.bound):
            return [Rejection(PV_NOT_EXIST, candidates, resolvable=False)]
        fits = candidates.copy()
        rejections = []
        for _, volume in claims.bound:
            assert volume is not None
            if volume.untranslatable:  # upstream's binder fails where it would translate
                rows = self._affinity.migrated_rows(cycle.state, volume.migrated_plugin)
                rejections.append(Rejection(volume.untranslatable, fits & rows, False))
                fits &= ~rows
            admitted = self._affinity.volume_mask(cycle.state, volume)
            if admitted is not None:
                fits &= admitted
        rows_out = candidates & ~fits
        for rejection in rejections:
            rows_out &= ~rejection.nodes
        rejections.append(Rejection(NODE_CONFLICT, rows_out, resolvable=False))
        if claims.unbound:
            found = self._options(cycle)
            matched = feasible(found, fits)
            possible = matched
            if any(option.short.any() for option in found):
                possible = feasible([option.with_room() for option in found], fits)
                space = possible & ~matched
                rejections.append(Rejection(NOT_ENOUGH_SPACE, space, resolvable=False))
            rejections.append(Rejection(BIND_CONFLICT, fits & ~possible, resolvable=False))
        return rejections

    def uniform(self, cycle: Cycle) -> bool:
        # Only claims the scheduler binds are scored: bound ones give every node 0.
        if not cycle.pod.volumes:
            return True
        claims = pod_claims(cycle)
        return bool(claims.error) or not claims.unbound

    def score(self, cycle: Cycle, feasible: BoolArray) -> IntArray:
        if self.uniform(cycle):
            return np.zeros(cycle.state.nodes.rows, dtype=np.int64)
        return self._scorer.scores(cycle.state, self._capacity, self._options(cycle), feasible)

    def reserve(self, cycle: Cycle, row: int) -> BindVolumes | None:
        if not cycle.pod.volumes:
            return None  # nothing to bind (and no claims to resolve)
        claims = pod_claims(cycle)
        if not claims.unbound:
            return None
        chosen = choose(self._options(cycle), row)
        assert chosen is not None, "reserve on a node the filter rejected"
        node = cycle.state.nodes.name(row)
        bindings = []
        for claim in claims.unbound:
            if claim.selected_node:
                continue  # its node was chosen by an earlier pod: it is being provisioned
            volumes = cycle.state.volumes
            bindings.append(volumes.bind(cycle.pod.key, claim, chosen[claim.key], node))
        if not bindings:
            return None
        csi_node = cycle.state.volumes.csi_nodes.get(node)
        migrated = csi_node.migrated_plugins if csi_node is not None else frozenset()
        placed = cycle.state.nodes.by_row[row]
        return BindVolumes(tuple(bindings), self.bind_timeout, placed, migrated)

    def unreserve(self, state: ClusterState, pod: Pod) -> None:
        state.volumes.revert(pod.key)

    def _options(self, cycle: Cycle) -> list[ClaimOptions]:
        found = cycle.scratch.get(_OPTIONS)
        if not isinstance(found, list):
            unbound = pod_claims(cycle).unbound
            found = options(cycle.state, self._affinity, self._capacity, unbound)
            cycle.scratch[_OPTIONS] = found
        return found
