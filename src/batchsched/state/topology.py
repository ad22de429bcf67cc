"""Topology domains (docs/topology.md): the nodes sharing a value of a label key, what a
gang asks of them, and what a search for one domain saw (for messages and explain).

Nodes without the label are in no domain. A gang's dominant resource is the one its members
ask the largest share of the cluster's allocatable of.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from batchsched.objects.quantity import PODS, format_amount
from batchsched.objects.records import Pod, TopologyRequest
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import LabelDomains


@dataclass(slots=True)
class DomainFit:
    """One domain as the search saw it: its free amount of the dominant resource and how
    many members fit there (0 when it was not tried for want of that resource)."""

    value: str
    free: int
    placed: int = 0


@dataclass(frozen=True, slots=True)
class DomainTry:
    """One domain as a preemption search saw it: its free plus takeable amount of the
    gang's dominant resource (`room`), and the victims found there (None: none make room
    for minMember members, or not searched: `room` falls short of what the gang needs)."""

    value: str
    room: int
    victims: tuple[str, ...] | None


@dataclass(slots=True)
class DomainPreemption:
    """A gang's preemption inside one domain of `key`, domain by domain (for explain,
    docs/topology.md#preemption-inside-one-domain): the domain whose victims cost least is
    `chosen` (None: none)."""

    key: str
    resource: str  # the gang's dominant resource
    needed: int  # of it, for the members that must be placed
    tried: list[DomainTry]
    chosen: str | None


@dataclass(slots=True)
class DomainSearch:
    key: str
    resource: str  # the gang's dominant resource
    needed: int  # of it, for the members that must be placed
    tried: list[DomainFit] = field(default_factory=list)
    chosen: str | None = None
    placed: list[tuple[Pod, int]] = field(default_factory=list)
    failures: list[tuple[Pod, Any]] = field(default_factory=list)  # (pod, its Diagnosis)

    def shortfall(self, need: int) -> str:
        """Why no domain holds the gang, naming the key and the best domain."""
        if not self.tried:
            return f"topology {self.key}: no node has the label."
        best = min(self.tried, key=lambda d: (-d.placed, -d.free, d.value))
        amount = format_amount(self.resource, best.free)
        needed = format_amount(self.resource, self.needed)
        message = (
            f"topology {self.key}: largest fit is {best.value} with {amount} of {needed} "
            f"{self.resource} free"
        )
        if best.free >= self.needed:
            message += f", where {best.placed} of {need} members fit"
        return message + "."


def domains(state: ClusterState, key: str) -> LabelDomains:
    """The domains of `key`: the node rows of each of its label values."""
    return state.nodes.domains(key)


def dominant_resource(state: ClusterState, pods: Sequence[Pod]) -> tuple[int, int]:
    """(column, total amount) of the resource the pods ask the largest share of the
    cluster's allocatable of; the pod count only when they ask nothing else."""
    asked = np.zeros(len(state.nodes.resources), dtype=np.int64)
    for pod in pods:
        demand = state.pods.demand(pod)
        asked[demand.cols] += demand.amounts
    capacity = state.nodes.allocatable.sum(axis=0) if state.nodes.rows else asked
    pods_col = state.nodes.resources.get(PODS)
    assert pods_col is not None  # always a column
    best, best_share = pods_col, -1.0
    names = state.nodes.resources.names
    for col in sorted(np.flatnonzero(asked).tolist(), key=lambda c: names[c]):
        if col == pods_col:
            continue
        share = float(asked[col]) / max(int(capacity[col]), 1)
        if share > best_share:
            best, best_share = col, share
    return best, int(asked[best])


def reported_domains(
    state: ClusterState, members: Sequence[Pod], request: TopologyRequest
) -> tuple[str, list[str]]:
    """The key a group's placement is reported by, and the domains of that key its members
    on nodes are in: the required key; for a preference, the narrowest key with one domain
    holding every member on a node, else the narrowest key."""
    keys = (request.required,) if request.required else request.preferred
    on_nodes = sum(1 for pod in members if pod.key in state.pods.bound)
    for key in keys:
        found = member_domains(state, members, key)
        if len(found) == 1 and sum(found.values()) == on_nodes:
            return key, sorted(found)
    return keys[0], sorted(member_domains(state, members, keys[0]))


def placement_message(state: ClusterState, request: TopologyRequest, rows: Sequence[int]) -> str:
    """Where members placed on node `rows` are, by the request's keys: `in example.com/rack
    rack-a` (the narrowest key with one domain holding them all), else `across 2
    example.com/rack domains: rack-a, rack-b` (plus those on nodes without the label)."""
    keys = (request.required,) if request.required else request.preferred
    nodes = [state.nodes.by_row[row] for row in rows]
    for key in keys:
        found = {node.labels.get(key) for node in nodes if node is not None}
        if len(found) == 1 and (value := found.pop()) is not None:
            return f"in {key} {value}"
    key = keys[0]
    values = sorted({v for node in nodes if node is not None and (v := node.labels.get(key))})
    outside = sum(1 for node in nodes if node is not None and key not in node.labels)
    where = f"across {len(values)} {key} domain(s): {', '.join(values)}"
    return where + (f" and {outside} node(s) without the label" if outside else "")


def member_domains(state: ClusterState, members: Sequence[Pod], key: str) -> dict[str, int]:
    """How many of the members on nodes are in each domain of `key`."""
    counts: dict[str, int] = {}
    for pod in members:
        row = state.pods.bound.get(pod.key)
        node = state.nodes.by_row[row] if row is not None else None
        if node is not None and (value := node.labels.get(key)) is not None:
            counts[value] = counts.get(value, 0) + 1
    return counts


def pinned_domain(state: ClusterState, members: Sequence[Pod], key: str) -> str | None:
    """The domain holding most of the group's members already on nodes (ties by value)."""
    counts = member_domains(state, members, key)
    return min(counts, key=lambda v: (-counts[v], v)) if counts else None
