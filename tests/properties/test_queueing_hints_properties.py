"""Queueing hints change how fast, never what: the same clusters scheduled with hints on and
off (every waiting pod retried after every change) bind, evict, reserve and leave pending the
same pods. Only a message may differ: a pod no change could help is not tried again, so it
keeps the diagnosis of its last attempt (as kube-scheduler's PodScheduled condition does)."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state, run
from batchsched.config import default_config, parse_config
from batchsched.decisions import Decision, Evict, Unschedulable
from batchsched.framework.interface import (
    ClusterChange,
    ClusterEvent,
    Cycle,
    IndexArray,
    PodsHint,
)
from batchsched.framework.runtime import Framework
from batchsched.framework.signature import HintGroup
from batchsched.objects.load import Objects
from batchsched.objects.records import Node, Pod
from batchsched.plugins.noderesources.fit import NodeResourcesFit
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from benchmarks.workloads import contended
from tests.builders import pod
from tests.conftest import NOW, objects_of
from tests.properties.strategies import clusters, one_node_reserved, reserving_clusters, stated
from tests.properties.test_gang_properties import gang_clusters, preemption_clusters
from tests.properties.test_inter_pod_properties import clusters as inter_pod_clusters

SETTINGS = settings(max_examples=60, deadline=None)


def same_with_and_without_hints(manifests: list[dict[str, Any]]) -> None:
    same_output(lambda: objects_of(*manifests))


# Backfill reserves for a pod when it is attempted: one the hints leave alone (nothing lets it
# fit) reserves at its next attempt, where retrying everything may reserve a pass sooner, and
# what a reservation keeps off a node follows (docs/backfill.md). Hints are compared without it.
WITHOUT_BACKFILL = parse_config(
    {"profiles": [{"plugins": {"filter": {"disabled": [{"name": "Backfill"}]}}}]}
)


def same_output(objects: Callable[[], Objects], now: datetime = NOW) -> None:
    outputs = []
    for hints in (True, False):
        output = run(objects(), WITHOUT_BACKFILL, now, queueing_hints=hints)
        decided = output.to_json()
        decided["unschedulable"] = sorted(output.unschedulable)
        outputs.append(decided)
    assert outputs[0] == outputs[1]


@SETTINGS
@given(clusters(max_nodes=8, max_pods=30))
def test_hints_decide_as_retrying_everything(manifests: list[dict[str, Any]]) -> None:
    same_with_and_without_hints(manifests)


@SETTINGS
@given(st.one_of(gang_clusters(), preemption_clusters(), preemption_clusters(False)))
def test_hints_decide_as_retrying_everything_with_gangs(manifests: list[dict[str, Any]]) -> None:
    same_with_and_without_hints(manifests)


@settings(max_examples=6, deadline=None)
@given(st.integers(10, 60), st.integers(0, 2**32 - 1))
def test_hints_decide_as_retrying_everything_on_contended_clusters(nodes: int, seed: int) -> None:
    """Issue 18's mixed, nearly full clusters: priorities, a tolerating class, gangs running
    and pending, PDBs."""
    same_output(lambda: contended.generate(nodes, seed), contended.NOW)


def _own_labels(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pod also gets a label of its own (as a job's name): shapes must not split on it
    while no term names it, nor merge pods a term tells apart once one does."""
    for manifest in manifests:
        if manifest["kind"] == "Pod":
            manifest["metadata"].setdefault("labels", {})["job"] = manifest["metadata"]["name"]
    return manifests


@SETTINGS
@given(inter_pod_clusters().map(_own_labels))
def test_hints_decide_as_retrying_everything_with_inter_pod_rules(
    manifests: list[dict[str, Any]],
) -> None:
    """Anti-affinity, affinity, spread and host ports, with priorities: preemption evicts
    pods that others' rules name, and the hints for those rules must wake whom it helps."""
    same_with_and_without_hints(manifests)


def _decided(manifests: list[dict[str, Any]], gone: list[int], hints: bool) -> list[list[str]]:
    """Two passes over a cluster, with the drawn running pods leaving in between (the
    change hints judge), as (kind, pod, node) per decision but Unschedulable's message."""
    objects = objects_of(*manifests)
    state = build_state(objects)
    scheduler = Scheduler(state, default_config(), queueing_hints=hints)
    running = sorted(p.key for p in objects.pods if p.node_name)
    passes = []
    for step in range(3):
        decisions = scheduler.schedule_pass(NOW + timedelta(seconds=20 * step))
        passes.append([_shown(d) for d in decisions])
        for d in decisions:
            if isinstance(d, Evict):
                state.remove_pod(d.pod)
        for i in gone if step == 0 else []:
            if i < len(running) and running[i] in state.pods.by_key:
                state.remove_pod(running[i])
    return passes


def _shown(decision: Decision) -> str:
    if isinstance(decision, Unschedulable):
        return f"Unschedulable {decision.pod}"
    return repr(decision)


