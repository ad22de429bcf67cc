"""A PersistentVolume's node affinity as a node mask.

Local PVs name their node (`kubernetes.io/hostname In [n]`): a term made only of `In`
expressions is answered from an index of rows per label value, built once per label key
until nodes change, instead of a scan of every node per pod. Other terms are matched as
NodeAffinity matches them. A CSI-migrated in-tree PV is checked, on the nodes whose CSINode
lists its plugin as migrated, against the node affinity it translates to (as upstream's
binder does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from batchsched.objects.records import NodeSelectorTerm
from batchsched.objects.volumes import PersistentVolume
from batchsched.plugins.nodeaffinity.plugin import terms_mask
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray


class AffinityIndex:
    def __init__(self) -> None:
        self._generation = -1
        self._rows: dict[str, dict[str, list[int]]] = {}  # key -> value -> node rows
        self._migrated: dict[str, BoolArray] = {}  # in-tree plugin -> rows migrating it
        self._migrated_at: tuple[int, int, int] | None = None

    def volume_mask(self, state: ClusterState, pv: PersistentVolume) -> BoolArray | None:
        """Node rows the PV's node affinity admits (None: every node)."""
        plain = self.mask(state, pv.node_affinity) if pv.node_affinity else None
        if not pv.migrated_plugin or pv.untranslatable:
            return plain
        migrated = self.migrated_rows(state, pv.migrated_plugin)
        if not migrated.any():
            return plain
        translated = self.mask(state, pv.migrated_affinity) if pv.migrated_affinity else None
        if plain is None and translated is None:
            return None
        everywhere = np.ones(state.nodes.rows, dtype=np.bool_)
        return np.where(
            migrated,
            everywhere if translated is None else translated,
            everywhere if plain is None else plain,
        )

    def migrated_rows(self, state: ClusterState, plugin: str) -> BoolArray:
        """Node rows whose CSINode lists the in-tree plugin as migrated."""
        at = (state.volumes.csi_version, state.nodes.generation, state.nodes.rows)
        if at != self._migrated_at:
            self._migrated, self._migrated_at = {}, at
        rows = self._migrated.get(plugin)
        if rows is None:
            rows = np.zeros(state.nodes.rows, dtype=np.bool_)
            for name, csi_node in state.volumes.csi_nodes.items():
                row = state.nodes.row_of.get(name)
                if row is not None and plugin in csi_node.migrated_plugins:
                    rows[row] = True
            self._migrated[plugin] = rows
        return rows

    def mask(self, state: ClusterState, terms: Sequence[NodeSelectorTerm]) -> BoolArray:
        """Node rows matching any of the terms."""
        if state.nodes.generation != self._generation:
            self._rows.clear()
            self._generation = state.nodes.generation
        mask = np.zeros(state.nodes.rows, dtype=np.bool_)
        for term in terms:
            simple = term.match_expressions and not term.match_fields
            if simple and all(r.operator == "In" for r in term.match_expressions):
                mask |= self._in_term(state, term)
            else:
                mask |= terms_mask(state, (term,))
        return mask

    def _in_term(self, state: ClusterState, term: NodeSelectorTerm) -> BoolArray:
        found = state.nodes.valid[: state.nodes.rows].copy()
        for req in term.match_expressions:
            by_value = self._by_value(state, req.key)
            hit = np.zeros(state.nodes.rows, dtype=np.bool_)
            for value in req.values:
                hit[by_value.get(value, [])] = True
            found &= hit
        return found

    def _by_value(self, state: ClusterState, key: str) -> dict[str, list[int]]:
        by_value = self._rows.get(key)
        if by_value is None:
            by_value = {}
            for row, node in state.nodes.live():
                value = node.labels.get(key)
                if value is not None:
                    by_value.setdefault(value, []).append(row)
            self._rows[key] = by_value
        return by_value
