"""The constraints that apply to a pod: its own, or the cluster's defaults, with selectors
resolved (`matchLabelKeys` merged from the pod's labels).

Defaults (PodTopologySpreadArgs) apply only to a pod that declares no constraint. Upstream
selects the pods to spread with the selectors of the Services, ReplicaSets, StatefulSets and
ReplicationControllers that select the pod; batchsched reads none of those objects and uses
the pod's controller instead (pods with the same ReplicaSet, StatefulSet or
ReplicationController owner), which is what the controller's selector matches in practice.
A pod with no such controller gets no default constraint.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from batchsched.objects.records import Pod, Selector, SpreadConstraint
from batchsched.plugins.podtopologyspread.domains import HOSTNAME, ZONE

DEFAULT_OWNER_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
SYSTEM_DEFAULTS = (
    SpreadConstraint(max_skew=3, topology_key=HOSTNAME, hard=False, selector=Selector()),
    SpreadConstraint(max_skew=5, topology_key=ZONE, hard=False, selector=Selector()),
)


@dataclass(frozen=True, slots=True)
class PodConstraints:
    hard: tuple[SpreadConstraint, ...]
    soft: tuple[SpreadConstraint, ...]
    system_defaulted: bool  # then nodes missing a key still score (upstream's rule)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.topology_key for c in self.hard))

    @property
    def soft_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.topology_key for c in self.soft))


NONE = PodConstraints((), (), False)


def _merged(constraint: SpreadConstraint, pod: Pod) -> SpreadConstraint:
    """`matchLabelKeys` merged into the selector with the pod's labels."""
    if not constraint.match_label_keys:
        return constraint
    selector = constraint.selector.with_label_keys(pod.labels, constraint.match_label_keys)
    return replace(constraint, selector=selector, match_label_keys=())


def _owner(pod: Pod) -> tuple[str, str] | None:
    for ref in pod.owner_references:
        if ref.controller and ref.kind in DEFAULT_OWNER_KINDS:
            return (ref.kind, ref.name)
    return None


def constraints_of(
    pod: Pod, defaults: tuple[SpreadConstraint, ...], system: bool
) -> PodConstraints:
    if pod.spread_constraints:
        own = tuple(_merged(c, pod) for c in pod.spread_constraints)
        return PodConstraints(
            tuple(c for c in own if c.hard), tuple(c for c in own if not c.hard), False
        )
    owner = _owner(pod)
    if owner is None or not defaults:
        return NONE
    resolved = tuple(replace(c, selector=Selector(owner=owner)) for c in defaults)
    return PodConstraints(
        tuple(c for c in resolved if c.hard), tuple(c for c in resolved if not c.hard), system
    )
