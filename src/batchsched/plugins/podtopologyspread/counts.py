"""Pods in a scope (namespaces and selector), per node row, kept current from ClusterState's
change log.

One table per scope in use; a table recounts only the rows logged as changed since it was
last read (binds, deletions, evictions marked terminating), so an attempt costs O(changed
rows), not a scan of every pod. Shared by PodTopologySpread and InterPodAffinity.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from batchsched.objects.records import Pod, Selector
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import IntArray

_TABLES_KEPT = 64


class Scope(Hashable, Protocol):
    def includes(self, pod: Pod) -> bool: ...


@dataclass(frozen=True, slots=True)
class SpreadScope:
    """PodTopologySpread's: the pod's namespace and selector; terminating pods do not count."""

    namespace: str
    selector: Selector

    def includes(self, pod: Pod) -> bool:
        return (
            pod.namespace == self.namespace
            and pod.deletion_timestamp is None
            and self.selector.matches(pod)
        )


@dataclass(slots=True)
class _Table:
    counts: IntArray
    mark: int


class MatchCounts:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._tables: OrderedDict[Scope, _Table] = OrderedDict()

    def per_row(self, key: Scope) -> IntArray:
        """Pods in the scope on each node row (read only: the table is kept)."""
        state = self.state
        table = self._tables.get(key)
        changed = None if table is None else state.nodes.rows_changed_since(table.mark)
        if table is None or changed is None or table.counts.shape[0] != state.nodes.rows:
            table = _Table(np.zeros(state.nodes.rows, dtype=np.int64), 0)
            rows: list[int] | set[int] = list(range(state.nodes.rows))
        else:
            rows = set(changed)
        pods_on = state.nodes.pods_on
        for row in rows:
            table.counts[row] = sum(key.includes(p) for p in pods_on[row].values())
        table.mark = state.nodes.change_mark()
        self._tables[key] = table
        self._tables.move_to_end(key)
        while len(self._tables) > _TABLES_KEPT:
            self._tables.popitem(last=False)
        return table.counts
