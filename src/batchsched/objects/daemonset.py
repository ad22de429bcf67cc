"""Recognising DaemonSet pods (docs/daemonset.md).

A DaemonSet pod is one owned by a DaemonSet whose required node affinity names exactly one
node through `matchFields` `metadata.name` (how the DaemonSet controller pins its pods). Such a
pod can only run on that node: general preemption never runs for it.
"""

from __future__ import annotations

from batchsched.objects.records import Pod


def is_daemonset_owned(pod: Pod) -> bool:
    return any(ref.kind == "DaemonSet" for ref in pod.owner_references)


def daemonset_node(pod: Pod) -> str | None:
    """The one node a DaemonSet pod must run on, or None if it is no DaemonSet pod."""
    if not is_daemonset_owned(pod):
        return None
    if pod.node_name:
        return pod.node_name
    names: set[str] = set()
    for term in pod.required_terms:
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In":
                names.update(req.values)
    return next(iter(names)) if len(names) == 1 else None
