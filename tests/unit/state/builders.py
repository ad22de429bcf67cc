"""A small cluster for the state's tests: node `a` (4 cpu, 8 GiB, 10 pods) and pods on it."""

from dataclasses import replace

from batchsched.objects.records import Node, Pod
from batchsched.state.cluster import ClusterState

GI = 2**30


def state_with(*pods: Pod) -> ClusterState:
    state = ClusterState()
    state.upsert_node(Node("a", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    for pod in pods:
        state.upsert_pod(pod)
    return state


def pending(name: str, cpu: int, priority: int) -> Pod:
    return Pod("ns", name, requests={"cpu": cpu, "pods": 1}, priority=priority)


def on_a(*names: str) -> ClusterState:
    pods = [pending(name, 100, 0) for name in names]
    for pod in pods:
        pod.node_name = "a"
    return state_with(*pods)


def on_two_nodes() -> ClusterState:
    """Node a with x, y, z (y without requests: it counts the non-zero defaults); node b
    with v, w (w as read from a manifest, with its own non-zero requests)."""
    state = state_with()
    state.upsert_node(Node("b", {"cpu": 4000, "memory": 8 * GI, "pods": 10}))
    pods = [pending("x", 100, 0), Pod("ns", "y", priority=0), pending("z", 100, 0)]
    pods += [pending("v", 100, 0), replace(pending("w", 100, 0), nonzero_requests=(300, GI))]
    for pod in pods:
        pod.node_name = "a" if pod.name in "xyz" else "b"
        state.upsert_pod(pod)
    return state
