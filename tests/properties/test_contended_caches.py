"""The caches that keep contended clusters linear decide as working afresh, on issue 18's
contended clusters (gangs running on every tenth node pair, PDBs, tolerations, pending
gangs that preempt):

- gang preemption's tentative placements refreshed only on the rows its victims free
  (`Framework.evaluate` / `place_changed`) against a full filter and score pass each;
- each member's results at the start of a gang search served from the placements the
  framework keeps per pod shape (`Framework.evaluate`), against evaluating every node;
- gang preemption's reprieve step taking back the units that `GroupFit.spare` shows
  cannot change the placement, against checking every unit;
- `GangSearchMemo.gang_rows`, kept from the log of changed rows, against a scan of every
  PodGroup;
- the victim table's PDB masks refreshed from each pod's remembered covering PDBs, found
  through the index by namespace and label pair, against matching every PDB's selector
  again, and the reprieve step looking only at the PDBs on the rows it takes from against
  looking at every PDB;
- the PDB index's answers, kept per pod and found among the PDBs filed under the
  requirement fewest PDBs share, against matching every PDB afresh at every question, also
  on ContendedPDB's clusters (every PDB names `app: trainer` and a shard);
- `UnitIndex.usable`, rechecking only the units on rows changed since its last call,
  against checking every unit's members;
- gang preemption's checks keeping the units of the last choice off their nodes and each
  member's results refreshed in place (`GroupFit`), against every check starting from the
  state with every unit back and results computed afresh;
- the tentative scope of gang preemption dropping its log entries
  (`ClusterState.tentative`), against every change staying logged;
- the reprieve step's choices (and its floor with the spare units back) found placed alike
  from each member's kept results without moving a unit (`GroupFit._alike_unmoved`),
  against a check of each;
- placements kept per pod shape on room adjusted for nominations (`Framework.select`,
  refreshed where the room or the log moved), against scoring every node;
- `PreemptionSearch.protection_ends`, kept per row and refreshed for changed rows, against
  a walk over every bound pod, as pods come, go and terminate and the clock moves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import timedelta
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state, run
from batchsched.config import default_config
from batchsched.framework.interface import NodeTotals
from batchsched.framework.placements import Placements
from batchsched.framework.runtime import Framework
from batchsched.objects.podgroup import group_key_of
from batchsched.objects.records import Pod, PodCondition
from batchsched.plugins.coscheduling.preemption import GroupFit, UnitIndex
from batchsched.plugins.preemptiontoleration.plugin import PreemptionToleration
from batchsched.preemption import gang_victims
from batchsched.preemption.gang_victims import GangSearchMemo
from batchsched.preemption.search import PreemptionSearch
from batchsched.preemption.toleration_policy import FOREVER, scheduled_since
from batchsched.preemption.victim_table import VictimTable
from batchsched.preemption.victims import VictimRule
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import Nodes
from batchsched.state.pdb_index import covers
from batchsched.state.policy import Policy
from benchmarks.workloads import contended


def _full_passes() -> AbstractContextManager[Any]:
    return patch.object(Framework, "evaluate", lambda self, cycle: None)


def _evaluated_afresh(self: Framework, cycle: Any) -> NodeTotals | None:
    """`Framework.evaluate` over every node, as before it was served per shape."""
    if self.shapes.key(cycle.state, cycle.pod, cycle.demand) is None or not self.row_local(cycle):
        return None
    feasible, _ = self.find_nodes(cycle, local_only=True)
    return NodeTotals(feasible, self._totals(cycle, feasible, local_only=True))


def _every_member_evaluated() -> AbstractContextManager[Any]:
    return patch.object(Framework, "evaluate", _evaluated_afresh)


def _every_unit_checked() -> AbstractContextManager[Any]:
    return patch.object(GroupFit, "spare", lambda self, chosen, placements: set())


def _scanned_gang_rows() -> AbstractContextManager[Any]:
    def scan(self: GangSearchMemo, rule: Any, candidates: Any) -> Any:
        return gang_victims.gang_rows(self.state, rule, candidates)

    return patch.object(GangSearchMemo, "gang_rows", scan)


def _matched_pdbs() -> AbstractContextManager[Any]:
    def match(self: VictimTable, rows: Any) -> None:
        for key, mask in self._pdb_masks.items():
            pdb = self.state.policy.pdbs[key]
            for r in rows.tolist():
                mask[r] = [covers(pdb, pod) for pod in self.pods[r]] + [False] * (
                    self.slots - len(self.pods[r])
                )
        # pdbs_taken reads these two; every row is marked as carrying every PDB.
        self._pdb_any[rows] = True
        for r in rows.tolist():
            self._row_pdbs[r] = tuple(self._pdb_masks)

    return patch.object(VictimTable, "_refresh_pdb_masks", match)


def _every_pdb_looked_at() -> AbstractContextManager[Any]:
    def every(self: VictimTable, rows: Any, take: Any) -> Any:
        self._follow_pdbs()
        return [
            (pdb, self._pdb_masks[key][rows] & take) for key, pdb in self.state.policy.pdbs.items()
        ]

    return patch.object(VictimTable, "pdbs_taken", every)


class _ScannedPdbs:
    """Answers as `PdbIndex` does, matching every PDB at every question."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def covering(self, pod: Pod) -> tuple[str, ...]:
        return tuple(sorted(k for k, pdb in self.policy.pdbs.items() if covers(pdb, pod)))

    def forget(self, key: str) -> None:
        pass


