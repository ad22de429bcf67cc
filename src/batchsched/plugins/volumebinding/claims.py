"""A pod's claims as the volume plugins see them, resolved once per scheduling cycle.

The checks and their messages follow upstream VolumeBinding's PreFilter: a claim that is
missing, lost, being deleted or (generic ephemeral) not owned by the pod makes the pod wait;
so does an unbound claim of an Immediate class, which the PV controller binds by itself.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from batchsched.framework.interface import ClusterChange, ClusterEvent, Cycle, QueueingHint
from batchsched.objects.records import Pod
from batchsched.objects.volumes import (
    WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
)

_SCRATCH = "volumebinding.claims"


@dataclass(slots=True)
class PodClaims:
    # Bound claims with their volume (None: bound to a volume that does not exist).
    bound: list[tuple[PersistentVolumeClaim, PersistentVolume | None]] = field(default_factory=list)
    unbound: list[PersistentVolumeClaim] = field(default_factory=list)
    error: str = ""  # why the pod cannot be scheduled anywhere now


def volume_events() -> Mapping[ClusterEvent, QueueingHint | None]:
    """The events after which a volume plugin's rejection may lift (upstream registers PVC,
    PV, StorageClass, CSINode and Node events, and pods deleted, for these plugins): the
    volume objects or nodes changed, or a pod with volumes or inline disks came or went (its
    claims' users, its disks, its attachments)."""
    return {
        ClusterEvent.NODE: None,
        ClusterEvent.VOLUME: None,
        ClusterEvent.NODE_ROOM: _pod_with_volumes_moved,
    }


def _pod_with_volumes_moved(change: ClusterChange, pod: Pod) -> bool:
    return change.pods_where(lambda other: bool(other.volumes or other.disks))


def claims_read(pod: Pod) -> Hashable:
    """What the volume plugins read of a pod: pods naming the same claims get one answer."""
    if not pod.volumes:
        return (pod.namespace,)
    return (pod.namespace, *(volume.claim for volume in pod.volumes))


def pod_claims(cycle: Cycle) -> PodClaims:
    claims = cycle.scratch.get(_SCRATCH)
    if not isinstance(claims, PodClaims):
        claims = _resolve(cycle)
        cycle.scratch[_SCRATCH] = claims
    return claims


def _resolve(cycle: Cycle) -> PodClaims:
    pod = cycle.pod
    volumes = cycle.state.volumes
    out = PodClaims()
    immediate = False
    for volume in pod.volumes:
        claim = volumes.claims.get(f"{pod.namespace}/{volume.claim}")
        if claim is None:
            out.error = (
                "waiting for ephemeral volume controller to create the persistentvolumeclaim "
                f'"{volume.claim}"'
                if volume.ephemeral
                else f'persistentvolumeclaim "{volume.claim}" not found'
            )
            return out
        if claim.phase == "Lost":
            out.error = (
                f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume '
                f'"{claim.volume_name}"'
            )
            return out
        if claim.deletion_timestamp is not None:
            out.error = f'persistentvolumeclaim "{claim.name}" is being deleted'
            return out
        if volume.ephemeral and pod.uid not in claim.owner_uids:
            out.error = f"PVC {claim.key} was not created for pod {pod.key} (pod is not owner)"
            return out
        if claim.bound:
            out.bound.append((claim, volumes.volumes.get(claim.volume_name)))
            continue
        delayed = False
        if claim.storage_class:
            storage_class = volumes.classes.get(claim.storage_class)
            if storage_class is None:
                out.error = f'storageclass.storage.k8s.io "{claim.storage_class}" not found'
                return out
            delayed = storage_class.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER
        if delayed and not claim.volume_name:
            out.unbound.append(claim)
        else:
            immediate = True  # a pre-bound claim waits for the PV controller like these
    if immediate:
        out.error = "pod has unbound immediate PersistentVolumeClaims"
    return out
