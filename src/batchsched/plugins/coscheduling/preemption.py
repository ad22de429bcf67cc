"""Gang as preemptor (docs/gang.md): room for minMember members at once, or nothing.

Victims come in units: a running pod alone, or, for a member of a PodGroup, all of that
group's running members (gang as victim: a group is never partly evicted). A unit may be
taken when every member may be taken under section 3's rules against the group's lowest
member priority: strictly lower priority, not already terminating, not exempt by its
PriorityClass's toleration, class present.

Units are ranked cheapest first by section 3's node-choice order applied to a unit (PDB
violations, highest victim priority, sum of shifted priorities, number of pods, latest start
among the highest-priority victims, then name). The smallest prefix of that ranking with which
the pending members reach minMember, each placed with the normal filters and scores on the
free room plus the room the prefix frees, is found by galloping and bisection (more units
only add room); then units are reprieved, most important first and PDB-violating ones
first, while the group still reaches minMember without them. Every check places members on
one tentative snapshot, so the result is all or nothing: victims for the whole group, or no
eviction at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from batchsched.decisions import Decision, Evict, Nominate
from batchsched.framework.interface import NodeTotals, PlacementFramework
from batchsched.objects.records import Pod
from batchsched.plugins.coscheduling.placement import (
    BaseRoom,
    TentativePlacement,
    base_results,
    place_members,
)
from batchsched.preemption.gang_victims import running_group, whole_group_of
from batchsched.preemption.victim_table import importance_key
from batchsched.preemption.victims import PRIORITY_SHIFT, VictimRule, pdb_violating
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray


@dataclass(frozen=True, slots=True)
class Unit:
    pods: tuple[Pod, ...]  # importance order
    violations: int

    def cost(self) -> tuple[float | int | str, ...]:
        if len(self.pods) == 1:  # most units: a pod alone, the general case's terms for one
            pod = self.pods[0]
            priority = pod.priority or 0
            start = pod.start_time.timestamp() if pod.start_time is not None else float("inf")
            return (self.violations, priority, priority + PRIORITY_SHIFT, 1, -start, pod.key)
        priorities = [p.priority or 0 for p in self.pods]
        highest = max(priorities)
        starts = [
            p.start_time.timestamp() if p.start_time is not None else float("inf")
            for p in self.pods
            if (p.priority or 0) == highest
        ]
        return (
            self.violations,
            highest,
            sum(p + PRIORITY_SHIFT for p in priorities),
            len(self.pods),
            -min(starts),
            self.pods[0].key,
        )


Placements = list[tuple[Pod, int]]


@dataclass(slots=True)
class Found:
    """Victims that make room for the group, and the node each placed member is to wait for."""

    victims: list[Pod]
    placements: list[tuple[Pod, int]]
    violations: int = 0  # of the victims, those whose eviction violates a PDB

    def cost(self) -> tuple[float | int | str, ...]:
        """The victims' cost as one unit's (`Unit.cost`): comparable between choices."""
        return Unit(tuple(self.victims), self.violations).cost()


def units_of(rule: VictimRule, members: list[tuple[Pod, ...]]) -> list[Unit]:
    """Units of these pods, in the order given, with their PDB violations were they all
    evicted."""
    violating = _pdb_violations(rule, members)
    return [_unit(pods, violating) for pods in members]


def _unit(members: tuple[Pod, ...], violating: dict[str, bool]) -> Unit:
    ordered = members if len(members) == 1 else tuple(sorted(members, key=importance_key))
    return Unit(ordered, sum(violating.get(m.key, False) for m in ordered))


def victim_units(state: ClusterState, rule: VictimRule) -> tuple[list[Unit], Counter[str]]:
    """Every unit the rule lets a group take, cheapest first, and why other lower-priority
    pods cannot go."""
    singles: list[Pod] = []
    groups: set[str] = set()
    by_key = state.pods.by_key
    for key in state.pods.bound:
        pod = by_key[key]
        if pod.terminated or not rule.lower(pod):
            continue
        group = whole_group_of(state, pod)
        if group is not None:
            groups.add(group)
        else:
            singles.append(pod)
    candidates: list[tuple[Pod, ...]] = [(pod,) for pod in singles]
    candidates += [running_group(state, group) for group in sorted(groups)]
    violating = _pdb_violations(rule, candidates)
    refused: Counter[str] = Counter()
    units: list[Unit] = []
    for members in candidates:
        blockers = [m for m in members if not rule.may_take(m)]
        if blockers:
            for m in blockers:
                refused[_refusal(rule, m)] += 1
            if len(members) > len(blockers):
                refused["belong to a PodGroup whose other members cannot be preempted"] += len(
                    members
                ) - len(blockers)
            continue
        units.append(_unit(members, violating))
    units.sort(key=Unit.cost)
    return units, refused


class UnitIndex:
    """The victim units of one rule on one cluster state, with each unit's room as flat
    (row, column, amount) arrays, so the room of any choice of units is one vector addition.

    Built once and reused while the rule and the cluster's pods stay the same (`key`): a wave
    of preempting groups in one pass shares it, each skipping units whose members an earlier
    group already evicted.
    """

    def __init__(
        self,
        state: ClusterState,
        rule: VictimRule,
        key: tuple[object, ...],
        units: list[Unit] | None = None,
    ) -> None:
        """The units `rule` lets a group take, or `units` (cheapest first) when given (a
        reclaim's, docs/queues.md#reclaim)."""
        self.key = key
        self.units, self.refused = (
            victim_units(state, rule) if units is None else (units, Counter())
        )
        # Joined per pod in unit order, not appended per entry: tens of thousands of pods.
        members = [pod for unit in self.units for pod in unit.pods]
        demands = [state.pods.demand(pod) for pod in members]
        count = len(members)
        counts = np.fromiter((len(d.cols) for d in demands), dtype=np.intp, count=count)
        pod_rows = np.fromiter(
            (state.pods.bound[p.key] for p in members), dtype=np.intp, count=count
        )
        self.rows = np.repeat(pod_rows, counts)
        self.cols = np.concatenate([d.cols for d in demands] or [np.empty(0, np.intp)])
        self.amounts = np.concatenate([d.amounts for d in demands] or [np.empty(0, np.int64)])
        # Each unit's entry count: the pods' counts summed over the unit's span of pods.
        unit_pods = np.asarray([len(unit.pods) for unit in self.units], dtype=np.intp)
        pod_ends = np.cumsum(unit_pods)
        entry_ends = np.zeros(count + 1, dtype=np.intp)
        np.cumsum(counts, out=entry_ends[1:])
        self.sizes = entry_ends[pod_ends] - entry_ends[pod_ends - unit_pods]
        self._entry_start = np.cumsum(self.sizes) - self.sizes
        self._state = state
        # In one pass over the units: each unit's pods as (key, node row) (the rows stay
        # while `key` does: bound_version), its distinct rows, flat (`unit_rows`;
        # `row_counts` per unit, `row_unit` per entry), and whether its pods change nothing
        # beyond their rows (`local`: no inter-pod terms, no volumes). A one-pod unit (most
        # of them) needs no set, sort or generator.
        keys = [pod.key for pod in members]
        on = pod_rows.tolist()
        self.placed: list[tuple[tuple[str, int], ...]] = []
        self._unit_of: dict[str, int] = {}
        self._units_on: dict[int, list[int]] = {}
        unit_of, units_on, placed = self._unit_of, self._units_on, self.placed
        unit_rows: list[int] = []
        row_counts: list[int] = []
        local: list[bool] = []
        start = 0
        for u, unit in enumerate(self.units):
            if len(unit.pods) == 1:
                pod_key, row, pod = keys[start], on[start], unit.pods[0]
                placed.append(((pod_key, row),))
                unit_of[pod_key] = u
                units_on.setdefault(row, []).append(u)
                unit_rows.append(row)
                row_counts.append(1)
                local.append(pod.pod_affinity is None and not pod.volumes and not pod.disks)
                start += 1
                continue
            end = start + len(unit.pods)
            pods = tuple(zip(keys[start:end], on[start:end], strict=True))
            placed.append(pods)
            for pod_key, row in pods:
                unit_of[pod_key] = u
                units_on.setdefault(row, []).append(u)
            found = sorted(set(on[start:end]))
            unit_rows.extend(found)
            row_counts.append(len(found))
            local.append(
                all(p.pod_affinity is None and not p.volumes and not p.disks for p in unit.pods)
            )
            start = end
        self.unit_rows = np.asarray(unit_rows, dtype=np.intp)
        self.row_counts = np.asarray(row_counts, dtype=np.intp)
        self.row_unit = np.repeat(np.arange(len(self.units)), self.row_counts)
        self._row_start = np.cumsum(self.row_counts) - self.row_counts
        self.local = np.asarray(local, dtype=np.bool_)
        self._going = np.zeros(len(self.units), dtype=np.bool_)
        self._going_mark = -1  # before any mark: every unit is checked at the first call
        # Each unit's key in the reprieve order, made when a search first walks it: the
        # searches of a run walk the same cheap units again and again (at 5000 nodes 44,000
        # steps over 1,000 units), and the key reads dates and names. Flat: a sort compares
        # flat tuples faster than nested ones.
        self._reprieve_keys: dict[int, tuple[bool, int, float, str]] = {}

    def reprieve_order(self, units: list[int]) -> list[int]:
        """These units in the order the reprieve step takes them back: PDB-violating ones
        first, then most important first (`importance_key` of each unit's first pod)."""
        keys = self._reprieve_keys
        for u in units:
            if u not in keys:
                unit = self.units[u]
                keys[u] = (unit.violations == 0, *importance_key(unit.pods[0]))
        return sorted(units, key=keys.__getitem__)

    def entries(self, units: IntArray) -> IntArray:
        """Positions in the flat room arrays of these units' entries."""
        return _spans(self._entry_start[units], self.sizes[units])

    def rows_of(self, units: IntArray) -> IntArray:
        """Positions in `unit_rows` (and `row_unit`) of these units' distinct rows.

        Per unit asked, not per unit indexed: a search asks for the few hundred units of a
        choice among the cluster's tens of thousands."""
        return _spans(self._row_start[units], self.row_counts[units])

    def usable(self, state: ClusterState, own: set[str]) -> BoolArray:
        """Units still takeable: none of their members is going already, none is `own`.

        A member starts going only through `ClusterState.mark_terminating`, which logs its
        row, so only the units on rows changed since the last call are looked at again: a
        wave of gang attempts costs per change, not per unit and attempt."""
        changed = state.nodes.rows_changed_since(self._going_mark) if state is self._state else None
        recheck: range | list[int] = range(len(self.units))
        if changed is not None:
            recheck = sorted({u for row in set(changed) for u in self._units_on.get(row, ())})
        for u in recheck:
            self._going[u] = any(p.deletion_timestamp is not None for p in self.units[u].pods)
        self._state, self._going_mark = state, state.nodes.change_mark()
        usable: BoolArray = ~self._going
        for key in own:
            unit = self._unit_of.get(key)
            if unit is not None:
                usable[unit] = False
        return usable


def freeable_room(state: ClusterState, index: UnitIndex, usable: BoolArray) -> IntArray:
    """The room, summed over the cluster per resource, that preemption could free for a
    group: the `usable` units' and that of the pods already terminating."""
    room = np.zeros(state.nodes.free.shape[1], dtype=np.int64)
    entries = index.entries(np.flatnonzero(usable))
    np.add.at(room, index.cols[entries], index.amounts[entries])
    for key in state.pods.terminating:
        demand = state.pods.demand(state.pods.by_key[key])
        room[demand.cols] += demand.amounts
    return room


def _spans(starts: IntArray, counts: IntArray) -> IntArray:
    """The positions start, start + 1, ..., start + count - 1 of each span, in order."""
    ends = np.cumsum(counts)
    offsets = np.repeat(starts - (ends - counts), counts)
    found: IntArray = np.arange(int(ends[-1]) if ends.size else 0, dtype=np.intp) + offsets
    return found


def index_key(state: ClusterState, rule: VictimRule) -> tuple[object, ...]:
    """What the units depend on: the rule, the state itself and its pods on nodes, PodGroups,
    classes and PDBs.

    Classes and PDBs by `policy_version` (every change to them moves it), not by their
    contents: a wave of gang attempts asks for the key once per attempt, and sorting every
    PDB each time grew with the cluster twice (more attempts, more PDBs)."""
    return (
        state,
        rule.now,
        rule.priority,
        rule.queue,
        state.membership_version() if rule.queue is not None else None,
        state.pods.bound_version,
        frozenset(state.groups.by_key),
        state.policy.version,
    )


def _pdb_violations(rule: VictimRule, candidates: list[tuple[Pod, ...]]) -> dict[str, bool]:
    if not rule.state.policy.pdbs:
        return {}
    pods = sorted((m for members in candidates for m in members), key=importance_key)
    return dict(zip((p.key for p in pods), pdb_violating(rule, pods), strict=True))


def _refusal(rule: VictimRule, pod: Pod) -> str:
    if not rule.same_queue(pod):
        return "are in another queue (only reclaim takes from other queues)"
    if not rule.lower(pod):
        return "have priority not lower than the group's"
    if rule.missing_class(pod):
        return f"name a missing PriorityClass {pod.priority_class_name}"
    return f"tolerate preemption ({pod.priority_class_name})"


class GroupFit:
    """Places the pending members on `free` plus the room a choice of units frees.

    The search tries many choices of units, each close to the one before (a longer or
    shorter prefix, one unit reprieved). The units of the current choice stay off their
    nodes between checks and each member's filter and score results are kept across them,
    so a check costs per unit that changed since the last one, not per unit chosen (the
    working prefix grows with the cluster). `restore` puts every unit back."""

    def __init__(
        self,
        framework: PlacementFramework,
        state: ClusterState,
        now: datetime,
        group: str,
        free: IntArray,
        pending: Sequence[Pod],
        need: int,
        index: UnitIndex,
        allowed: BoolArray | None = None,
    ) -> None:
        self.framework = framework
        self.allowed = allowed  # the rows members may take (one topology domain), None: any
        self.state = state
        self.now = now
        self.group = group
        self.free = free
        self.pending = pending
        self.need = need
        self.index = index
        self.base: BaseRoom | None = None
        self.row_local = False  # the last placement that worked was placed row-locally
        self._out = np.zeros(len(index.units), dtype=np.bool_)  # units off their nodes now
        # `free` plus the room of the units off their nodes, kept as they move (a copy and a
        # sum over the whole choice per check would cost per node and per unit chosen); a
        # check's placement takes room on it and gives it back at its `undo`.
        self._room = free.copy()
        # Scratch per node for the reprieve step, False (0) between its calls.
        self._freed = np.zeros(state.nodes.rows, dtype=np.bool_)
        self._hosts = np.zeros(state.nodes.rows, dtype=np.intp)
        # Each member's results with every unit on its node (before any check refreshed
        # them), and the choice of the last check that placed the group with where each
        # member went (None: nowhere).
        self._unmoved: dict[str, NodeTotals] = {}
        self._worked: tuple[BoolArray, dict[str, int | None]] | None = None
        # The units every choice passed from now on, `_out` and `_worked`'s choice lie
        # within (`confine`), in increasing order; None: anywhere among the units.
        self._scope: IntArray | None = None

    def confine(self, units: IntArray | None) -> None:
        """Every choice passed from now on, the units off their nodes now and the last choice
        that placed the group lie within `units` (increasing; None: no bound). The reprieve
        step's choices all lie within the working prefix: its checks then look at those units
        alone, not at every unit of the cluster (tens of thousands at 5000 nodes)."""
        self._scope = units

    def _chosen(self, choice: BoolArray) -> IntArray:
        """`np.flatnonzero(choice)`, looked at within the scope."""
        scope = self._scope
        if scope is None:
            return np.flatnonzero(choice)
        found: IntArray = scope[choice[scope]]
        return found

    def prepare(self) -> None:
        """Each member's results with every unit on its node (`base_results`)."""
        results = base_results(
            self.framework, self.state, self.now, self.free, self.group, self.pending
        )
        self._unmoved = {
            key: NodeTotals(found.feasible.copy(), found.total.copy())
            for key, found in results.items()
            if found is not None
        }
        # Every unit is on its node here (before a search, after `restore`): no row is away.
        away = np.zeros(self.state.nodes.rows, dtype=np.intp)
        self.base = BaseRoom(results, [], dict.fromkeys(results, 0), {}, self._unmoved, away)

    def place(
        self, chosen: BoolArray, changed: IntArray | None = None
    ) -> list[tuple[Pod, int]] | None:
        """Where the members go with these units gone, or None if minMember is not reached.

        `changed`: units among which are all those `chosen` has and the units off their nodes
        now have not, or the other way round (None: look within the scope)."""
        if self.base is None:
            self.prepare()
        self._worked = None
        self._move(chosen, changed)
        placement = TentativePlacement(
            self.framework,
            self.state,
            self.now,
            self._room,
            self.group,
            self.base,
            self.allowed,
        )
        # The devices of the claims only the victims hold come free with them.
        state = self.state
        devices = state.devices
        held = devices.held_only_by(key for key, _ in self._gone(chosen))
        nodes = sorted({state.nodes.name(row) for _, row in self._gone(chosen)}) if held else []
        released = devices.release(held, nodes)
        try:
            placed, _ = place_members(placement, self.pending, self.need)
        finally:
            placement.undo()
            devices.put_back(released, nodes)
        if len(placed) < self.need:
            return None
        self.row_local = placement.row_local
        rows = {pod.key: row for pod, row in placed}
        self._worked = chosen.copy(), {pod.key: rows.get(pod.key) for pod in self.pending}
        return placed

    def _gone(self, chosen: BoolArray) -> Iterator[tuple[str, int]]:
        """The pods of the chosen units, with their rows. Found only when asked: without
        claims in the cluster nothing is (a scan of every unit per check, tens of thousands
        of units at 5000 nodes)."""
        placed = self.index.placed
        for i in self._chosen(chosen).tolist():
            yield from placed[i]

    def _move(self, chosen: BoolArray, changed: IntArray | None = None) -> None:
        """Take the units of `chosen` off their nodes and put the others back, touching only
        the units that differ from the last choice (looked for among `changed`, else within
        the scope: not over every unit per check). A victim leaves its node's pods too: its
        host ports, its matches for spread and affinity and its anti-affinity go with it."""
        index = self.index
        placed = index.placed
        if changed is None:
            changed = self._scope
        if changed is None:
            toggled = np.flatnonzero(chosen != self._out)
        else:
            toggled = changed[chosen[changed] != self._out[changed]]
        going, coming = toggled[chosen[toggled]], toggled[~chosen[toggled]]
        off = [pod for i in going.tolist() for pod in placed[i]]
        back = [pod for i in coming.tolist() for pod in placed[i]]
        self.state.pods.unhold_all(off)
        self.state.pods.hold_all(back)
        self._out[toggled] = chosen[toggled]
        room = self._room
        for units, sign in ((going, 1), (coming, -1)):
            entries = index.entries(units)
            np.add.at(
                room, (index.rows[entries], index.cols[entries]), sign * index.amounts[entries]
            )
        if self.base is not None:
            moved, away = self.base.moved, self.base.away
            moved.extend(row for _, row in off)
            np.add.at(away, moved[len(moved) - len(off) :], 1)
            moved.extend(row for _, row in back)
            np.add.at(away, moved[len(moved) - len(back) :], -1)

    def restore(self) -> None:
        """Every unit back on its node, as before the search."""
        self._move(np.zeros_like(self._out))

    def spare(self, chosen: BoolArray, placements: Placements) -> set[int]:
        """Units of `chosen` (which just gave `placements`) that a reprieve step may each
        take back without a check: it would find `placements` again.

        These are the units on nodes no member took and that share no node with another
        chosen unit, once one check shows the members placed alike with all of them back.
        Each node's results then depend on that node alone (every member placed row-locally
        in both checks), and any mix of these units back or gone shows each such node as one
        of the two checks did: every member's chosen node beats it at its turn in both, so
        in every mix. Without this, a reprieve step checks every unit of the working prefix,
        a prefix that grows with the cluster."""
        if not self.row_local:
            return set()
        index, hosts, used = self.index, self._hosts, self._freed
        entries = index.rows_of(self._chosen(chosen))
        on = index.unit_rows[entries]
        taken = np.asarray([row for _, row in placements], dtype=np.intp)
        # Counted on the scratch arrays and cleared again: per chosen unit, not per node.
        np.add.at(hosts, on, 1)
        used[taken] = True
        units = index.row_unit[entries]
        excluded = set(units[(hosts[on] != 1) | used[on]].tolist())
        hosts[on] = 0
        used[taken] = False
        spare = set(units.tolist()) - excluded
        if len(spare) < 2:
            return set()  # checking one unit costs what checking the floor does
        if self._floor_alike(chosen, spare, placements):
            return spare
        return set()

    def _floor_alike(self, chosen: BoolArray, spare: set[int], placements: Placements) -> bool:
        """Whether the members are placed as in `placements` with the `spare` units of
        `chosen` back."""
        floor = chosen.copy()
        floor[sorted(spare)] = False
        found = self._alike_unmoved(floor)
        if found is not None:
            return found
        placed = self.place(floor)
        return placed is not None and self.row_local and _rows(placed) == _rows(placements)

    def reprieve(self, chosen: BoolArray, placements: Placements) -> Placements | None:
        """`place` for a choice of fewer units than the last that placed the group (which
        gave `placements`), without moving a unit when `_alike_unmoved` shows the members
        placed alike."""
        worked = self._worked
        if worked is not None and self._alike_unmoved(chosen):
            self._worked = chosen.copy(), worked[1]
            return placements
        return self.place(chosen)

    def _alike_unmoved(self, choice: BoolArray) -> bool | None:
        """Whether the members are placed as in the last choice that placed them (`_worked`)
        with the units it has and `choice` has not back, found without moving a unit; None
        where this cannot tell (a check decides).

        The last check left each member's results as they were at its turn (a choice
        found alike since shows the same). With these units back and every earlier member
        where it went then, a member sees the same results except on the units' rows,
        which are then as before the search when no unit of `choice` and no member is
        there: its kept unmoved results. So each member goes where it went (what `choose`
        gave on those results at its turn) unless one of those rows now wins, looked at on
        those rows alone (`_still_chosen`). A reprieve step then costs per unit reprieved,
        not per unit of the working prefix. This holds while those units' pods change
        nothing beyond their own rows (no inter-pod terms, no volumes, no claims in the
        cluster to free)."""
        worked, base, state, index = self._worked, self.base, self.state, self.index
        if worked is None or base is None or not self.row_local:
            return None
        scope = self._scope
        if scope is None:
            if (choice & ~worked[0]).any():
                return None
            back = np.flatnonzero(self._out & ~choice)  # off their nodes now, back in `choice`
        else:  # the same, within the scope
            if (choice[scope] & ~worked[0][scope]).any():
                return None
            back = scope[self._out[scope] & ~choice[scope]]
        if state.devices.claims or not index.local[back].all():
            return None
        rows = index.unit_rows[index.rows_of(back)]
        freed = self._freed  # False everywhere between calls: set on `rows` and cleared
        freed[rows] = True
        try:
            if freed[index.unit_rows[index.rows_of(self._chosen(choice))]].any() or any(
                row is not None and freed[row] for row in worked[1].values()
            ):
                return None
            rank = state.nodes.name_rank()
            for pod in self.pending:
                now, unmoved = base.results.get(pod.key), self._unmoved.get(pod.key)
                if now is None or unmoved is None:
                    return None
                nominated = state.nominations.get(pod.key)
                went = worked[1][pod.key]
                if not _still_chosen(went, nominated, now, unmoved, rows, freed, rank):
                    return False
            return True
        finally:
            freed[rows] = False


def _still_chosen(
    went: int | None,
    nominated: int | None,
    now: NodeTotals,
    unmoved: NodeTotals,
    rows: IntArray,
    freed: BoolArray,
    rank: IntArray,
) -> bool:
    """Whether `Framework.choose` gives `went` on `now` with its entries on `rows` (marked
    in `freed`) replaced by `unmoved`'s, where `went` is what it gives on `now` itself and
    is not among `rows`.

    Looked at on `rows` alone (a copy and an argmax over every node per member cost per
    node): outside them `went` still beats every row, so only a row of `rows` can take its
    place, by the same order `choose` uses (the nominated node if it fits, else the highest
    total, -1 where infeasible, ties to the node first by name)."""
    if went is None:  # nothing fits on `now`: still so unless a row of `rows` fits
        return not unmoved.feasible[rows].any()
    if nominated == went:  # chosen as the fitting nominated node, which stays as it was
        return True
    if nominated is not None and freed[nominated] and unmoved.feasible[nominated]:
        return False
    if not rows.size:
        return True
    totals = unmoved.total[rows]
    best, top = int(totals.max()), int(now.total[went])
    if best != top:
        return best < top
    return bool(rank[went] < rank[rows[totals == top]].min())


def _rows(placements: Placements) -> list[tuple[str, int]]:
    return [(pod.key, row) for pod, row in placements]


def find_victims(fit: GroupFit, usable: BoolArray) -> Found | None:
    """The fewest, cheapest usable units that let the group reach minMember, or None.

    The shortest working prefix of the cost order is found by galloping (1, 2, 4, ... units,
    then bisection between the last two tries), as a group usually needs few victims; then
    units are reprieved one by one. Only choices that were checked are kept.
    """
    # Every check's changes are undone (`restore`, `TentativePlacement.undo`): the caches
    # that follow the state's change log need not see them. The members' results come from
    # the framework's placements kept per shape, which read the log: before the scope, so
    # that its entries are still dropped.
    fit.prepare()
    with fit.state.nodes.tentative():
        try:
            return _search(fit, usable)
        finally:
            fit.restore()
            fit.confine(None)


def _search(fit: GroupFit, usable: BoolArray) -> Found | None:
    units = fit.index.units
    order = np.flatnonzero(usable)  # cheapest first
    total = int(order.size)
    # The choice of the checks so far: the first `checked` units of `order` (None: not
    # known, as before the first check). Each check's mask is changed in place from it and
    # `place` is told which units changed: the galloping and the bisection cost per unit
    # added or taken back, not per unit of the cluster.
    chosen = np.zeros(len(units), dtype=np.bool_)
    checked: int | None = None

    def place_prefix(k: int) -> Placements | None:
        nonlocal checked
        before = 0 if checked is None else checked
        chosen[order[before:k]] = True
        chosen[order[k:before]] = False
        changed = None if checked is None else order[min(k, before) : max(k, before)]
        checked = k
        return fit.place(chosen, changed)

    low, high, placements = 0, 1, None  # the first `low` units are known not to be enough
    while low < total:
        high = min(high, total)
        placements = place_prefix(high)
        if placements is not None:
            break
        low, high = high, high * 2
    if placements is None:
        return None
    while low + 1 < high:
        mid = (low + high) // 2
        found = place_prefix(mid)
        if found is not None:
            high, placements = mid, found
        else:
            low = mid
    # Every choice from here on, the units off their nodes now (the last check's prefix:
    # `high`'s, or a shorter one that failed) and the last choice that placed the group
    # lie within the working prefix.
    fit.confine(order[:high])
    chosen[order[checked:high]] = True
    spare = fit.spare(chosen, placements)
    for i in fit.index.reprieve_order(order[:high].tolist()):
        chosen[i] = False
        if i in spare:
            continue  # the check would find `placements` again
        found = fit.reprieve(chosen, placements)
        if found is None:
            chosen[i] = True
        else:
            placements = found
            spare = fit.spare(chosen, placements)
    taken = np.flatnonzero(chosen).tolist()
    victims = sorted((p for i in taken for p in units[i].pods), key=importance_key)
    return Found(victims, placements, sum(units[i].violations for i in taken))


def waiting_for_victims(state: ClusterState, pending: Sequence[Pod], priority: int) -> bool:
    """A member is nominated to a node where a lower-priority pod is still terminating."""
    for pod in pending:
        row = state.nominations.get(pod.key)
        if row is not None and any(
            other.deletion_timestamp is not None and (other.priority or 0) < priority
            for other in state.nodes.pods_on[row].values()
        ):
            return True
    return False


def decisions_for(
    state: ClusterState,
    found: Found,
    group: str,
    preemptor: Pod,
    priority: int,
    plugin: str,
) -> list[Decision]:
    """Evictions for every victim, nominations for every placed member, and the end of
    lower-priority nominations on the nodes the members will take."""
    reason = (
        f"{plugin}: preempted by PodGroup {group} (priority {priority}) to make room for "
        f"{len(found.placements)} of its members"
    )
    out: list[Decision] = [Evict(v.key, v.node_name, preemptor.key, reason) for v in found.victims]
    out.extend(Nominate(pod.key, state.nodes.name(row)) for pod, row in found.placements)
    members = {pod.key for pod, _ in found.placements}
    for row in sorted({row for _, row in found.placements}):
        for key in state.nominations.on_row(row):
            other = state.pods.by_key.get(key)
            if key not in members and other is not None and (other.priority or 0) < priority:
                out.append(Nominate(key, None))
    return out


def refusal_message(refused: Counter[str], takeable: int, key: str = "") -> str:
    """Why preemption found no way, e.g. `preemption: 3 pod(s) may be preempted, not enough
    for minMember; 2 pod(s) tolerate preemption (low-protected).` With the `key` of a
    required topology, `takeable` counts the pods inside single domains of it."""
    parts = [f"{count} pod(s) {why}" for why, count in sorted(refused.items())]
    head = f"{takeable} pod(s) may be preempted, not enough for minMember"
    if key:
        head = (
            f"{takeable} pod(s) inside single {key} domains may be preempted, not enough "
            f"for minMember in any one"
        )
    return "preemption: " + "; ".join([head, *parts]) + "."
