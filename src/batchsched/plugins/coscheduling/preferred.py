"""Preferred topology: a gang kept in as few domains as it can be, never held back for it
(docs/topology.md#preferred-placement).

The keys are tried from the narrowest to the broadest: one domain of the first key where the
whole gang fits (chosen as for a required key: BestFit on the dominant resource), else one
domain of the next key, and so on. When no single domain of any key holds it, the members go
to as few domains of the narrowest key as the search finds: the domains with the most free of
the dominant resource are added one at a time until the gang fits in them. When even all of
them cannot hold it, the gang is placed as if it asked for nothing (nodes without the label
included), so a preference alone never keeps it pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from batchsched.framework.interface import Diagnosis, PlacementFramework
from batchsched.objects.records import Pod
from batchsched.plugins.coscheduling.placement import TentativePlacement, place_members
from batchsched.plugins.coscheduling.topology import place_in_one_domain
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.topology import domains, dominant_resource

Placed = tuple[list[tuple[Pod, int]], list[tuple[Pod, Diagnosis]]]


def place_preferred(
    framework: PlacementFramework,
    state: ClusterState,
    now: datetime,
    free: IntArray,
    group: str,
    keys: Sequence[str],
    members: Sequence[Pod],
    pending: Sequence[Pod],
    need: int,
) -> Placed:
    """Where the members go (tentatively: undone before returning), and why the others did
    not fit, as `place_members` says it."""
    for key in keys:
        search = place_in_one_domain(
            framework, state, now, free, group, key, members, pending, need
        )
        if search.chosen is not None:
            return search.placed, search.failures

    def attempt(allowed: BoolArray | None) -> Placed:
        placement = TentativePlacement(framework, state, now, free, group, allowed=allowed)
        try:
            return place_members(placement, pending, need)
        finally:
            placement.undo()

    col, needed = dominant_resource(state, pending[: max(need, 1)])
    found = domains(state, keys[0])
    sums = found.totals(free[:, col])
    roomiest = np.argsort(-sums, kind="stable").tolist()  # ties by value: values are sorted
    mask: BoolArray = np.zeros(state.nodes.rows, dtype=np.bool_)
    room = 0
    for count, i in enumerate(roomiest, start=1):
        mask[found.rows[found.values[i]]] = True
        room += int(sums[i])
        if count == 1 or room < needed:
            continue  # one domain alone was tried above
        placed, failures = attempt(mask.copy())
        if len(placed) >= need:
            return placed, failures
    return attempt(None)
