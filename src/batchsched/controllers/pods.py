"""The steps after a pod is gone from a world that plays the cluster itself (one-shot, the
simulator): a victim whose eviction finished, a finished pod. In a cluster the informers
report the pod's deletion and the controllers' work instead."""

from __future__ import annotations

from batchsched.controllers.claims import release_claims
from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState


def pod_gone(state: ClusterState, key: str) -> Pod | None:
    """Remove the pod; a bound one's room is given back and its DRA claims released. The
    pod's record, or None if it was not there."""
    pod = state.pods.by_key.get(key)
    if pod is None:
        return None
    if key in state.pods.bound:
        release_claims(state, pod, pod.node_name)
    state.remove_pod(key)
    return pod
