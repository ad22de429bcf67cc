"""The group event a pass's end may tell (docs/gang.md): running members that can no longer
reach minMember. The status itself is the PodGroup status controller's
(controllers/podgroups.py)."""

from __future__ import annotations

from collections.abc import Sequence

from batchsched.objects.records import Pod, PodGroup


def stranded_message(group: PodGroup, members: Sequence[Pod]) -> str:
    """The Unschedulable event text when running members can no longer reach minMember."""
    running = sum(1 for p in members if p.node_name and not p.terminated)
    if not running:
        return ""
    succeeded = sum(1 for p in members if p.phase == "Succeeded")
    pending = sum(1 for p in members if not p.node_name and not p.terminated)
    if succeeded + pending + running >= group.min_member:
        return ""
    return (
        f"Unschedulable: {running} running, {succeeded} succeeded and {pending} pending "
        f"members, fewer than minMember {group.min_member}"
    )
