"""PodGroup membership (SPEC section 4).

A pod belongs to the PodGroup `namespace/name` named by the annotation
`scheduling.k8s.io/group-name` (the seed, kube-batch, Volcano) or the label
`scheduling.x-k8s.io/pod-group` (scheduler-plugins); the annotation wins if both are set. A
group is always in the pod's own namespace.
"""

from __future__ import annotations

from batchsched.objects.records import Pod

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def group_key_of(pod: Pod) -> str | None:
    """The `namespace/name` key of the pod's PodGroup, or None if it belongs to none."""
    name = pod.annotations.get(GROUP_ANNOTATION) or pod.labels.get(GROUP_LABEL)
    return f"{pod.namespace}/{name}" if name else None
