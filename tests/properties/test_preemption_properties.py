"""Invariants of preemption over random small clusters.

- No pod exempt under the toleration policy at `now` is ever evicted, nor one of equal or
  higher priority.
- The evicted set is minimal: returning any single victim makes the preemptor not fit.
- The vectorised search over all nodes picks what the per-node search (the API gang
  scheduling reuses) ranks best, with or without a plugin's tie-break.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.decisions import Bind, Evict, Nominate
from batchsched.framework.interface import PreemptionTieBreak
from batchsched.objects.records import Pod
from batchsched.plugins.preemptiontoleration.plugin import PreemptionToleration
from batchsched.preemption.toleration_policy import is_exempt, parse_policy
from batchsched.preemption.victims import VictimRule, choice_key, select_victims_on_node
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.preemption_world import NOW, node, pdb, pod, priority_class

SETTINGS = settings(max_examples=120, deadline=None)
CLASSES = [
    priority_class("critical", 10000),
    priority_class("high", 9000),
    priority_class("mid", 8500),
    priority_class("low", 8000),
    priority_class("guarded", 8000, "10000", "600"),
    priority_class("forever", 8000, "9000", "-1"),
    priority_class("broken", 8000, "lots", "-1"),
]
VICTIM_CLASSES = ["mid", "low", "guarded", "forever", "broken"]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[ClusterState, Pod]:
    state = ClusterState()
    for pc in CLASSES:
        state.upsert_priority_class(pc)
    nodes = draw(st.integers(1, 4))
    for i in range(nodes):
        state.upsert_node(node(f"n{i}", cpu=4000, pods=draw(st.integers(3, 6))))
        room = 4000
        for j in range(draw(st.integers(0, 5))):
            cpu = draw(st.sampled_from([250, 500, 1000, 2000]))
            if cpu > room:
                continue
            room -= cpu
            state.upsert_pod(
                pod(
                    f"r{i}-{j}",
                    cpu,
                    on=f"n{i}",
                    klass=draw(st.sampled_from(VICTIM_CLASSES)),
                    started=timedelta(minutes=draw(st.integers(1, 30))),
                    scheduled=timedelta(minutes=draw(st.sampled_from([5, 10, 20]))),
                    labels={"app": draw(st.sampled_from(["a", "b"]))},
                    terminating=draw(st.integers(0, 9)) == 0,
                )
            )
    for app in draw(st.sets(st.sampled_from(["a", "b"]))):
        state.upsert_pdb(pdb(f"pdb-{app}", {"app": app}, draw(st.integers(0, 2))))
    preemptor = pod(
        "preemptor",
        draw(st.sampled_from([1000, 2000, 3000, 4000])),
        klass=draw(st.sampled_from(["critical", "high"])),
    )
    state.upsert_pod(preemptor)
    return state, preemptor


def _room(state: ClusterState, pods: list[Pod]) -> np.ndarray:
    room = np.zeros(len(state.nodes.resources), dtype=np.int64)
    for p in pods:
        d = state.pods.demand(p)
        room[d.cols] += d.amounts
    return room


@SETTINGS
@given(worlds())
def test_preemption_takes_no_exempt_pod_and_a_minimal_set(
    world: tuple[ClusterState, Pod],
) -> None:
    state, preemptor = world
    priority = preemptor.priority or 0
    terminating_before = {
        k for k, p in state.pods.by_key.items() if p.deletion_timestamp is not None
    }
    scheduler = Scheduler(state, default_config())
    free_before = {}
    for idx, _ in state.nodes.live():
        free_before[idx] = state.free_for(preemptor)[idx].copy()
    decisions = scheduler.schedule_pass(NOW)
    if any(isinstance(d, Bind) for d in decisions):
        return
    victims = [state.pods.by_key[d.pod] for d in decisions if isinstance(d, Evict)]
    nominated = [d for d in decisions if isinstance(d, Nominate) and d.pod == preemptor.key]
    for victim in victims:
        assert victim.key not in terminating_before
        assert (victim.priority or 0) < priority
        pc = state.policy.priority_classes[victim.priority_class_name]
        assert not is_exempt(victim, parse_policy(pc), preemptor, priority, NOW), victim.key
    if not nominated:
        assert victims == []
        return
    row = state.nodes.row_of[nominated[0].node or ""]
    assert all(state.pods.bound[v.key] == row for v in victims)
    leaving = [p for k, p in state.nodes.pods_on[row].items() if k in terminating_before]
    freed = free_before[row] + _room(state, leaving) + _room(state, victims)
    demand = state.pods.demand(preemptor)
    assert (freed[demand.cols] >= demand.amounts).all()
    for victim in victims:
        back = freed - _room(state, [victim])
        assert not (back[demand.cols] >= demand.amounts).all(), victim.key


# A plugin's order among nodes equal down to the number of victims (Backfill's: what the
# victims hold): none, or a key per node and victims drawn at random.
TIE_BREAKS = st.one_of(
    st.none(), st.lists(st.integers(0, 2), min_size=4, max_size=4), st.just("held")
)


def _tie_break(drawn: list[int] | str | None, state: ClusterState) -> PreemptionTieBreak | None:
    if drawn is None:
        return None
    if drawn == "held":
        return lambda row, victims: float(sum(state.pods.demand(v).amounts.sum() for v in victims))
    keys = list(drawn)
    return lambda row, victims: float(keys[row % len(keys)])


@SETTINGS
@given(worlds(), TIE_BREAKS)
def test_vectorised_search_agrees_with_the_per_node_search(
    world: tuple[ClusterState, Pod], drawn: list[int] | str | None
) -> None:
    state, preemptor = world
    tie_break = _tie_break(drawn, state)
    priority = preemptor.priority or 0
    plugin = PreemptionToleration()
    rule = VictimRule(
        state, preemptor, priority, NOW, plugin.class_verdicts(state, preemptor, priority, [])
    )
    demand = state.pods.demand(preemptor)
    free = state.free_for(preemptor)
    if (free[: state.nodes.rows][:, demand.cols] >= demand.amounts).all(axis=1).any():
        return  # fits somewhere: preemption would not run
    candidates = np.ones(state.nodes.rows, dtype=np.bool_)
    found = plugin.search(state).evaluate(rule, demand, free, candidates, tie_break=tie_break)
    per_node = []
    for row, _ in state.nodes.live():
        base = free[row] + _room(
            state,
            [p for p in state.nodes.pods_on[row].values() if p.deletion_timestamp is not None],
        )
        result = select_victims_on_node(rule, demand, base, row)
        if result is not None:
            per_node.append(result)
    if not per_node:
        assert found.row is None
        return
    best = min(per_node, key=lambda r: choice_key(r, state, tie_break))
    assert found.row == best.row
    assert [v.key for v in found.victims] == [v.key for v in best.victims]
    assert found.pdb_violations == best.pdb_violations


CHANGES = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "terminate", "nominate", "later", "pdb"]),
        st.integers(0, 3),  # node
        st.integers(0, 5),  # pod slot
        st.sampled_from(VICTIM_CLASSES),
    ),
    max_size=12,
)


@SETTINGS
@given(worlds(), CHANGES)
def test_results_kept_across_attempts_equal_a_fresh_search(
    world: tuple[ClusterState, Pod], changes: list[tuple[str, int, int, str]]
) -> None:
    state, preemptor = world
    priority = preemptor.priority or 0
    kept = PreemptionToleration()
    now = NOW
    demand = state.pods.demand(preemptor)

    def attempt(plugin: PreemptionToleration) -> tuple[object, ...]:
        rule = VictimRule(
            state, preemptor, priority, now, plugin.class_verdicts(state, preemptor, priority, [])
        )
        candidates = np.ones(state.nodes.rows, dtype=np.bool_)
        found = plugin.search(state).evaluate(rule, demand, state.free_for(preemptor), candidates)
        return (found.row, [v.key for v in found.victims], found.pdb_violations, found.reasons)

    attempt(kept)
    for op, n, j, klass in changes:
        name, key = f"n{n % state.nodes.count}", f"default/c{n}-{j}"
        if op == "add" and key not in state.pods.by_key:
            state.upsert_pod(pod(f"c{n}-{j}", 500, on=name, klass=klass, labels={"app": "a"}))
        elif op == "remove":
            state.remove_pod(key)
        elif op == "terminate":
            state.mark_terminating(key, now)
        elif op == "nominate":
            state.upsert_pod(pod(f"w{j}", 1000, klass="high"))
            state.nominate(f"default/w{j}", name)
        elif op == "later":
            now += timedelta(minutes=3)
        else:
            state.upsert_pdb(pdb("pdb-a", {"app": "a"}, j % 3))
        assert attempt(kept) == attempt(PreemptionToleration())
