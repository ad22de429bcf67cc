"""Preemption for a gang with a required topology: victims inside one domain only
(docs/topology.md#preemption-inside-one-domain).

Each domain is searched as gang preemption searches the cluster (`find_victims`: the fewest,
cheapest victim units with which minMember members fit, every member placed on the domain's
nodes alone), with only the units whose every pod runs inside that domain: a victim gang
spread over two racks is never taken for a rack-bound preemptor, so one gang's preemption
never evicts in two domains. A domain whose free plus preemptible room of the gang's dominant
resource falls short is not searched. Of the domains where the gang fits, the one whose
victims cost least by gang preemption's order (`Found.cost`: PDB violations, highest victim
priority, sum of priorities, number of victims, latest start) wins; ties by domain value.
A group with members already running searches only their domain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from batchsched.objects.records import Pod
from batchsched.plugins.coscheduling.preemption import Found, GroupFit, UnitIndex, find_victims
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.topology import (
    DomainPreemption,
    DomainTry,
    domains,
    dominant_resource,
    pinned_domain,
)


@dataclass(slots=True)
class DomainVictims:
    """The domain chosen and its victims; or, when none, how many pods could be taken
    inside single domains (`takeable`); and each domain as the search saw it (`seen`, for
    explain)."""

    value: str | None
    found: Found | None
    takeable: int
    seen: DomainPreemption


def unit_domains(index: UnitIndex, domain_of_row: IntArray) -> IntArray:
    """Per victim unit, the domain (an index into the key's values) all its pods run in;
    -1 for a unit on a node without the label or spread over two domains."""
    if not index.units:
        return np.zeros(0, dtype=np.intp)
    ids = domain_of_row[index.unit_rows]
    starts = np.cumsum(index.row_counts) - index.row_counts
    low = np.minimum.reduceat(ids, starts)
    high = np.maximum.reduceat(ids, starts)
    found: IntArray = np.where(low == high, low, -1)
    return found


def victims_in_one_domain(
    state: ClusterState,
    key: str,
    members: list[Pod],
    pending: list[Pod],
    need: int,
    free: IntArray,
    index: UnitIndex,
    usable: BoolArray,
    fit_for: Callable[[BoolArray], GroupFit],
) -> DomainVictims:
    """The domain of `key` whose victims cost least, and those victims. `fit_for(allowed)`:
    the members' placement on the nodes of `allowed` for a search."""
    found = domains(state, key)
    domain_of_row = np.full(state.nodes.rows, -1, dtype=np.intp)
    for i, value in enumerate(found.values):
        domain_of_row[found.rows[value]] = i
    of_unit = unit_domains(index, domain_of_row)
    col, needed = dominant_resource(state, pending[: max(need, 1)])
    # The room each domain could offer: its free amount plus its takeable units'.
    room = found.totals(free[:, col])
    takeable = usable & (of_unit >= 0)
    entries = index.entries(np.flatnonzero(takeable))
    in_col = index.cols[entries] == col
    np.add.at(room, domain_of_row[index.rows[entries][in_col]], index.amounts[entries][in_col])
    pods = sum(len(index.units[u].pods) for u in np.flatnonzero(takeable).tolist())
    pinned = pinned_domain(state, members, key)
    candidates = range(len(found.values))
    if pinned is not None:
        candidates = range(found.values.index(pinned), found.values.index(pinned) + 1)
    best: tuple[tuple[float | int | str, ...], str, Found] | None = None
    tried = []
    for i in candidates:
        value = found.values[i]
        if room[i] < needed:
            tried.append(DomainTry(value, int(room[i]), None))
            continue
        allowed: BoolArray = np.zeros(state.nodes.rows, dtype=np.bool_)
        allowed[found.rows[value]] = True
        victims = find_victims(fit_for(allowed), usable & (of_unit == i))
        taken = None if victims is None else tuple(sorted(p.key for p in victims.victims))
        tried.append(DomainTry(value, int(room[i]), taken))
        if victims is None:
            continue
        cost = (*victims.cost(), value)
        if best is None or cost < best[0]:
            best = (cost, value, victims)
    chosen, victims_found = (None, None) if best is None else (best[1], best[2])
    seen = DomainPreemption(key, state.nodes.resources.names[col], needed, tried, chosen)
    return DomainVictims(chosen, victims_found, pods, seen)
