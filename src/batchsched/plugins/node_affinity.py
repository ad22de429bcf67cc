"""NodeAffinity (Filter): `nodeSelector` and required node affinity.

Terms are ORed; within a term, `matchExpressions` (labels) and `matchFields`
(`metadata.name`) are ANDed. A pod pinned to nodes by name is resolved through the node index
instead of a scan, so DaemonSet pods cost O(1) here.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from batchsched.objects.records import Node, NodeSelectorTerm, Pod, Requirement
from batchsched.plugins.base import Rejection, StaticFilterPlugin
from batchsched.state.cluster import BoolArray, ClusterState

REASON = "node(s) didn't match Pod's node affinity/selector"


def requirement_holds(req: Requirement, labels: dict[str, str]) -> bool:
    value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None:
        return False
    try:
        number = int(value)
    except ValueError:
        return False
    bound = int(req.values[0])
    return number > bound if op == "Gt" else number < bound


def _named_nodes(state: ClusterState, fields: Sequence[Requirement]) -> BoolArray:
    mask = state.valid[: state.rows].copy()
    for req in fields:
        named = np.zeros(state.rows, dtype=np.bool_)
        for name in req.values:
            idx = state.node_index.get(name)
            if idx is not None:
                named[idx] = True
        if req.operator == "In":
            mask &= named
        elif req.operator == "NotIn":
            mask &= ~named
        elif req.operator == "DoesNotExist":
            mask[:] = False  # every node has a name
        elif req.operator != "Exists":
            mask[:] = False  # Gt/Lt on a name never holds
    return mask


def term_mask(state: ClusterState, term: NodeSelectorTerm) -> BoolArray:
    if not term.match_expressions and not term.match_fields:
        # An empty term matches no objects (k8s API semantics).
        return np.zeros(state.rows, dtype=np.bool_)
    mask = _named_nodes(state, term.match_fields)
    if term.match_expressions:
        for idx in np.flatnonzero(mask):
            node = state.nodes[idx]
            assert node is not None
            if not all(requirement_holds(r, node.labels) for r in term.match_expressions):
                mask[idx] = False
    return mask


def terms_mask(state: ClusterState, terms: Sequence[NodeSelectorTerm]) -> BoolArray:
    """Node rows matching any of the terms (a PersistentVolume's node affinity)."""
    mask = np.zeros(state.rows, dtype=np.bool_)
    for term in terms:
        mask |= term_mask(state, term)
    return mask


def _selector_holds(node: Node, selector: dict[str, str]) -> bool:
    return all(node.labels.get(k) == v for k, v in selector.items())


def _field_holds(req: Requirement, name: str) -> bool:
    """`_named_nodes` for one node: DoesNotExist, Gt and Lt never hold on a name."""
    if req.operator == "In":
        return name in req.values
    if req.operator == "NotIn":
        return name not in req.values
    return req.operator == "Exists"


def node_matches(node: Node, pod: Pod) -> bool:
    """`evaluate`'s verdict for one node."""
    if not _selector_holds(node, pod.node_selector):
        return False
    return not pod.required_terms or any(
        (term.match_expressions or term.match_fields)
        and all(_field_holds(r, node.name) for r in term.match_fields)
        and all(requirement_holds(r, node.labels) for r in term.match_expressions)
        for term in pod.required_terms
    )


class NodeAffinity(StaticFilterPlugin):
    name = "NodeAffinity"

    def shape(self, pod: Pod) -> Hashable | None:
        if any(term.match_fields for term in pod.required_terms):
            return None  # pinned by name: cheap to compute, useless to cache
        return (tuple(sorted(pod.node_selector.items())), pod.required_terms)

    def passes_row(self, state: ClusterState, pod: Pod, row: int) -> bool:
        node = state.nodes[row]
        return node is not None and node_matches(node, pod)

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        if not pod.node_selector and not pod.required_terms:
            return []
        if pod.required_terms:
            fits = np.zeros(state.rows, dtype=np.bool_)
            for term in pod.required_terms:
                fits |= term_mask(state, term)
        else:
            fits = state.valid[: state.rows].copy()
        if pod.node_selector:
            for idx in np.flatnonzero(fits):
                node = state.nodes[idx]
                assert node is not None
                if not _selector_holds(node, pod.node_selector):
                    fits[idx] = False
        rejected = state.valid[: state.rows] & ~fits
        return [Rejection(REASON, rejected, resolvable=False)] if rejected.any() else []
