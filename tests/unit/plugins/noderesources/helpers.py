"""A cluster of given nodes and one pod's scoring cycle, for the NodeResources scorers."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from batchsched.framework.interface import Cycle
from batchsched.objects.records import Node, Pod
from batchsched.plugins.noderesources.resource_allocation import (
    Columns,
    NodeUsage,
    ScoredResource,
    Usage,
    node_usage,
    usage,
)
from batchsched.state.cluster import ClusterState

CPU_MEM = (ScoredResource("cpu", 1), ScoredResource("memory", 1))


def cycle(
    nodes: list[dict[str, int]], pod: dict[str, int], bound: list[tuple[int, Pod]] = ()
) -> Cycle:  # type: ignore[assignment]
    state = ClusterState()
    for i, allocatable in enumerate(nodes):
        state.upsert_node(Node(f"n{i}", allocatable))
    for row, other in bound:
        other.node_name = f"n{row}"
        state.upsert_pod(other)
    new = Pod("ns", "new", requests={**pod, "pods": 1})
    state.upsert_pod(new)
    return Cycle(
        state, new, datetime(2026, 1, 1, tzinfo=UTC), state.pods.demand(new), state.free_for(new)
    )


def all_rows(
    c: Cycle, resources: tuple[ScoredResource, ...] = CPU_MEM, nonzero: bool = False
) -> Usage:
    return usage(c, slice(0, c.state.nodes.rows), Columns(resources, nonzero)(c))


def one_row(
    c: Cycle, row: int, resources: tuple[ScoredResource, ...] = CPU_MEM, nonzero: bool = False
) -> NodeUsage:
    return node_usage(c, row, Columns(resources, nonzero)(c))


def rows(c: Cycle) -> np.ndarray:  # type: ignore[type-arg]
    return np.arange(c.state.nodes.rows, dtype=np.intp)
