"""Candidate nodes the vectorised search cannot judge: gang victims and pod clashes.

Gang as victim (docs/gang.md): a running PodGroup is preempted whole or not at all (unless
it is an upstream PodGroup with disruptionMode `Pod` / `single`: its members are victims one by
one, as any pod).
Evicting one member of a running group below minMember kills the group's progress, so the
victim unit of a group member is every running member of its group (on any node), and node
choice counts them all. Clashes: a node where particular pods are in the way (host ports,
anti-affinity, spread skew) works only if the victims lift the clash, which the filter's
`still_fails` check judges. Preemption's vectorised search reasons about room alone; on these
nodes this module runs the per-node search instead, and the best node of both, by the node-choice
order, wins.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from datetime import datetime

import numpy as np

from batchsched.framework.interface import StillFails
from batchsched.objects.podgroup import group_key_of
from batchsched.objects.records import Pod
from batchsched.preemption.reasons import NO_VICTIMS
from batchsched.preemption.search import Evaluation
from batchsched.preemption.victims import (
    NodeVictims,
    VictimRule,
    choice_key,
    select_victims_on_node,
)
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray
from batchsched.state.resources import Demand


def whole_group_of(state: ClusterState, pod: Pod) -> str | None:
    """The key of the pod's group if that group is preempted whole: it exists and its
    disruption mode is the group (always for CRD groups; upstream `PodGroup` / `all`)."""
    group = state.group_of(pod)
    return group.key if group is not None and group.disrupt_whole else None


def running_members(state: ClusterState, pod: Pod) -> tuple[Pod, ...]:
    """The pods that must go with `pod`: its group's running members if the group goes whole."""
    key = whole_group_of(state, pod)
    return (pod,) if key is None else running_group(state, key)


def running_group(state: ClusterState, group: str) -> tuple[Pod, ...]:
    """A group's members bound to a node and not finished, in name order."""
    members = (state.pods.by_key[k] for k in sorted(state.groups.members.get(group, ())))
    return tuple(m for m in members if m.key in state.pods.bound and not m.terminated)


def gang_rows(state: ClusterState, rule: VictimRule, candidates: BoolArray) -> BoolArray:
    """Candidate rows hosting a member of a running group that the preemptor outranks."""
    rows = np.zeros(candidates.shape[0], dtype=np.bool_)
    for group, record in state.groups.by_key.items():
        if not record.disrupt_whole:
            continue
        for key in state.groups.members.get(group, ()):
            row = state.pods.bound.get(key)
            if row is not None and candidates[row] and rule.lower(state.pods.by_key[key]):
                rows[row] = True
    return rows


ChoiceKey = tuple[float | int, ...]
# A node row's answer: its victims (None: it cannot host the preemptor), their rank among
# nodes, and the rows the answer read.
RowAnswer = tuple[NodeVictims | None, ChoiceKey | None, frozenset[int]]


class KeptAnswers:
    """Per-node answers for one kind of preemptor, the working ones kept in rank order, so
    that the best of them costs a few steps rather than a comparison per gang node and
    preemptor; a row's answer is dropped when a row it read changes."""

    def __init__(self) -> None:
        self.rows: dict[int, RowAnswer] = {}
        self._order: list[tuple[ChoiceKey, int]] = []  # may hold dropped or replaced answers
        self._readers: dict[int, set[int]] = {}  # row -> kept rows whose answer read it
        # Per row, as masks: an answer is kept; the kept answer works.
        self.known: BoolArray = np.zeros(0, dtype=np.bool_)
        self.works: BoolArray = np.zeros(0, dtype=np.bool_)

    def fit(self, rows: int) -> None:
        """Size the masks for `rows` node rows (rows are only ever added)."""
        if self.known.shape[0] < rows:
            grown = rows - self.known.shape[0]
            self.known = np.concatenate((self.known, np.zeros(grown, dtype=np.bool_)))
            self.works = np.concatenate((self.works, np.zeros(grown, dtype=np.bool_)))

    def put(self, row: int, answer: RowAnswer) -> None:
        self.fit(row + 1)
        self.rows[row] = answer
        self.known[row] = True
        self.works[row] = answer[0] is not None and answer[1] is not None
        for read in answer[2]:
            self._readers.setdefault(read, set()).add(row)
        if answer[0] is not None and answer[1] is not None:
            bisect.insort(self._order, (answer[1], row))
            if len(self._order) > 2 * len(self.rows) + 64:
                self._order = sorted(
                    (kept[1], r) for r, kept in self.rows.items() if kept[1] is not None
                )

    def drop(self, touched: Iterable[int]) -> None:
        for read in touched:
            for row in self._readers.pop(read, ()):
                kept = self.rows.get(row)
                if kept is not None and read in kept[2]:
                    del self.rows[row]
                    self.known[row] = self.works[row] = False

    def best(self, usable: Callable[[int], bool]) -> tuple[ChoiceKey, NodeVictims] | None:
        """The best-ranked working answer on a row `usable` accepts, and its rank."""
        for rank, row in self._order:
            kept = self.rows.get(row)
            if kept is not None and kept[0] is not None and kept[1] == rank and usable(row):
                return rank, kept[0]
        return None


