"""Required topology: a gang placed whole inside one domain of a node label key
(docs/topology.md).

A domain is the set of nodes sharing a value of the key; nodes without the label are in no
domain. Domains are tried by BestFit on the gang's dominant resource (the resource its members
ask the largest share of the cluster's allocatable of): the domain with the least free amount
of it that is still enough comes first, ties by domain value, so big domains stay whole for
big gangs. In each, the members are placed as usual (every filter and score) on its nodes
alone; the first domain where the whole gang fits is chosen. A domain with too little of the
dominant resource is not tried.

Members placed later, beyond minMember, join the domain the group's running members are in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from batchsched.framework.interface import PlacementFramework
from batchsched.objects.records import Pod
from batchsched.plugins.coscheduling.placement import TentativePlacement, place_members
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.topology import (
    DomainFit,
    DomainSearch,
    domains,
    dominant_resource,
    pinned_domain,
)


def place_in_one_domain(
    framework: PlacementFramework,
    state: ClusterState,
    now: datetime,
    free: IntArray,
    group: str,
    key: str,
    members: Sequence[Pod],
    pending: Sequence[Pod],
    need: int,
) -> DomainSearch:
    """The gang's members placed inside the first domain, in BestFit order, where `need`
    of them fit (all tentative: undone before returning)."""
    col, needed = dominant_resource(state, pending[: max(need, 1)])
    search = DomainSearch(key, state.nodes.resources.names[col], needed)
    found = domains(state, key)
    sums = found.totals(free[:, col])
    pinned = pinned_domain(state, members, key)
    if pinned is not None:
        order = [found.values.index(pinned)]
    else:  # values are sorted: a stable sort breaks ties by value
        order = np.argsort(sums, kind="stable").tolist()
    for i in order:
        value = found.values[i]
        rows = found.rows[value]
        fit = DomainFit(value, int(sums[i]))
        search.tried.append(fit)
        if fit.free < needed:
            continue
        mask: BoolArray = np.zeros(state.nodes.rows, dtype=np.bool_)
        mask[rows] = True
        placement = TentativePlacement(framework, state, now, free, group, allowed=mask)
        try:
            placed, failures = place_members(placement, pending, need)
        finally:
            placement.undo()
        fit.placed = len(placed)
        if len(placed) >= need:
            search.chosen, search.placed, search.failures = value, placed, failures
            return search
        if not search.failures:  # the first domain tried says why members did not fit
            search.failures = failures
    return search
