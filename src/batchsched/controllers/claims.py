"""DRA claims after a pod is gone, as the resourceclaim controller has them (docs/dra.md).

The one-shot run and the simulator have no resourceclaim controller: they play it here. In a
cluster the controller does it, and the informers report the result.
"""

from __future__ import annotations

from batchsched.objects.dra import EXTENDED_CLAIM_SUFFIX
from batchsched.objects.records import Pod
from batchsched.plugins.dynamicresources.plugin import claim_key
from batchsched.state.cluster import ClusterState


def release_claims(state: ClusterState, pod: Pod, node: str) -> None:
    """The pod on `node` is gone: its own claims are deleted, it leaves the others'
    reservations (see `DeviceState.pod_gone`)."""
    if not pod.resource_claims and not state.devices.claims:
        return  # (every pod of a replay without devices)
    extended = f"{pod.namespace}/{pod.name}{EXTENDED_CLAIM_SUFFIX}"
    if not pod.resource_claims and extended not in state.devices.claims:
        return
    named: list[str] = []
    owned = [extended]
    for i, ref in enumerate(pod.resource_claims):
        (named if ref.claim_name else owned).append(claim_key(pod, i))
    state.devices.pod_gone(pod.namespace, pod.name, named, owned, node)
