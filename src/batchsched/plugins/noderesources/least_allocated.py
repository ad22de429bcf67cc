"""NodeResourcesFit's LeastAllocated strategy (kube-scheduler's default): favour nodes with the
most room left after the pod, 100·(allocatable − requested)/allocatable per resource,
weighted."""

from __future__ import annotations

import numpy as np

from batchsched.plugins.noderesources.resource_allocation import (
    NodeUsage,
    Usage,
    node_shares,
    shares,
)
from batchsched.state.nodes import IntArray


def least_allocated(use: Usage, rows: int) -> IntArray:
    return shares(use, rows, lambda requested, alloc: alloc - np.minimum(requested, alloc))


def least_allocated_node(use: NodeUsage) -> int:
    return node_shares(use, lambda requested, alloc: alloc - min(requested, alloc))
