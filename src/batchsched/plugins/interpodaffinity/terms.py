"""Affinity terms resolved for the pod that carries them.

A term selects pods by label in a set of namespaces: those it lists, plus those whose labels
its `namespaceSelector` matches (`{}`: every namespace); with neither, its owner's namespace.
`matchLabelKeys` / `mismatchLabelKeys` join the selector with the owner's label values.
Namespaces are known from Namespace objects (files, or watched live); a namespace batchsched
has no object for has no labels.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchsched.objects.records import AffinityTerm, Pod, Selector
from batchsched.state.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class Term:
    """A term with its owner's namespace and labels applied (hashable: a counting scope)."""

    selector: Selector
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: Selector | None
    weight: int = 0

    def in_namespace(self, namespace: str, state: ClusterState) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return False
        ns = state.policy.namespaces.get(namespace)
        return self.namespace_selector.matches_labels(ns.labels if ns is not None else {})

    def matches(self, pod: Pod, state: ClusterState) -> bool:
        return self.in_namespace(pod.namespace, state) and self.selector.matches(pod)


def resolve(term: AffinityTerm, owner: Pod) -> Term:
    namespaces = frozenset(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces = frozenset({owner.namespace})
    selector = term.selector.with_label_keys(
        owner.labels, term.match_label_keys, term.mismatch_label_keys
    )
    return Term(selector, term.topology_key, namespaces, term.namespace_selector, term.weight)


@dataclass(frozen=True, slots=True)
class TermScope:
    """The pods matching every one of some terms: a counting scope for MatchCounts.

    Each term's namespaces are fixed when the scope is made (`None`: every namespace), from
    the Namespace objects known then; a label change on a Namespace makes a new scope.
    """

    terms: tuple[Term, ...]
    allowed: tuple[frozenset[str] | None, ...]

    def includes(self, pod: Pod) -> bool:
        return all(
            (allowed is None or pod.namespace in allowed) and term.selector.matches(pod)
            for term, allowed in zip(self.terms, self.allowed, strict=True)
        )


def scope_of(terms: tuple[Term, ...], state: ClusterState) -> TermScope:
    allowed: list[frozenset[str] | None] = []
    for term in terms:
        selector = term.namespace_selector
        if selector is None:
            allowed.append(term.namespaces)
        elif selector == Selector():
            allowed.append(None)  # `namespaceSelector: {}`
        else:
            picked = {
                n for n, ns in state.policy.namespaces.items() if selector.matches_labels(ns.labels)
            }
            allowed.append(term.namespaces | picked)
    return TermScope(terms, tuple(allowed))
