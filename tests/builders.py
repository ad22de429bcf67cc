"""Manifest builders for tests: plain dicts as `kubectl get -o json` would print them."""

from __future__ import annotations

from typing import Any

Manifest = dict[str, Any]


def node(
    name: str,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    **extended: str,
) -> Manifest:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    allocatable.update({k.replace("__", "/").replace("_", "."): v for k, v in extended.items()})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": allocatable},
    }


def pod(
    name: str,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    namespace: str = "default",
    node_name: str = "",
    priority_class: str = "",
    priority: int | None = None,
    scheduler: str = "batchsched",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    affinity: dict[str, Any] | None = None,
    phase: str = "",
    created: str = "2026-11-22T09:00:00Z",
    scheduled_at: str | None = None,
    extra_requests: dict[str, str] | None = None,
    **spec_extra: Any,
) -> Manifest:
    requests = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra_requests or {})
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "x", "resources": {"requests": requests}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = affinity
    spec.update(spec_extra)
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if scheduled_at:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_at}
        ]
        status["startTime"] = scheduled_at
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": annotations or {},
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": status,
    }


def priority_class(
    name: str,
    value: int,
    global_default: bool = False,
    annotations: dict[str, str] | None = None,
    preemption_policy: str | None = None,
) -> Manifest:
    pc: Manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "annotations": annotations or {}},
        "value": value,
        "globalDefault": global_default,
    }
    if preemption_policy:
        pc["preemptionPolicy"] = preemption_policy
    return pc


def pod_group(name: str, min_member: int, namespace: str = "ml", **spec: Any) -> Manifest:
    """A PodGroup; members join it with the label `scheduling.x-k8s.io/pod-group: name`."""
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, **spec},
    }


def upstream_group(
    name: str,
    min_count: int | None,
    version: str = "v1beta1",
    namespace: str = "ml",
    **spec: Any,
) -> Manifest:
    """An upstream (scheduling.k8s.io) PodGroup: gang with minCount, or basic when None.
    Members join it with `spec.schedulingGroup.podGroupName` (pod(..., schedulingGroup=...))."""
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": policy, **spec},
    }
