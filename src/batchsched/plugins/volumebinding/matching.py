"""Matching a pod's unbound WaitForFirstConsumer claims to nodes, as upstream's binder does.

On a node, claims are taken smallest request first; each gets the smallest available PV of
its class that fits there (capacity, access modes, volume mode, VolumeAttributesClass,
selector, node affinity; a PV pre-bound to the claim is its only candidate), not chosen
for an earlier claim. A claim with no such PV is provisioned if its class has a provisioner
and its `allowedTopologies` admit the node, and the driver's published capacity has room
there (capacity.py; a claim whose provisioning node was already chosen stays with that node).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from batchsched.objects.volumes import (
    NO_PROVISIONER,
    PersistentVolume,
    PersistentVolumeClaim,
)
from batchsched.plugins.volumebinding.affinity import AffinityIndex
from batchsched.plugins.volumebinding.capacity import CapacityIndex
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray

BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"


@dataclass(slots=True)
class ClaimOptions:
    claim: PersistentVolumeClaim
    volumes: list[tuple[str, BoolArray]]  # candidate PVs, best first, with their nodes
    provision: BoolArray  # nodes where the claim can be provisioned
    short: BoolArray  # nodes where it could be, but the driver's capacity has no room

    def with_room(self) -> ClaimOptions:
        """As if every node had room (to tell "no room" from "no way" apart)."""
        return ClaimOptions(self.claim, self.volumes, self.provision | self.short, self.short)

    def anywhere(self) -> BoolArray:
        mask = self.provision.copy()
        for _, nodes in self.volumes:
            mask |= nodes
        return mask


def serves(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    # As upstream's FindMatchingVolume, a PV pre-bound to the claim must still be large
    # enough, of its volume mode and of its VolumeAttributesClass (unset and "" are alike);
    # class, phase, selector and access modes are asked of the others only.
    if pv.claim_ref and pv.claim_ref != claim.key:
        return False
    if pv.deleting or pv.capacity < claim.request or pv.volume_mode != claim.volume_mode:
        return False
    if pv.attributes_class != claim.attributes_class:
        return False
    if pv.claim_ref:
        return True
    if pv.phase != "Available" or pv.storage_class != claim.storage_class:
        return False
    if claim.selector is not None and not claim.selector.matches(pv.labels):
        return False
    return set(claim.access_modes) <= set(pv.access_modes)


def options(
    state: ClusterState,
    index: AffinityIndex,
    capacity: CapacityIndex,
    claims: Sequence[PersistentVolumeClaim],
) -> list[ClaimOptions]:
    """Each claim's candidates, claims in the order they are matched."""
    volumes = state.volumes
    out = []
    everywhere = state.nodes.valid[: state.nodes.rows].copy()
    for claim in sorted(claims, key=lambda c: (c.request, c.key)):
        fitting = [pv for pv in volumes.volumes.values() if serves(pv, claim)]
        fitting.sort(key=lambda pv: (pv.claim_ref != claim.key, pv.capacity, pv.name))
        if fitting and fitting[0].claim_ref == claim.key:
            # As upstream's FindMatchingVolume: a claim's pre-bound PV is its only PV; on a
            # node outside that PV's affinity the claim matches nothing (it may still be
            # provisioned), rather than falling back to another PV.
            fitting = fitting[:1]
        candidates = [
            (pv.name, index.mask(state, pv.node_affinity) if pv.node_affinity else everywhere)
            for pv in fitting
        ]
        provision = np.zeros(state.nodes.rows, dtype=np.bool_)
        storage_class = volumes.classes.get(claim.storage_class)
        if storage_class is not None and storage_class.provisioner != NO_PROVISIONER:
            if claim.selected_node:
                row = state.nodes.row_of.get(claim.selected_node)
                if row is not None:
                    provision[row] = True
            elif storage_class.allowed_topologies:
                provision = index.mask(state, storage_class.allowed_topologies)
            else:
                provision = everywhere.copy()
        short = np.zeros(state.nodes.rows, dtype=np.bool_)
        if claim.selected_node:
            candidates = []  # being provisioned for its node already
        elif storage_class is not None and provision.any():
            room = capacity.room(state, storage_class, claim.request)
            if room is not None:
                short = provision & ~room
                provision &= room
        out.append(ClaimOptions(claim, candidates, provision, short))
    return out


def choose(claims: Sequence[ClaimOptions], row: int) -> dict[str, str] | None:
    """Claim key -> PV name ("" to provision) on node `row`, or None if one cannot be
    served there."""
    chosen: dict[str, str] = {}
    taken: set[str] = set()
    for option in claims:
        pick = next(
            (name for name, nodes in option.volumes if nodes[row] and name not in taken), None
        )
        if pick is not None:
            taken.add(pick)
            chosen[option.claim.key] = pick
        elif option.provision[row]:
            chosen[option.claim.key] = ""
        else:
            return None
    return chosen


def feasible(claims: Sequence[ClaimOptions], candidates: BoolArray) -> BoolArray:
    """Nodes among `candidates` where every claim can be served at once."""
    fits = candidates.copy()
    for option in claims:
        fits &= option.anywhere()
    if len(claims) > 1:
        for row in np.flatnonzero(fits):
            if choose(claims, int(row)) is None:
                fits[row] = False
    return fits