def _every_pdb_scanned() -> AbstractContextManager[Any]:
    # A new object at every question: the victim table rebuilds its masks each time too.
    return patch.object(Policy, "pdb_index", property(_ScannedPdbs))


def _every_unit_rechecked() -> AbstractContextManager[Any]:
    def scan(self: UnitIndex, state: Any, own: set[str]) -> Any:
        return np.fromiter(
            (
                all(p.deletion_timestamp is None and p.key not in own for p in unit.pods)
                for unit in self.units
            ),
            dtype=np.bool_,
            count=len(self.units),
        )

    return patch.object(UnitIndex, "usable", scan)


def _every_check_afresh() -> AbstractContextManager[Any]:
    original = GroupFit.place

    def afresh(self: GroupFit, chosen: Any, changed: Any = None) -> Any:
        self.restore()
        self.base = None
        return original(self, chosen)  # every unit is back: `changed` no longer tells

    return patch.object(GroupFit, "place", afresh)


def _every_change_logged() -> AbstractContextManager[Any]:
    return patch.object(Nodes, "tentative", lambda self: nullcontext())


def _every_choice_checked() -> AbstractContextManager[Any]:
    return patch.object(GroupFit, "_alike_unmoved", lambda self, choice: None)


def _every_node_scored() -> AbstractContextManager[Any]:
    original = Framework.select

    def scored(self: Framework, cycle: Any, feasible: Any, kept: bool = False) -> int:
        return original(self, cycle, feasible)

    return patch.object(Framework, "select", scored)


def _every_plan_made() -> AbstractContextManager[Any]:
    original = Framework.place_changed

    def made(self: Framework, cycle: Any, base: Any, rows: Any) -> Any:
        base.plan = None
        return original(self, cycle, base, rows)

    return patch.object(Framework, "place_changed", made)


@pytest.mark.parametrize(
    "fresh",
    [
        _full_passes,
        _every_member_evaluated,
        _every_unit_checked,
        _scanned_gang_rows,
        _matched_pdbs,
        _every_pdb_looked_at,
        _every_pdb_scanned,
        _every_unit_rechecked,
        _every_check_afresh,
        _every_change_logged,
        _every_choice_checked,
        _every_node_scored,
        _every_plan_made,
    ],
)
# From 40 nodes on there are several pending gangs, and gang preemption evicts.
@settings(max_examples=3, deadline=None)
@given(st.integers(40, 80), st.integers(0, 2**32 - 1))
def test_cached_decides_as_fresh(
    fresh: Callable[[], AbstractContextManager[Any]], nodes: int, seed: int
) -> None:
    cached = run(contended.generate(nodes, seed), default_config(), contended.NOW)
    with fresh():
        searched = run(contended.generate(nodes, seed), default_config(), contended.NOW)
    assert cached.to_json() == searched.to_json()


# ContendedPDB's shape with a PDB (and shard) per 10 nodes: several PDBs at these sizes.
SHARDED = replace(contended.CONTENDED_PDB, pdb_nodes=10)


