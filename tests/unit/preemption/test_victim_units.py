"""The per-node victim search with victim units (the hook gang scheduling uses)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.framework.runtime import Framework
from batchsched.objects.records import Pod, PodAffinity
from batchsched.plugins.coscheduling.placement import base_results
from batchsched.plugins.coscheduling.preemption import GroupFit, Unit, UnitIndex, index_key
from batchsched.plugins.preemptiontoleration.plugin import PreemptionToleration
from batchsched.preemption.victim_table import importance_key
from batchsched.preemption.victims import (
    PRIORITY_SHIFT,
    VictimRule,
    VictimUnits,
    choice_key,
    select_victims_on_node,
)
from batchsched.state.cluster import ClusterState
from benchmarks.workloads import contended
from tests.preemption_world import NOW, node, pdb, pod, priority_class, state_of


def world() -> tuple[ClusterState, Pod]:
    preemptor = pod("p", 3000, klass="high")
    state = state_of(
        node("n1"),
        node("n2"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        priority_class("forever", 8000, "10000", "-1"),
        pod("gang-0", 2000, on="n1", klass="low"),
        pod("solo", 2000, on="n1", klass="low"),
        pod("gang-1", 2000, on="n2", klass="low"),
        preemptor,
    )
    return state, preemptor


def rule_for(state: ClusterState, preemptor: Pod) -> VictimRule:
    verdicts = PreemptionToleration().class_verdicts(state, preemptor, 9000, [])
    return VictimRule(state, preemptor, 9000, NOW, verdicts)


def gang_of(state: ClusterState) -> VictimUnits:
    def units(victim: Pod) -> Collection[Pod]:
        if victim.name.startswith("gang-"):
            return [p for p in state.pods.by_key.values() if p.name.startswith("gang-")]
        return (victim,)

    return units


def test_a_unit_goes_whole_and_counts_everywhere() -> None:
    state, preemptor = world()
    rule = rule_for(state, preemptor)
    row = state.nodes.row_of["n1"]
    free = state.free_for(preemptor)[row]
    alone = select_victims_on_node(rule, state.pods.demand(preemptor), free, row)
    assert alone is not None
    assert [v.name for v in alone.victims] == ["gang-0", "solo"]
    units = gang_of(state)
    together = select_victims_on_node(rule, state.pods.demand(preemptor), free, row, units)
    assert together is not None
    assert sorted(v.name for v in together.victims) == ["gang-0", "gang-1", "solo"]
    assert choice_key(together, state)[3] == 3  # every member counts in node choice


def test_a_unit_with_a_member_that_may_not_be_taken_is_no_victim() -> None:
    state, preemptor = world()
    state.upsert_pod(pod("gang-1", 2000, on="n2", klass="forever"))
    rule = rule_for(state, preemptor)
    row = state.nodes.row_of["n1"]
    free = state.free_for(preemptor)[row]
    found = select_victims_on_node(rule, state.pods.demand(preemptor), free, row, gang_of(state))
    assert found is None  # solo alone does not make room, and the gang is protected


def test_unit_index_sees_members_that_started_going_since_its_last_call() -> None:
    state, preemptor = world()
    rule = rule_for(state, preemptor)
    index = UnitIndex(state, rule, index_key(state, rule))
    names = [unit.pods[0].name for unit in index.units]
    assert index.usable(state, set()).all()
    state.mark_terminating("default/solo", NOW)
    usable = index.usable(state, set())
    assert [n for n, ok in zip(names, usable, strict=True) if not ok] == ["solo"]
    own = index.usable(state, {"default/gang-1"})
    assert [n for n, ok in zip(names, own, strict=True) if not ok] == ["gang-1", "solo"]


def _violations(state: ClusterState, preemptor: Pod) -> dict[str, int]:
    rule = rule_for(state, preemptor)
    return {
        u.pods[0].name: u.violations for u in UnitIndex(state, rule, index_key(state, rule)).units
    }


def test_unit_index_key_moves_with_every_change_of_classes_and_pdbs() -> None:
    """The plugin keeps its units while the key stands still: each change the units read
    (a PDB's budget, a class's toleration) must move it, and so must another state whose
    counters happen to be equal."""
    state, preemptor = world()
    state.upsert_pod(pod("solo", 2000, on="n1", klass="low", labels={"app": "solo"}))
    state.upsert_pdb(pdb("solo", {"app": "solo"}, 1))
    rule = rule_for(state, preemptor)
    key = index_key(state, rule)
    assert index_key(state, rule_for(state, preemptor)) == key
    assert _violations(state, preemptor)["solo"] == 0
    state.upsert_pdb(pdb("solo", {"app": "solo"}, 0))  # the budget used up: same selector
    assert index_key(state, rule) != key
    assert _violations(state, preemptor)["solo"] == 1
    key = index_key(state, rule)
    state.upsert_priority_class(priority_class("low", 8000, "10000", "-1"))
    assert index_key(state, rule) != key
    assert "solo" not in _violations(state, preemptor)  # low now tolerates preemption
    twin, other = world(), world()
    for each, allowed in ((twin, 1), (other, 0)):
        each[0].upsert_pdb(pdb("solo", {}, allowed))
    assert (twin[0].pods.bound_version, twin[0].policy.version) == (
        other[0].pods.bound_version,
        other[0].policy.version,
    )
    assert index_key(twin[0], rule_for(*twin)) != index_key(other[0], rule_for(*other))


def _contended_fit() -> tuple[GroupFit, ClusterState]:
    state = build_state(contended.generate(30, 5))
    lead = next(p for p in state.pods.pending.values() if p.priority_class_name == "high")
    rule = VictimRule(state, lead, 1000, contended.NOW, lambda name: (False, None))
    index = UnitIndex(state, rule, index_key(state, rule))
    free = state.free_for(lead).copy()
    framework = Framework(default_config().profiles[0])
    return GroupFit(framework, state, contended.NOW, "g", free, [], 0, index), state


def _walked_cost(unit: Unit) -> tuple[float | int | str, ...]:
    """Section 3's node-choice order for a unit, term by term over all its pods."""
    priorities = [p.priority or 0 for p in unit.pods]
    highest = max(priorities)
    starts = [
        p.start_time.timestamp() if p.start_time is not None else float("inf")
        for p, priority in zip(unit.pods, priorities, strict=True)
        if priority == highest
    ]
    total = sum(p + PRIORITY_SHIFT for p in priorities)
    return (unit.violations, highest, total, len(unit.pods), -min(starts), unit.pods[0].key)


