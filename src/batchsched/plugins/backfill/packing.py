"""Preemption takes the least room (docs/backfill.md#preemption-takes-the-least-room).

Among the nodes preemption finds equally good by kube-scheduler's criteria down to the number
of victims, Backfill puts first the one whose victims hold the least of what the pod asks
for: victims counted by their size, not only by their number, as Slurm's job size factor
ranks small jobs below large ones. Otherwise the node whose victims started last wins, and
with reservations that is mostly a whole-node pod just started on the node its reservation
drained: a half-node preemptor evicting it empties the node again, and its restart needs
another whole node.
"""

from __future__ import annotations

from collections.abc import Sequence

from batchsched.objects.records import Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.resources import Demand


def evicted_share(state: ClusterState, demand: Demand, row: int, victims: Sequence[Pod]) -> float:
    """What the `victims` on node `row` request of the resources in `demand` (the pod count
    aside), as shares of the node's allocatable, summed over those resources."""
    nodes = state.nodes
    bound = state.pods.bound
    pods = nodes.resources.get("pods")
    wanted = {col for col in demand.cols.tolist() if col != pods}
    total = 0.0
    for victim in victims:
        if bound.get(victim.key) != row:
            continue  # a member of its gang elsewhere: not this node's room
        took = state.pods.demand(victim)
        for col, amount in zip(took.cols.tolist(), took.amounts.tolist(), strict=True):
            allocatable = int(nodes.allocatable[row, col])
            if col in wanted and allocatable > 0:
                total += amount / allocatable
    return total