@pytest.mark.parametrize("fresh", [_matched_pdbs, _every_pdb_looked_at, _every_pdb_scanned])
@settings(max_examples=3, deadline=None)
@given(st.integers(40, 80), st.integers(0, 2**32 - 1))
def test_pdb_caches_decide_as_fresh_on_shards(
    fresh: Callable[[], AbstractContextManager[Any]], nodes: int, seed: int
) -> None:
    cached = run(contended.generate(nodes, seed, SHARDED), default_config(), contended.NOW)
    assert cached.evictions  # PDBs are read: there are victims to choose
    with fresh():
        searched = run(contended.generate(nodes, seed, SHARDED), default_config(), contended.NOW)
    assert cached.to_json() == searched.to_json()


def test_gang_preemption_uses_refreshed_placements() -> None:
    """The comparison above is not vacuous: gang preemption does take the refreshed path."""
    calls = []
    original = Framework.place_changed

    def counted(self: Framework, *args: Any) -> int | None:
        calls.append(1)
        return original(self, *args)

    with patch.object(Framework, "place_changed", counted):
        run(contended.generate(40, 7), default_config(), contended.NOW)
    assert calls


def test_refreshed_placements_keep_their_row_plan() -> None:
    """The comparison with every plan made afresh is not vacuous: refreshes reuse the plan
    kept on the member's results, and it is the plan made for that member."""
    made, refreshed = [], []
    original_plan, original_place = Placements.row_plan, Framework.place_changed

    def counted_plan(self: Placements, cycle: Any) -> Any:
        made.append(1)
        return original_plan(self, cycle)

    def checked(self: Framework, cycle: Any, base: Any, rows: Any) -> Any:
        found = original_place(self, cycle, base, rows)
        if rows.shape[0]:
            refreshed.append(1)
            assert base.plan == original_plan(self.placements, cycle)
        return found

    with (
        patch.object(Placements, "row_plan", counted_plan),
        patch.object(Framework, "place_changed", checked),
    ):
        run(contended.generate(40, 7), default_config(), contended.NOW)
    assert refreshed and len(made) < len(refreshed)


def test_the_reprieve_step_takes_units_back_unchecked() -> None:
    """The comparison with every unit checked is not vacuous: units are spared."""
    spared = []
    original = GroupFit.spare

    def counted(self: GroupFit, *args: Any) -> set[int]:
        found = original(self, *args)
        spared.append(len(found))
        return found

    with patch.object(GroupFit, "spare", counted):
        run(contended.generate(80, 7), default_config(), contended.NOW)
    assert sum(spared) > 0


def test_gang_rows_follow_evictions() -> None:
    """A gang member marked terminating stops counting at once, as in the scan."""
    objects = contended.generate(20, 3)
    state = build_state(objects)
    memo = GangSearchMemo(state)
    member = next(
        p for p in state.pods.by_key.values() if p.node_name and group_key_of(p) is not None
    )
    rule = VictimRule(state, member, 10_000, contended.NOW, lambda n: (False, None))
    everywhere = np.ones(state.nodes.rows, dtype=np.bool_)
    before = memo.gang_rows(rule, everywhere)
    assert np.array_equal(before, gang_victims.gang_rows(state, rule, everywhere))
    for key in sorted(state.groups.members[group_key_of(member) or ""]):
        state.mark_terminating(key, contended.NOW)
    after = memo.gang_rows(rule, everywhere)
    assert np.array_equal(after, gang_victims.gang_rows(state, rule, everywhere))
    assert after.sum() < before.sum()


def _unmoved_answers(nodes: int, seed: int) -> list[tuple[bool, bool]]:
    """Each answer `_alike_unmoved` gives in a run, with the answer of a check of the same
    choice (the check runs too; the search goes on from wherever it leaves the units).
    Collected, not asserted inside: the loop reports a plugin's errors as results."""
    original = GroupFit._alike_unmoved
    answers: list[tuple[bool, bool]] = []

    def checked(self: GroupFit, choice: Any) -> bool | None:
        found = original(self, choice)
        if found is not None:
            assert self._worked is not None
            before = self._worked[1]
            placed = self.place(choice)
            alike = placed is not None and self.row_local and self._worked[1] == before
            answers.append((found, alike))
        return found

    with patch.object(GroupFit, "_alike_unmoved", checked):
        run(contended.generate(nodes, seed), default_config(), contended.NOW)
    return answers