def test_unit_index_arrays_are_a_walk_over_its_units_pods() -> None:
    """The flat arrays are joined per pod and the one-pod units take a shortcut in cost and
    order: both must give what a walk over every unit's pods, entry by entry, gives."""
    state = build_state(contended.generate(30, 5))
    lead = next(p for p in state.pods.pending.values() if p.priority_class_name == "high")
    rule = VictimRule(state, lead, 1000, contended.NOW, lambda name: (False, None))
    # A pod asking for no cpu: fewer entries than the workload's pods.
    state.upsert_pod(pod("idle", 0, on=min(state.nodes.row_of)))
    index = UnitIndex(state, rule, index_key(state, rule))
    units = index.units
    assert any(len(u.pods) == 1 for u in units) and any(len(u.pods) > 1 for u in units)
    assert 1 in index.sizes.tolist()
    assert units == sorted(units, key=_walked_cost)
    assert all(list(u.pods) == sorted(u.pods, key=importance_key) for u in units)
    rows: list[int] = []
    cols: list[int] = []
    amounts: list[int] = []
    sizes: list[int] = []
    for unit in units:
        for member in unit.pods:
            demand = state.pods.demand(member)
            rows += [state.pods.bound[member.key]] * len(demand.cols)
            cols += demand.cols.tolist()
            amounts += demand.amounts.tolist()
        sizes.append(len(rows) - sum(sizes))
    for got, want, dtype in (
        (index.rows, rows, np.intp),
        (index.cols, cols, np.intp),
        (index.amounts, amounts, np.int64),
        (index.sizes, sizes, np.intp),
    ):
        assert got.dtype == dtype
        assert got.tolist() == want


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.integers(0, 10_000), max_size=40), min_size=1, max_size=6))
def test_group_fit_keeps_the_room_and_the_rows_of_its_choice(picks: list[list[int]]) -> None:
    """The room a search's choice frees is kept as units move (each check moves only the
    units that differ from the last); it must stay `free` plus every chosen unit's entries,
    and the rows found per unit must be the ones a walk over every unit finds."""
    fit, state = _contended_fit()
    index = fit.index
    count = len(index.units)
    pods_before = {row: list(state.nodes.pods_on[row]) for row in range(state.nodes.rows)}
    with state.nodes.tentative():  # as in a search: pods are put back in their order at its end
        for pick in picks:
            chosen = np.zeros(count, dtype=np.bool_)
            chosen[[i % count for i in pick]] = True
            fit._move(chosen)
            entries = np.repeat(chosen, index.sizes)
            expected = fit.free.copy()
            np.add.at(expected, (index.rows[entries], index.cols[entries]), index.amounts[entries])
            assert np.array_equal(fit._room, expected)
            rows = index.rows_of(np.flatnonzero(chosen))
            assert np.array_equal(rows, np.flatnonzero(np.repeat(chosen, index.row_counts)))
            assert np.array_equal(index.entries(np.flatnonzero(chosen)), np.flatnonzero(entries))
        fit.restore()
        assert np.array_equal(fit._room, fit.free)
    assert {row: list(state.nodes.pods_on[row]) for row in range(state.nodes.rows)} == pods_before


