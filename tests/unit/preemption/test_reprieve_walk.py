"""The gang search's reprieve step, per piece: what it answers from a few rows or from keys
kept across searches must be what the whole-node computation answers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import run
from batchsched.config import default_config
from batchsched.framework.interface import NodeTotals
from batchsched.framework.runtime import Framework
from batchsched.plugins.coscheduling.preemption import (
    GroupFit,
    UnitIndex,
    _still_chosen,
    index_key,
)
from batchsched.plugins.preemptiontoleration.plugin import PreemptionToleration
from batchsched.preemption.victims import VictimRule
from batchsched.state.nodes import IntArray
from benchmarks.workloads import contended
from tests.preemption_world import NOW, node, pdb, pod, priority_class, state_of


class _State:
    """What `Framework.choose` reads of a state: nominations and the nodes' name order."""

    def __init__(self, rank: list[int], nominated: int | None) -> None:
        self.nominations = {} if nominated is None else {"default/m": nominated}
        self.nodes = _Nodes(rank)


class _Nodes:
    def __init__(self, rank: list[int]) -> None:
        self._rank = np.asarray(rank, dtype=np.int64)

    def name_rank(self) -> IntArray:
        return self._rank

    def names_in_row_order(self) -> bool:
        return bool(np.array_equal(self._rank, np.arange(self._rank.shape[0])))


def _totals(scores: list[int]) -> NodeTotals:
    total = np.asarray(scores, dtype=np.int64)
    return NodeTotals(total >= 0, total)


@st.composite
def _worlds(draw: st.DrawFn) -> tuple[list[int], list[int], list[int], list[int], int | None]:
    n = draw(st.integers(1, 7))
    scores = st.lists(st.integers(-1, 2), min_size=n, max_size=n)  # few values: many ties
    now, unmoved = draw(scores), draw(scores)
    rank = draw(st.permutations(range(n)))
    rows = draw(st.lists(st.integers(0, n - 1), max_size=2 * n))  # a row under several units
    nominated = draw(st.none() | st.integers(0, n - 1))
    return now, unmoved, list(rank), rows, nominated


@settings(max_examples=400, deadline=None)
@given(_worlds())
def test_still_chosen_is_choose_on_the_results_with_the_rows_replaced(
    world: tuple[list[int], list[int], list[int], list[int], int | None],
) -> None:
    """`_still_chosen` looks at the replaced rows only; `Framework.choose` on the whole
    results with those rows replaced must agree, nominations and ties by name included
    (fails with ties broken by row where names are not in row order, a nominated node among
    the rows ignored, or a member placed nowhere assumed to stay so)."""
    scores, unmoved_scores, rank, replaced, nominated = world
    state = _State(rank, nominated)
    member = pod("m", 100)
    now, unmoved = _totals(scores), _totals(unmoved_scores)
    went = Framework.choose(state, member, now)  # type: ignore[arg-type]
    assume(went not in replaced)  # the reprieve step asks only then
    rows = np.asarray(replaced, dtype=np.intp)
    freed = np.zeros(len(scores), dtype=np.bool_)
    freed[rows] = True
    feasible, total = now.feasible.copy(), now.total.copy()
    feasible[rows], total[rows] = unmoved.feasible[rows], unmoved.total[rows]
    whole = Framework.choose(state, member, NodeTotals(feasible, total))  # type: ignore[arg-type]
    found = _still_chosen(went, nominated, now, unmoved, rows, freed, state.nodes.name_rank())
    assert found == (whole == went)


def test_reprieve_order_kept_across_calls_is_the_sections_order() -> None:
    """The reprieve step takes back PDB-violating units first, then the most important
    (higher priority, earlier start, then name); the keys kept per unit across calls must
    give that order for any subset (fails with the violating units last, with a stale key
    for a unit asked again, or with starts compared latest first)."""
    state = state_of(
        node("n1"),
        node("n2"),
        priority_class("high", 9000),
        priority_class("low", 8000),
        pdb("guard", {"app": "guarded"}, 0),
        pod("late", 1000, on="n1", klass="low", started=timedelta(minutes=5)),
        pod("early", 1000, on="n1", klass="low", started=timedelta(hours=5)),
        pod("b-same", 1000, on="n2", klass="low", started=timedelta(hours=1)),
        pod("a-same", 1000, on="n2", klass="low", started=timedelta(hours=1)),
        pod("lower", 1000, on="n2", priority=10, started=timedelta(hours=9)),
        pod("guarded", 1000, on="n1", priority=5, labels={"app": "guarded"}),
        pod("p", 3000, klass="high"),
    )
    preemptor = state.pods.by_key["default/p"]
    verdicts = PreemptionToleration().class_verdicts(state, preemptor, 9000, [])
    rule = VictimRule(state, preemptor, 9000, NOW, verdicts)
    index = UnitIndex(state, rule, index_key(state, rule))
    position = {unit.pods[0].name: u for u, unit in enumerate(index.units)}
    expected = ["guarded", "early", "a-same", "b-same", "late", "lower"]
    assert sorted(position) == sorted(expected)
    for names in (expected[::-1], ["late", "early"], expected[2:][::-1], expected):
        asked = [position[name] for name in names]
        order = [index.units[u].pods[0].name for u in index.reprieve_order(asked)]
        assert order == [name for name in expected if name in names]


def test_the_reprieve_steps_scratch_is_clean_between_calls() -> None:
    """`spare` and `_alike_unmoved` count and mark on per-node scratch arrays kept by the
    search instead of making them per call; each must leave them clear for the next call
    (a row left marked would exclude or free a node wrongly later)."""
    dirty: list[str] = []
    calls: list[str] = []

    def watched(name: str) -> Any:
        original = getattr(GroupFit, name)

        def call(self: GroupFit, *args: Any) -> Any:
            found = original(self, *args)
            calls.append(name)
            if self._hosts.any() or self._freed.any():
                dirty.append(name)
            return found

        return patch.object(GroupFit, name, call)

    with watched("spare"), watched("_alike_unmoved"):
        run(contended.generate(120, 7), default_config(), contended.NOW)
    assert set(calls) == {"spare", "_alike_unmoved"} and not dirty