@settings(max_examples=3, deadline=None)
@given(st.integers(100, 300), st.integers(0, 2**32 - 1))
def test_alike_unmoved_as_by_a_check(nodes: int, seed: int) -> None:
    answers = _unmoved_answers(nodes, seed)
    assert all(found == checked for found, checked in answers)


def test_alike_unmoved_both_ways() -> None:
    """Not vacuous: on this cluster choices are found both alike and not alike."""
    answers = _unmoved_answers(300, 7)
    assert all(found == checked for found, checked in answers)
    assert {found for found, _ in answers} == {True, False}


def _end(pod: Pod) -> float:
    since = scheduled_since(pod)
    return math.inf if since is None or pod.deletion_timestamp else since.timestamp()


def _first_end(state: ClusterState, rule: VictimRule) -> float:
    """When the first time-limited toleration of the rule's preemptor ends after its `now`,
    from every bound pod (inf: none)."""
    now = rule.now.timestamp()
    first = math.inf
    for row, pods in enumerate(state.nodes.pods_on):
        for pod in pods.values() if state.nodes.valid[row] else ():
            if not rule.lower(pod) or not pod.priority_class_name:
                continue
            seconds = rule.verdict(pod.priority_class_name)[1]
            since = scheduled_since(pod)
            if seconds is None or seconds == FOREVER or since is None:
                continue
            if since.timestamp() + seconds > now:
                first = min(first, since.timestamp() + seconds)
    return first


@settings(max_examples=10, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(
        st.tuples(st.sampled_from(["bind", "remove", "terminate", "clock"]), st.integers()),
        max_size=40,
    ),
)
def test_protection_ends_follow_changes(seed: int, steps: list[tuple[str, int]]) -> None:
    objects = contended.generate(6, seed)
    state = build_state(objects)
    search = PreemptionSearch(state)
    plugin = PreemptionToleration()
    names = sorted(state.nodes.row_of)
    now = contended.NOW
    for step, (kind, n) in enumerate(steps):
        # Pods whose toleration ends first are the ones whose changes matter.
        bound = sorted(state.pods.bound, key=lambda key: (_end(state.pods.by_key[key]), key))[:3]
        if kind == "bind":
            # A tolerant pod whose 10 minutes end within 2 minutes of now (or are over).
            since = now - timedelta(seconds=480 + n % 240)
            cls = ["tolerant", "low"][n % 2]
            state.upsert_pod(
                Pod(
                    namespace="default",
                    name=f"extra-{step}",
                    uid=f"uid-extra-{step}",
                    requests={"cpu": 100},
                    node_name=names[n % len(names)],
                    phase="Running",
                    priority=contended.PRIORITY[cls],
                    priority_class_name=cls,
                    start_time=since,
                    conditions=(PodCondition("PodScheduled", "True", since),),
                )
            )
        elif kind == "remove" and bound:
            state.remove_pod(bound[n % len(bound)])
        elif kind == "terminate" and bound:
            state.mark_terminating(bound[n % len(bound)], now)
        elif kind == "clock":
            now += timedelta(seconds=n % 900 - 100)  # mostly forward, sometimes back
        for priority in (100, 500):
            preemptor = next(iter(state.pods.pending.values()))
            verdicts = plugin.class_verdicts(state, preemptor, priority, [])
            rule = VictimRule(state, preemptor, priority, now, verdicts)
            assert search.protection_ends(rule) == _first_end(state, rule)


def test_protection_ends_are_not_vacuous() -> None:
    """The comparison above meets tolerations that run out: contended clusters have them."""
    state = build_state(contended.generate(6, 1))
    preemptor = next(iter(state.pods.pending.values()))
    verdicts = PreemptionToleration().class_verdicts(state, preemptor, 100, [])
    rule = VictimRule(state, preemptor, 100, contended.NOW, verdicts)
    assert contended.NOW.timestamp() < PreemptionSearch(state).protection_ends(rule) < math.inf