def _one_priority(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """No one can preempt: only the hints of the rules that rejected a pod wake it."""
    for manifest in manifests:
        if manifest["kind"] == "Pod":
            manifest["spec"]["priority"] = 0
    return manifests


@SETTINGS
@given(
    st.one_of(inter_pod_clusters(), inter_pod_clusters().map(_one_priority)).map(_own_labels),
    st.lists(st.integers(0, 4), max_size=3),
)
def test_hints_decide_as_retrying_everything_as_pods_leave(
    manifests: list[dict[str, Any]], gone: list[int]
) -> None:
    """Pods that inter-pod rules or host ports name leave between passes: every pod they
    kept out must be tried again, as without hints."""
    with_hints = _decided(manifests, gone, True)
    without = _decided(manifests, gone, False)
    # Without hints pods no change could help are tried (and told the same) again.
    assert [[d for d in p if not d.startswith("Unschedulable")] for p in with_hints] == [
        [d for d in p if not d.startswith("Unschedulable")] for p in without
    ]


_ROOM = ("cpu", "nvidia.com/gpu", "example.com/fpga", "dra.example.com/dev")
_amounts = st.tuples(*[st.integers(0, 3) for _ in _ROOM])


@SETTINGS
@given(
    st.lists(_amounts, min_size=1, max_size=5),  # per node: its allocatable
    st.lists(st.tuples(st.integers(0, 4), _amounts), max_size=6),  # running: node, requests
    st.lists(_amounts, min_size=1, max_size=8),  # waiting pods' requests
    st.lists(st.integers(0, 4), max_size=5),  # the rows whose room changed
)
def test_the_room_hint_answers_all_pods_at_once_as_each_alone(
    nodes: list[tuple[int, ...]],
    running: list[tuple[int, tuple[int, ...]]],
    waiting: list[tuple[int, ...]],
    rows: list[int],
) -> None:
    """NodeResourcesFit's hint, one matrix for all waiting pods, says of each what its filter
    would of the changed rows alone: fits one of them in every resource it checks (an ignored
    group never counts; a DeviceClass-mapped one counts only where a node advertises it).
    Running pods may ask more than a node has: room below zero."""
    state = ClusterState()
    for i, amounts in enumerate(nodes):
        state.upsert_node(Node(f"n{i}", dict(zip(_ROOM, amounts, strict=True))))
    for i, (row, amounts) in enumerate(running):
        if row < len(nodes):
            state.upsert_pod(_pod(f"r{i}", amounts, f"n{row}"))
    state.device_class_resources = {"dra.example.com/dev": "devices"}
    fit = NodeResourcesFit({"ignoredResourceGroups": ["example.com"]})
    changed = np.array(sorted({r for r in rows if r < len(nodes)}), dtype=np.intp)
    change = ClusterChange(state, frozenset({ClusterEvent.NODE_ROOM}), changed, None)
    pods = [_pod(f"w{i}", amounts) for i, amounts in enumerate(waiting)]

    asked = fit.events_to_register()[ClusterEvent.NODE_ROOM]
    assert isinstance(asked, PodsHint)
    assert asked.ask(change, pods) == [_fits_alone(state, changed, p) for p in pods]


@SETTINGS
@given(
    st.lists(_amounts, min_size=1, max_size=5),  # per node: its allocatable
    st.lists(_amounts, min_size=1, max_size=6),  # waiting pods' requests
    # Between asks: a pod arriving on a node (or the last arrival leaving), and the rows
    # whose room changed as the next ask sees them.
    st.lists(
        st.tuples(st.integers(0, 5), _amounts, st.lists(st.integers(0, 4), max_size=5)),
        min_size=1,
        max_size=6,
    ),
)
@example(nodes=[(1, 0, 0, 0)], waiting=[(1, 0, 0, 0)], steps=[(0, (1, 0, 0, 0), [0])])
def test_the_room_hint_follows_the_room_between_asks(
    nodes: list[tuple[int, ...]],
    waiting: list[tuple[int, ...]],
    steps: list[tuple[int, tuple[int, ...], list[int]]],
) -> None:
    """The rows where a request fits are kept while the room stands still: asked again after
    pods arrive on or leave a node, the hint answers for the room as it is then."""
    state = ClusterState()
    for i, amounts in enumerate(nodes):
        state.upsert_node(Node(f"n{i}", dict(zip(_ROOM, amounts, strict=True))))
    state.device_class_resources = {"dra.example.com/dev": "devices"}
    fit = NodeResourcesFit({"ignoredResourceGroups": ["example.com"]})
    asked = fit.events_to_register()[ClusterEvent.NODE_ROOM]
    assert isinstance(asked, PodsHint)
    pods = [_pod(f"w{i}", amounts) for i, amounts in enumerate(waiting)]
    every = np.arange(len(nodes), dtype=np.intp)
    change = ClusterChange(state, frozenset({ClusterEvent.NODE_ROOM}), every, None)
    assert asked.ask(change, pods) == [_fits_alone(state, every, p) for p in pods]
    arrived: list[str] = []
    for step, (row, amounts, rows) in enumerate(steps):
        if row < len(nodes):
            state.upsert_pod(_pod(f"r{step}", amounts, f"n{row}"))
            arrived.append(f"ns/r{step}")
        elif arrived:
            state.remove_pod(arrived.pop())
        changed = np.array(sorted({r for r in rows if r < len(nodes)}), dtype=np.intp)
        change = ClusterChange(state, frozenset({ClusterEvent.NODE_ROOM}), changed, None)
        for _ in range(2):  # the second time from the kept rows
            assert asked.ask(change, pods) == [_fits_alone(state, changed, p) for p in pods]


def _fits_alone(state: ClusterState, changed: IndexArray, pod: Pod) -> bool:
    """What NodeResourcesFit's filter says of the changed rows alone, row by row: the pod
    fits one of them in every resource it checks (an ignored group never counts; a
    DeviceClass-mapped one counts only where a node advertises it)."""
    cols = state.nodes.resources.names
    for row in changed.tolist():
        ok = True
        for name, amount in pod.requests.items():
            col = cols.index(name)
            if name == "example.com/fpga" or not amount:
                continue
            if name == "dra.example.com/dev" and state.nodes.allocatable[row, col] == 0:
                continue
            ok = ok and state.nodes.free[row, col] >= amount
        if ok:
            return True
    return False


def _pod(name: str, amounts: tuple[int, ...], node: str = "") -> Pod:
    return Pod("ns", name, requests=dict(zip(_ROOM, amounts, strict=True)), node_name=node)


def _could_bind(state: ClusterState, now: datetime, pods: list[Pod]) -> list[str]:
    """Those of `pods` (pending, not nominated) that pass every filter on some node now, as
    a framework that never saw the cluster before finds (it keeps nothing from earlier
    attempts; reading the state changes nothing)."""
    framework = Framework(default_config().profiles[0])
    for plugin in framework.plugins.values():
        plugin.attach(state)
    found = []
    for waiting in pods:
        if waiting.key in state.nominations:
            continue
        cycle = Cycle(state, waiting, now, state.pods.demand(waiting), state.free_for(waiting))
        if framework.pre_filter(cycle).reject is None and framework.find_nodes(cycle)[0].any():
            found.append(waiting.key)
    return found


@SETTINGS
@given(
    reserving_clusters(),
    # Between passes: minutes passing, and which pods end or are deleted (by place among the
    # running, then the pending ones).
    st.lists(st.tuples(st.integers(1, 90), st.lists(st.integers(0, 9), max_size=3)), max_size=4),
)
# A gang-sized pod reserves the one node; a pod that would run past its start is kept off by
# Backfill alone (it fits by room); the holder is deleted: only Backfill's hint can wake it.
@example(
    manifests=[
        *one_node_reserved(),
        pod(
            "p1",
            annotations=stated(240),
            created="2026-11-22T08:01:00Z",
            extra_requests={"nvidia.com/gpu": "2"},
        ),
    ],
    steps=[(1, [1])],
)
def test_hints_with_reservations_never_leave_a_pod_that_could_bind_asleep(
    manifests: list[dict[str, Any]], steps: list[tuple[int, list[int]]]
) -> None:
    """With Backfill's reservations, hints cannot decide as retrying everything does (a pod
    reserves when it is attempted, so which pod reserves when follows the retries), but a
    waiting pod the hints leave asleep at a pass's start could not bind then: whatever
    ended, moved or gave back a reservation (its holder deleted), or freed room, wakes it."""
    state = build_state(objects_of(*manifests))
    scheduler = Scheduler(state, default_config(), queueing_hints=True)
    # Hints alone wake a waiting pod, as in the simulator when no rule reads the clock
    # (sim/engine.py): not the retry of every pod that waited 5 minutes.
    scheduler.queue.max_unschedulable_seconds = math.inf
    instant = [NOW]
    wakes = scheduler.hints.wakes

    def judged(asked: Sequence[tuple[HintGroup, Pod, Hashable]]) -> list[str | None]:
        # Asked once the pass planned the reservations again, before anything is tried.
        events = wakes(asked)
        asleep = [pod for (_, pod, _), event in zip(asked, events, strict=True) if not event]
        could = _could_bind(state, instant[0], asleep)
        assert not could, f"left asleep though they could bind: {could}"
        return events

    scheduler.hints.wakes = judged  # type: ignore[method-assign]
    for minutes, gone in [(0, []), *steps]:
        instant[0] += timedelta(minutes=minutes)
        present = [*sorted(state.pods.bound), *sorted(state.pods.pending)]
        for i in sorted(set(gone)):
            if i < len(present):
                state.remove_pod(present[i])
        scheduler.schedule_pass(instant[0])
