"""PodGroup membership (docs/gang.md).

A pod belongs to the PodGroup `namespace/name` named by `spec.schedulingGroup.podGroupName`
(upstream's Workload API, a `scheduling.k8s.io` PodGroup), by the annotation
`scheduling.k8s.io/group-name` (the seed, kube-batch, Volcano) or by the label
`scheduling.x-k8s.io/pod-group` (scheduler-plugins); the last two name a `scheduling.x-k8s.io`
PodGroup, and the annotation wins if both are set. Naming a group through schedulingGroup and
one of the others is refused when the pod is read. A group is always in the pod's own
namespace.
"""

from __future__ import annotations

from batchsched.objects.records import Pod, PodGroup

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def group_key_of(pod: Pod) -> str | None:
    """The `namespace/name` key of the pod's PodGroup, or None if it belongs to none."""
    name = (
        pod.scheduling_group or pod.annotations.get(GROUP_ANNOTATION) or pod.labels.get(GROUP_LABEL)
    )
    return f"{pod.namespace}/{name}" if name else None


def kind_mismatch(pod: Pod, group: PodGroup) -> str:
    """Why `group` is not the kind of PodGroup the pod names, or "" if it is."""
    if bool(pod.scheduling_group) == group.upstream:
        return ""
    named = "scheduling.k8s.io" if pod.scheduling_group else "scheduling.x-k8s.io"
    return (
        f"the pod names a {named} PodGroup, but {group.key} is a {group.api_version} "
        "PodGroup: waiting for one of the named kind"
    )
