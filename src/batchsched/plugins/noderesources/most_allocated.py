"""NodeResourcesFit's MostAllocated strategy (bin packing, usually wanted for GPUs): favour
the fullest nodes, 100·requested/allocatable per resource (capped at 100), weighted."""

from __future__ import annotations

import numpy as np

from batchsched.plugins.noderesources.resource_allocation import (
    NodeUsage,
    Usage,
    node_shares,
    shares,
)
from batchsched.state.nodes import IntArray


def most_allocated(use: Usage, rows: int) -> IntArray:
    return shares(use, rows, lambda requested, alloc: np.minimum(requested, alloc))


def most_allocated_node(use: NodeUsage) -> int:
    return node_shares(use, lambda requested, alloc: min(requested, alloc))