class GangSearchMemo:
    """Per-node searches with gang units, kept between attempts of preemptors alike.

    A node's answer depends on its pods and room, on the rows of the groups they belong to,
    on the groups themselves, on PDBs and classes, and on the preemptor's priority, demand
    and clock. Answers are kept per (priority, demand, time) and dropped for a node when it or
    a row of its groups changed; any change of groups, PDBs or classes drops them all. Without
    this, every preemptor searched every node hosting a gang again: nodes x preemptors.
    """

    _LIMIT = 256

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._answers: dict[Hashable, tuple[int, KeptAnswers]] = {}
        self._answers_at: datetime | None = None  # the time of the answers kept
        # Per node row: the lowest priority of a running, not terminating member of an
        # existing PodGroup on it (above every priority where none runs), kept current from
        # the state's log of changed rows.
        self._lowest = np.zeros(0, dtype=np.int64)
        self._lowest_mark = -1
        self._lowest_key: Hashable = None
        # The groups preempted whole, kept while no PodGroup or membership changed.
        self._whole: frozenset[str] = frozenset()
        self._whole_version = -1

    def gang_rows(self, rule: VictimRule, candidates: BoolArray) -> BoolArray:
        """`gang_rows` from the per-row lowest group-member priority, refreshed for the rows
        changed since the last call (binds, evictions and reports touch their row): one
        vector comparison per preemptor instead of a scan of every PodGroup."""
        state = self.state
        if self._whole_version != state.groups.version:
            self._whole = frozenset(
                key for key, record in state.groups.by_key.items() if record.disrupt_whole
            )
            self._whole_version = state.groups.version
        key = (state.nodes.generation, state.nodes.rows, self._whole)
        logged = state.nodes.rows_changed_since(self._lowest_mark)
        changed: Iterable[int] = range(state.nodes.rows) if logged is None else set(logged)
        if key != self._lowest_key or logged is None:
            self._lowest = np.full(state.nodes.rows, _NO_MEMBER, dtype=np.int64)
            changed = range(state.nodes.rows)
            self._lowest_key = key
        for row in changed:
            self._lowest[row] = _lowest_member(state, row)
        self._lowest_mark = state.nodes.change_mark()
        return candidates & (self._lowest[: candidates.shape[0]] < rule.priority)

    def answers(self, rule: VictimRule, demand: Demand) -> KeptAnswers:
        state = self.state
        key = (
            rule.priority,
            rule.queue,
            state.membership_version() if rule.queue is not None else None,
            rule.now,
            demand.cols.tobytes(),
            demand.amounts.tobytes(),
            state.groups.version,
            state.policy.version,
            state.nodes.generation,  # ranks among nodes follow their names
        )
        mark, kept = self._answers.get(key, (state.nodes.change_mark(), KeptAnswers()))
        changed = state.nodes.rows_changed_since(mark)
        if changed is None:
            kept = KeptAnswers()
        elif changed:
            kept.drop(set(changed))
        if key not in self._answers and (
            len(self._answers) >= self._LIMIT or self._answers_at != rule.now
        ):
            # Answers of another time are not asked again (the clock moved on), and they
            # keep the pods they chose as victims alive.
            self._answers.clear()
            self._answers_at = rule.now
        self._answers[key] = (state.nodes.change_mark(), kept)
        return kept


_NO_MEMBER = np.iinfo(np.int64).max


def _lowest_member(state: ClusterState, row: int) -> int:
    lowest = _NO_MEMBER
    for pod in state.nodes.pods_on[row].values():
        record = state.group_of(pod)
        if (
            record is not None
            and record.disrupt_whole
            and state.pods.bound.get(pod.key) == row  # not a member held for a tentative placement
            and pod.deletion_timestamp is None
        ):
            lowest = min(lowest, pod.priority or 0)
    return lowest


