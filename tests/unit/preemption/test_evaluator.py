"""The preemption evaluator (preemption/evaluator.py): strategies, the victims it finds node by
node (the same as the plugins' search over every node), and the pods it may not take."""

from __future__ import annotations

from datetime import timedelta

from batchsched.config import default_config
from batchsched.decisions import Evict, Nominate
from batchsched.plugins.defaultpreemption.plugin import DefaultPreemption
from batchsched.plugins.nodename.plugin import NodeName
from batchsched.plugins.preemptiontoleration.plugin import PreemptionToleration
from batchsched.preemption.evaluator import Evaluator, PreemptionStrategy, strategy_of
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.preemption_world import NOW, node, pdb, pod, priority_class, state_of

CLASSES = (
    priority_class("high", 9000),
    priority_class("low", 8000),
    priority_class("guarded", 8000, "10000", "600"),
)


def evaluator(state: ClusterState, strategy: PreemptionStrategy, preemptor: str) -> Evaluator:
    pod = state.pods.by_key[preemptor]
    return Evaluator(state, pod, state.policy.priority_of(pod), NOW, strategy)


def test_the_strategy_is_the_profile_s_preemption_plugin() -> None:
    default, toleration = DefaultPreemption(), PreemptionToleration()
    assert strategy_of([NodeName(), toleration]) is toleration
    assert strategy_of([default]) is default
    assert strategy_of([NodeName()]) is None
    assert toleration.reads_tolerations and not default.reads_tolerations


def test_node_by_node_it_finds_what_the_plugin_s_search_chose() -> None:
    items = [*CLASSES, node("n1"), node("n2"), node("n3")]
    items += [pod("a", 3000, on="n1", klass="low"), pod("b", 1000, on="n1", klass="low")]
    items += [pod("c", 2000, on="n2", klass="low"), pod("d", 2000, on="n2", klass="low")]
    items += [pod("e", 4000, on="n3", klass="high"), pod("p", 3000, klass="high")]
    state = state_of(*items)
    scheduler = Scheduler(state, default_config())
    strategy = strategy_of(scheduler.default_framework.post_filters)
    assert strategy is not None
    search = evaluator(state, strategy, "default/p")
    preemptor = state.pods.by_key["default/p"]
    demand, free = state.pods.demand(preemptor), state.free_for(preemptor)
    found, works = {}, []
    for row in range(state.nodes.rows):
        victims = search.on_node(row, demand, free[row])
        found[state.nodes.name(row)] = None if victims is None else [v.key for v in victims.victims]
        works += [victims] if victims is not None else []
    assert found == {"n1": ["default/a"], "n2": ["default/c", "default/d"], "n3": None}
    best = search.best(
        [v for r in range(state.nodes.rows) if (v := search.on_node(r, demand, free[r]))]
    )
    decisions = scheduler.schedule_pass(NOW)
    nominated = [d.node for d in decisions if isinstance(d, Nominate) and d.pod == "default/p"]
    assert best is not None and [state.nodes.name(best.row)] == nominated
    assert sorted(d.pod for d in decisions if isinstance(d, Evict)) == ["default/a"]


def test_it_names_the_pods_it_may_not_take_and_until_when() -> None:
    scheduled = timedelta(minutes=4)
    state = state_of(
        *CLASSES,
        node("n1"),
        pod("g", 2000, on="n1", klass="guarded", scheduled=scheduled),
        pod("gone", 1000, on="n1", klass="missing"),
        pod("l", 1000, on="n1", klass="low"),
        pod("p", 3000, klass="high"),
    )
    standing = evaluator(state, PreemptionToleration(), "default/p").standing(0)
    assert [p.key for p in standing.missing_class] == ["default/gone"]
    assert [(p.pod.key, p.until) for p in standing.protected] == [
        ("default/g", NOW - scheduled + timedelta(seconds=600))
    ]
    # The default strategy reads no toleration: the same pod may be taken.
    assert evaluator(state, DefaultPreemption(), "default/p").standing(0).protected == []


def test_victims_that_break_a_budget_are_named() -> None:
    state = state_of(
        *CLASSES,
        node("n1"),
        pod("a", 2000, on="n1", klass="low", labels={"app": "x"}),
        pod("b", 2000, on="n1", klass="low", labels={"app": "x"}),
        pdb("x", {"app": "x"}, 1),
        pod("p", 4000, klass="high"),
    )
    search = evaluator(state, DefaultPreemption(), "default/p")
    preemptor = state.pods.by_key["default/p"]
    found = search.on_node(0, state.pods.demand(preemptor), state.free_for(preemptor)[0])
    assert found is not None and len(found.victims) == 2
    assert len(search.pdb_violations(found)) == 1