def test_member_results_follow_the_room_between_searches() -> None:
    """`base_results` asks `Framework.evaluate`, which serves each member from the shape's
    placement kept by the framework, refreshed on the rows changed since: after pods leave
    some nodes (and after a search refreshed the answer in place) it must equal a fresh
    framework's, and differ from the answer before they left."""
    state = build_state(contended.generate(30, 5))
    members = sorted(
        (p for p in state.pods.pending.values() if p.priority_class_name == "high"),
        key=lambda p: p.key,
    )[:6]
    profile = default_config().profiles[0]
    kept = Framework(profile)

    def results(framework: Framework) -> dict[str, tuple[list[bool], list[int]]]:
        found = base_results(
            framework, state, contended.NOW, state.free_for(members[0]), "g", members
        )
        return {
            key: (r.feasible.tolist(), r.total.tolist())
            for key, r in found.items()
            if r is not None
        }

    before = results(kept)
    assert before
    answer = base_results(kept, state, contended.NOW, state.free_for(members[0]), "g", members)
    for found in answer.values():  # as a search refreshes its copies in place
        if found is not None:
            found.feasible[:] = True
            found.total[:] = 12345
    # A few pods, so the log stays short enough for a refresh (not a placement afresh).
    for key in sorted(state.pods.bound)[:3]:
        state.remove_pod(key)
    after = results(kept)
    assert after == results(Framework(profile))
    assert after != before


def test_unit_index_per_unit_structures_are_a_walk_over_its_units_pods() -> None:
    """Built in one pass with a shortcut for one-pod units, each unit's (key, row) pairs,
    distinct sorted rows and locality, and the units by pod and by row, must be what a walk
    over every unit's pods gives (fails with a one-pod row or key taken from the wrong pod,
    rows left unsorted or repeated, or an inter-pod pod counted as local)."""
    state = build_state(contended.generate(40, 7))
    lead = next(p for p in state.pods.pending.values() if p.priority_class_name == "high")
    rule = VictimRule(state, lead, 1000, contended.NOW, lambda name: (False, None))
    gang = next(
        u.pods for u in UnitIndex(state, rule, index_key(state, rule)).units if len(u.pods) > 1
    )
    # A second member on the last member's node (a unit's row twice) and a lone pod with
    # an inter-pod term (not local).
    state.upsert_pod(replace(gang[0], name=gang[0].name + "-twin", node_name=gang[-1].node_name))
    lone = pod("near", 100, on=min(state.nodes.row_of), priority=1)
    state.upsert_pod(replace(lone, pod_affinity=PodAffinity()))
    index = UnitIndex(state, rule, index_key(state, rule))
    placed = [tuple((p.key, state.pods.bound[p.key]) for p in unit.pods) for unit in index.units]
    rows = [sorted({row for _, row in pods}) for pods in placed]
    assert any(len(found) < len(pods) for found, pods in zip(rows, placed, strict=True))
    assert any([r for _, r in pods] != found for found, pods in zip(rows, placed, strict=True))
    assert index.placed == placed
    assert index.unit_rows.tolist() == [r for found in rows for r in found]
    assert index.row_counts.tolist() == [len(found) for found in rows]
    assert index.row_unit.tolist() == [u for u, found in enumerate(rows) for _ in found]
    local = [all(p.pod_affinity is None for p in unit.pods) for unit in index.units]
    assert index.local.tolist() == local and not all(local)
    assert index._unit_of == {key: u for u, pods in enumerate(placed) for key, _ in pods}
    on: dict[int, list[int]] = {}
    for u, pods in enumerate(placed):
        for _, row in pods:
            on.setdefault(row, []).append(u)
    assert index._units_on == on


def test_the_chosen_units_pods_are_found_only_when_asked() -> None:
    """A check asks for the pods its units take away only when claims in the cluster may
    come free with them: the scan over every unit is not made before the pods are read."""
    fit, _ = _contended_fit()
    chosen = np.zeros(len(fit.index.units), dtype=np.bool_)
    chosen[[0, 3, 5]] = True
    with patch.object(np, "flatnonzero", side_effect=AssertionError("scanned")):
        gone = fit._gone(chosen)
    assert list(gone) == [pod for i in (0, 3, 5) for pod in fit.index.placed[i]]