def with_gang_victims(
    rule: VictimRule,
    demand: Demand,
    free: IntArray,
    candidates: BoolArray,
    search: Callable[[BoolArray], Evaluation],
    memo: GangSearchMemo | None = None,
    clashes: Sequence[tuple[BoolArray, StillFails]] = (),
    guards: Sequence[StillFails] = (),
) -> Evaluation:
    """The preemption node and victims among `candidates`, with groups as victim units and
    clashes lifted.

    `search` is the single-victim search over a candidate mask; it runs alone when no
    candidate row hosts a group member or a clash, so plain clusters pay one scan of the
    groups. `clashes` are the Diagnosis's nodes that failed for particular pods; `guards`
    must hold on the chosen node once the victims are gone (every candidate is then searched
    node by node). Answers on such nodes are the preemptor's own: never kept in `memo`.
    `memo` keeps per-node answers between attempts (`free` must be the preemptor's view of
    the state's room, which nominations of others change only through logged rows; a
    preemptor with a nomination of its own sees more and is left out).
    """
    state = rule.state
    gangs = gang_rows(state, rule, candidates) if memo is None else memo.gang_rows(rule, candidates)
    checks: dict[int, list[StillFails]] = {}
    for nodes, check in clashes:
        for row in np.flatnonzero(nodes & candidates).tolist():
            checks.setdefault(row, []).append(check)
    per_row = gangs.copy()
    per_row[list(checks)] = True
    if guards:
        per_row |= candidates
    if not per_row.any():
        return search(candidates)
    plain = search(candidates & ~per_row)
    options: list[tuple[ChoiceKey, NodeVictims]] = []
    if plain.row is not None:
        best = NodeVictims(plain.row, tuple(plain.victims), plain.pdb_violations)
        options.append((choice_key(best, state), best))
    kept = KeptAnswers()
    if memo is not None and rule.preemptor.key not in state.nominations:
        kept = memo.answers(rule, demand)
    kept.fit(per_row.shape[0])
    checked = np.zeros(per_row.shape[0], dtype=np.bool_)
    checked[list(checks)] = True
    if guards:
        checked[:] = True
    known = kept.known[: per_row.shape[0]]
    fresh = per_row & (checked | ~known)
    # Rows answered before that cannot host the preemptor (counted before this call's puts).
    failed = int((per_row & ~fresh & ~kept.works[: per_row.shape[0]]).sum())
    for row in np.flatnonzero(fresh).tolist():
        row_checks = [*checks.get(row, ()), *guards]
        found = select_victims_on_node(
            rule,
            demand,
            free[row] + terminating_room(state, row),
            row,
            units=lambda pod: running_members(state, pod),
            still_fails=_bound(row_checks, row),
        )
        rank = None if found is None else choice_key(found, state)
        if not row_checks:
            kept.put(row, (found, rank, _group_rows(state, row)))
        elif found is not None and rank is not None:
            options.append((rank, found))
        if found is None or rank is None:
            failed += 1
    # The kept answers (this call's included) on rows searched without checks this time.
    best_kept = None if guards else kept.best(lambda row: bool(per_row[row] and not checked[row]))
    if best_kept is not None:
        options.append(best_kept)
    if not options:
        reasons = dict(plain.reasons)
        reasons[NO_VICTIMS] = reasons.get(NO_VICTIMS, 0) + failed
        return Evaluation(reasons=reasons)
    best = min(options, key=lambda option: option[0])[1]
    return Evaluation(row=best.row, victims=list(best.victims), pdb_violations=best.pdb_violations)


def _bound(checks: list[StillFails], row: int) -> Callable[[Collection[str]], bool] | None:
    if not checks:
        return None
    return lambda removed: any(check(row, removed) for check in checks)


def _group_rows(state: ClusterState, row: int) -> frozenset[int]:
    """The row and the rows of every member of the groups its pods belong to."""
    rows = {row}
    for pod in state.nodes.pods_on[row].values():
        group = group_key_of(pod)
        for key in state.groups.members.get(group, ()) if group is not None else ():
            if (other := state.pods.bound.get(key)) is not None:
                rows.add(other)
    return frozenset(rows)


def terminating_room(state: ClusterState, row: int) -> IntArray:
    """Room of the pods on `row` already on their way out (it comes free without eviction)."""
    room = np.zeros(state.nodes.free.shape[1], dtype=np.int64)
    for pod in state.nodes.pods_on[row].values():
        if pod.deletion_timestamp is not None:
            demand = state.pods.demand(pod)
            room[demand.cols] += demand.amounts
    return room
