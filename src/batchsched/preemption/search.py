"""Choosing the preemption node, with per-row results kept across attempts.

Preemptors come in waves of the same shape (priority and request): a job's pods, a
benchmark's pods. For one shape the victim search on a node depends only on that node's pods,
its room as the preemptor sees it, the class policies, the PDBs and, for time-limited
tolerations, the clock. So results are kept per shape and only rows whose pods or room changed
are searched again; a change of policy, a PDB, the clock passing the end of a toleration, or
the clock going back starts the shape afresh.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from batchsched.framework.interface import PreemptionTieBreak
from batchsched.framework.signature import PreemptorKey, preemptor_key
from batchsched.objects.records import Pod
from batchsched.preemption.nodes import (
    ClassArrays,
    Ranking,
    RowResults,
    Slots,
    room_alone,
    row_protection_ends,
    row_results,
)
from batchsched.preemption.reasons import NO_VICTIMS, Reasons
from batchsched.preemption.victim_table import FloatArray, table_of
from batchsched.preemption.victims import VictimRule
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray, IntArray, rows_differ
from batchsched.state.resources import Demand

_SHAPES_KEPT = 16


@dataclass(slots=True)
class Evaluation:
    """The chosen node (if any) and, when none works, a reason count per candidate row."""

    row: int | None = None
    victims: list[Pod] = field(default_factory=list)
    pdb_violations: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Shape:
    policy: tuple[object, ...]
    mark: int  # position in the state's log of changed rows
    now: float
    expires: float  # the first end of a time-limited toleration the results rely on
    # Room per row as the preemptor saw it, for the demanded resources (column-major); room
    # of terminating pods comes on top, which changes only on rows the log names.
    seen: IntArray
    # Whether `seen` is `free_for` a preemptor without a nomination of its own: two such
    # preemptors of one priority see the same room but on rows the log names since.
    plain: bool
    results: RowResults
    ranking: Ranking
    reasons: Reasons = field(default_factory=Reasons)


@dataclass(slots=True)
class _Ends:
    """Per row, when a time-limited toleration of one kind of preemptor first ends there
    after `now` (`row_protection_ends`), as of `mark` in the state's log; `first` the
    earliest. Every row's value holds from `now` until `first`, so rows are recomputed
    only where they changed, and all of them once the clock reaches `first` or goes back."""

    mark: int
    now: float
    rows: FloatArray
    first: float


class PreemptionSearch:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.table = table_of(state)
        # Per preemptor key (framework/signature.py: its priority and demand).
        self._shapes: OrderedDict[tuple[PreemptorKey, str | None], _Shape] = OrderedDict()
        # Per (priority, class verdicts): the per-row ends behind `protection_ends`.
        self._ends: OrderedDict[tuple[object, ...], _Ends] = OrderedDict()
        # The PDBs' part of the fingerprint, kept while no policy object changed: one tuple
        # per PDB for every preemptor would cost PDBs (which grow with the nodes) x preemptors.
        self._pdbs: tuple[object, ...] = ()
        self._pdbs_version = -1

    def evaluate(
        self,
        rule: VictimRule,
        demand: Demand,
        free: IntArray,
        candidates: BoolArray,
        plain: bool = False,
        tie_break: PreemptionTieBreak | None = None,
    ) -> Evaluation:
        """The best candidate node for the rule's preemptor and its victims, or why none works.

        `free` is the room per node as the preemptor sees it (`ClusterState.free_for`);
        `plain`: it is exactly that for a preemptor without a nomination of its own
        (`Cycle.plain_room`), not a copy changed since. `tie_break` orders the nodes equal
        to the best by the criteria down to the number of victims, before their start times.
        """
        state, table = self.state, self.table
        table.sync()
        rows = state.nodes.rows
        classes = ClassArrays.of(table, rule)
        fits = room_alone(table, rule, demand, free[:rows])
        if fits is not None and not (fits & candidates[:rows]).any():
            # Every candidate fails for want of victims (as `row_results` would find): no
            # per-row search, which a wave of reclaims (docs/queues.md#reclaim) would run
            # for each of its preemptors as their victims of earlier attempts terminate.
            failed = int(candidates[:rows].sum())
            return Evaluation(reasons={NO_VICTIMS: failed} if failed else {})
        shape = self._refresh(rule, demand, classes, free[:rows], plain)
        rank = state.nodes.name_rank()
        best = shape.ranking.best(shape.results, candidates, rank)
        if best is None:
            return Evaluation(reasons=shape.results.failure_counts(candidates, shape.reasons))
        if tie_break is not None:
            best = self._tie_broken(shape.results, candidates, best, tie_break, rank)
        return Evaluation(
            row=best,
            victims=self._victims(shape.results, best),
            pdb_violations=int(shape.results.violations[best]),
        )

    def _victims(self, results: RowResults, row: int) -> list[Pod]:
        return [self.table.pods[row][int(s)] for s in np.flatnonzero(results.victims[row])]

    def _tie_broken(
        self,
        results: RowResults,
        candidates: BoolArray,
        best: int,
        tie_break: PreemptionTieBreak,
        rank: IntArray,
    ) -> int:
        """Among the candidate rows equal to `best` down to the number of victims, the one
        `tie_break` puts first, then by the victims' start times and the node names."""
        rows = results.works.shape[0]
        tied = candidates[:rows] & results.works
        for criterion in (results.violations, results.highest, results.total, results.count):
            tied &= criterion == criterion[best]
        found = np.flatnonzero(tied)
        if found.shape[0] < 2:
            return best
        keys = np.fromiter(
            (tie_break(row, self._victims(results, row)) for row in found.tolist()),
            dtype=np.float64,
            count=found.shape[0],
        )
        return int(found[np.lexsort((rank[found], results.latest[found], keys))[0]])

    def protection_ends(self, rule: VictimRule) -> float:
        """When the clock may first change an answer of `rule`'s preemptor with the cluster
        unchanged (a toleration runs out), for gang units and clashes too (inf: never)."""
        state, table = self.state, self.table
        table.sync()
        classes = ClassArrays.of(table, rule)
        if not classes.timed.any():
            return math.inf
        key = (rule.priority, rule.queue, table.membership_version, *_class_fingerprint(classes))
        now = rule.now.timestamp()
        kept = self._ends.get(key)
        changed = None if kept is None else state.nodes.rows_changed_since(kept.mark)
        if (
            kept is None
            or changed is None
            or kept.rows.shape[0] != state.nodes.rows
            or not kept.now <= now < kept.first
        ):
            rows = row_protection_ends(table, rule, classes, slice(0, state.nodes.rows))
            kept = _Ends(state.nodes.change_mark(), now, rows, math.inf)
        elif changed:
            stale = np.unique(np.asarray(changed, dtype=np.intp))
            kept.rows[stale] = row_protection_ends(table, rule, classes, stale)
            kept.mark = state.nodes.change_mark()
            kept.now = now
        kept.first = float(kept.rows.min(initial=math.inf))
        self._ends[key] = kept
        self._ends.move_to_end(key)
        while len(self._ends) > _SHAPES_KEPT:
            self._ends.popitem(last=False)
        return kept.first

    def _refresh(
        self, rule: VictimRule, demand: Demand, classes: ClassArrays, free: IntArray, plain: bool
    ) -> _Shape:
        state, table = self.state, self.table
        # Within a queue (docs/queues.md#reclaim) the victims are the queue's: its pods are
        # found afresh when any pod's queue may have changed (`membership_version`).
        key = (preemptor_key(rule.priority, demand), rule.queue)
        if self._pdbs_version != state.policy.version:
            self._pdbs = _pdb_fingerprint(state)
            self._pdbs_version = state.policy.version
        policy = (*_class_fingerprint(classes), self._pdbs, table.membership_version)
        now = rule.now.timestamp()
        rows = free.shape[0]
        cols = demand.cols
        rank = state.nodes.name_rank()
        shape = self._shapes.get(key)
        if (
            shape is None
            or shape.policy != policy
            or not shape.now <= now < shape.expires
            or shape.seen.shape[0] != rows
            or shape.results.victims.shape[1] != table.slots
        ):
            results = RowResults.empty(rows, table.slots)
            seen = np.zeros((rows, cols.shape[0]), dtype=np.int64, order="F")
            ranking = Ranking(results, rank)
            shape = _Shape(policy, 0, now, math.inf, seen, plain, results, ranking)
            stale = np.arange(rows)
        else:
            changed = state.nodes.rows_changed_since(shape.mark)
            if changed is None:
                stale = np.arange(rows)
            elif plain and shape.plain:
                # Both rooms are `free_for` such a preemptor: the state's room less what
                # nominations at its priority or above hold, both changing only on logged
                # rows. So no comparison over every row (it grew with the cluster).
                stale = np.unique(np.asarray(changed, dtype=np.intp))
            else:
                moved = rows_differ(free, shape.seen, cols.tolist())
                if changed:
                    moved[np.asarray(changed, dtype=np.intp)] = True
                stale = np.flatnonzero(moved)
        shape.plain = plain
        if stale.size:
            shape.seen[stale] = free[stale][:, cols]
            base = shape.seen[stale] + table.terminating_room[stale][:, cols]
            slots = Slots.of(table, rule, classes, demand, base, stale)
            fresh = row_results(table, rule, slots, demand, shape.reasons)
            # About half the recomputed rows keep their place (failing before and after, or
            # the same criteria): leaving them clean keeps `best`'s apart-ranked rows few.
            moved_rank = shape.results.rank_moved(stale, fresh)
            shape.results.store(stale, fresh)
            shape.expires = min(shape.expires, slots.protection_ends())
            shape.ranking.mark(stale[moved_rank])
            if shape.ranking.worn:
                shape.ranking = Ranking(shape.results, rank)
        shape.mark = state.nodes.change_mark()
        shape.now = now
        self._shapes[key] = shape
        self._shapes.move_to_end(key)
        while len(self._shapes) > _SHAPES_KEPT:
            self._shapes.popitem(last=False)
        return shape


def _class_fingerprint(classes: ClassArrays) -> tuple[bytes, ...]:
    """What the results depend on beyond rows, time and the PDBs: the class verdicts."""
    return (
        classes.missing.tobytes(),
        classes.forever.tobytes(),
        classes.timed.tobytes(),
        classes.seconds.tobytes(),
    )


def _pdb_fingerprint(state: ClusterState) -> tuple[object, ...]:
    """What the results depend on in the PDBs (which change only with `policy_version`)."""
    return tuple(
        (
            key,
            tuple(sorted(pdb.selector.match_labels.items())),
            pdb.selector.match_expressions,
            pdb.disruptions_allowed,
        )
        for key, pdb in state.policy.pdbs.items()
    )
