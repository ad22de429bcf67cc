"""NodeAffinity (Filter, Score): `nodeSelector`, required and preferred node affinity.

Name: NodeAffinity. Extension points: Filter (static), Score (static).

Terms are ORed; within a term, `matchExpressions` (labels) and `matchFields`
(`metadata.name`) are ANDed. A pod pinned to nodes by name is resolved through the node index
instead of a scan, so DaemonSet pods cost O(1) here. Score: the sum of the weights of the
preferred terms a node matches, normalised so the best feasible node scores 100.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from batchsched.framework.interface import (
    Rejection,
    StaticFilterPlugin,
    StaticScorePlugin,
    normalize_by_max,
)
from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import read_node_affinity
from batchsched.objects.records import Node, NodeSelectorTerm, Pod, Requirement
from batchsched.plugins.args import ArgsReader
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray

REASON = "node(s) didn't match Pod's node affinity/selector"
ENFORCED_REASON = "node(s) didn't match scheduler-enforced node affinity"
_UNCONSTRAINED: Hashable = ((), ())  # the shape of a pod with no selector and no terms


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
    mask = state.nodes.valid[: state.nodes.rows].copy()
    for req in fields:
        named = np.zeros(state.nodes.rows, dtype=np.bool_)
        for name in req.values:
            idx = state.nodes.row_of.get(name)
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
        return np.zeros(state.nodes.rows, dtype=np.bool_)
    mask = _named_nodes(state, term.match_fields)
    if term.match_expressions:
        for idx in np.flatnonzero(mask):
            node = state.nodes.by_row[idx]
            assert node is not None
            if not all(requirement_holds(r, node.labels) for r in term.match_expressions):
                mask[idx] = False
    return mask


def terms_mask(state: ClusterState, terms: Sequence[NodeSelectorTerm]) -> BoolArray:
    """Node rows matching any of the terms (a PersistentVolume's node affinity)."""
    mask = np.zeros(state.nodes.rows, dtype=np.bool_)
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


def terms_hold(node: Node, terms: tuple[NodeSelectorTerm, ...]) -> bool:
    """`term_mask` ORed over `terms`, for one node."""
    return any(
        (term.match_expressions or term.match_fields)
        and all(_field_holds(r, node.name) for r in term.match_fields)
        and all(requirement_holds(r, node.labels) for r in term.match_expressions)
        for term in terms
    )


def node_matches(node: Node, pod: Pod) -> bool:
    """The pod's own node selector and required terms hold on `node`."""
    if not _selector_holds(node, pod.node_selector):
        return False
    return not pod.required_terms or terms_hold(node, pod.required_terms)


class NodeAffinity(StaticFilterPlugin, StaticScorePlugin):
    """Args (NodeAffinityArgs): `addedAffinity`, a node affinity every pod of the profile
    gets besides its own: its required terms must hold too, its preferred terms add up."""

    name = "NodeAffinity"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(self.name, args, ("addedAffinity",))
        added = reader.get("addedAffinity", dict, {})
        try:
            self.added_required, self.added_preferred = read_node_affinity(
                added, self.name, "args.addedAffinity"
            )
        except ManifestError as err:
            raise reader.fail(err.field.removeprefix("args."), err.what) from None

    def score_shape(self, pod: Pod) -> Hashable | None:
        return pod.preferred_terms if pod.preferred_terms or self.added_preferred else None

    def raw_scores(self, state: ClusterState, pod: Pod) -> IntArray | None:
        raw = np.zeros(state.nodes.rows, dtype=np.int64)
        for preferred in (*pod.preferred_terms, *self.added_preferred):
            raw += term_mask(state, preferred.term) * preferred.weight
        return raw if raw.any() else None

    def normalize(self, raw: IntArray, feasible: BoolArray) -> IntArray:
        return normalize_by_max(raw, feasible)

    def shape(self, pod: Pod) -> Hashable | None:
        if not pod.node_selector and not pod.required_terms:
            return _UNCONSTRAINED
        if any(term.match_fields for term in pod.required_terms):
            return None  # pinned by name: cheap to compute, useless to cache
        return (tuple(sorted(pod.node_selector.items())), pod.required_terms)

    def passes_row(self, state: ClusterState, pod: Pod, row: int) -> bool:
        node = state.nodes.by_row[row]
        if node is None or not node_matches(node, pod):
            return False
        return not self.added_required or terms_hold(node, self.added_required)

    def evaluate(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        own = self._own(state, pod)
        if not self.added_required:
            return own
        # As kube-scheduler: the scheduler-enforced affinity is judged first, and a node
        # reports one reason.
        fits = terms_mask(state, self.added_required)
        enforced = state.nodes.valid[: state.nodes.rows] & ~fits
        rest = [Rejection(r.reason, r.nodes & fits, r.resolvable) for r in own]
        return [Rejection(ENFORCED_REASON, enforced, resolvable=False), *rest]

    def _own(self, state: ClusterState, pod: Pod) -> Sequence[Rejection]:
        """Nodes the pod's own selector and required terms rule out."""
        if not pod.node_selector and not pod.required_terms:
            return []
        if pod.required_terms:
            fits = np.zeros(state.nodes.rows, dtype=np.bool_)
            for term in pod.required_terms:
                fits |= term_mask(state, term)
        else:
            fits = state.nodes.valid[: state.nodes.rows].copy()
        if pod.node_selector:
            for idx in np.flatnonzero(fits):
                node = state.nodes.by_row[idx]
                assert node is not None
                if not _selector_holds(node, pod.node_selector):
                    fits[idx] = False
        rejected = state.nodes.valid[: state.nodes.rows] & ~fits
        return [Rejection(REASON, rejected, resolvable=False)] if rejected.any() else []
