"""Which queue a pod names (docs/queues.md#which-queue-a-pod-is-in).

The label `batchsched.io/queue` on the pod (KAI's label `kai.scheduler/queue` and Volcano's
annotation `scheduling.volcano.sh/queue-name` count as the pod's own), or on its PodGroup (for
every member); else the label on its Namespace; else the Queue named `default`, if one exists.
DaemonSet pods, pods of priority 2,000,000,000 or more and pods Kueue admitted are in no queue.
Whether the queue exists and is a leaf is the tree's to say (state/queues.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from batchsched.objects.daemonset import is_daemonset_owned
from batchsched.objects.records import Namespace, Pod, PodGroup

QUEUE_LABEL = "batchsched.io/queue"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
KUEUE_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
DEFAULT_QUEUE = "default"
# system-cluster-critical, system-node-critical and anything as high are never held back.
SYSTEM_PRIORITY = 2_000_000_000


@dataclass(frozen=True, slots=True)
class NamedQueue:
    """The queue a pod names and where it is named ("" and "": none), or why its sources
    cannot be followed (`conflict`)."""

    name: str = ""
    where: str = ""
    conflict: str = ""


NONE = NamedQueue()
_DEFAULT = NamedQueue(DEFAULT_QUEUE, "")
_POD_LABEL = f"label {QUEUE_LABEL} of the pod"
_POD_KAI_LABEL = f"label {KAI_QUEUE_LABEL} of the pod"
_POD_VOLCANO_ANNOTATION = f"annotation {VOLCANO_QUEUE_ANNOTATION} of the pod"


def named_queue(pod: Pod, group: PodGroup | None, namespace: Namespace | None) -> NamedQueue:
    if (
        (pod.priority or 0) >= SYSTEM_PRIORITY
        or KUEUE_WORKLOAD_ANNOTATION in pod.annotations
        or is_daemonset_owned(pod)
    ):
        return NONE
    sources = [
        (_POD_LABEL, pod.labels.get(QUEUE_LABEL)),
        (_POD_KAI_LABEL, pod.labels.get(KAI_QUEUE_LABEL)),
        (_POD_VOLCANO_ANNOTATION, pod.annotations.get(VOLCANO_QUEUE_ANNOTATION)),
    ]
    if group is not None:
        sources.append(
            (f"label {QUEUE_LABEL} of PodGroup {group.key}", group.labels.get(QUEUE_LABEL))
        )
    named = [(where, value) for where, value in sources if value]
    if len(named) > 1 and len({value for _, value in named}) > 1:  # (asked once per pod)
        said = " but ".join(f"{where} says {value!r}" for where, value in named)
        return NamedQueue(conflict=f"queue: {said}")
    if named:
        where, value = named[0]
        return _named(value, where)
    if namespace is not None and namespace.labels.get(QUEUE_LABEL):
        return _named(
            namespace.labels[QUEUE_LABEL], f"label {QUEUE_LABEL} of Namespace {namespace.name}"
        )
    return _DEFAULT  # where "": the default, only if such a queue exists


@functools.lru_cache(maxsize=1024)
def _named(name: str, where: str) -> NamedQueue:
    """One record per queue and place it is named: asked once per pod, of few distinct ones."""
    return NamedQueue(name, where)
