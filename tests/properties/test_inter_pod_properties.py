"""After any run, no binding batchsched made breaks a required anti-affinity, a required
affinity, a DoNotSchedule spread or a host port, judged against the cluster as it was when
the binding was made (victims of a pass leave at its end, as in the one-shot world).

The oracle reads the cluster as upstream's filters do: a victim still terminating holds its
host ports and counts for inter-pod affinity, but not for topology spread
(`countPodsMatchSelector` skips terminating pods); a pod only nominated to a node is absent,
since upstream requires every node to pass without its nominated pods too."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Bind, Evict
from batchsched.objects.records import AffinityTerm, Pod
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod
from tests.conftest import NOW, objects_of

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


@st.composite
def _pod(draw: st.DrawFn, name: str, nodes: list[str], running: bool) -> dict[str, Any]:
    app = draw(st.sampled_from(["web", "db"]))
    extra: dict[str, Any] = {}
    affinity: dict[str, Any] = {}
    if draw(st.booleans()):
        key = draw(st.sampled_from([HOST, ZONE]))
        affinity["podAntiAffinity"] = {REQ: [_term(draw(st.sampled_from(["web", "db"])), key)]}
    if not running and draw(st.integers(0, 3)) == 0:
        affinity["podAffinity"] = {REQ: [_term(draw(st.sampled_from(["web", "db"])), ZONE)]}
    if not running and draw(st.booleans()):
        extra["topologySpreadConstraints"] = [
            {
                "maxSkew": draw(st.integers(1, 2)),
                "topologyKey": draw(st.sampled_from([HOST, ZONE])),
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    cpu = draw(st.sampled_from(["500m", "1", "2"]))
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    if draw(st.integers(0, 2)) == 0:
        container["ports"] = [{"containerPort": 1, "hostPort": draw(st.sampled_from([80, 81]))}]
    return pod(
        name,
        labels={"app": app},
        priority=draw(st.integers(0, 3)),
        node_name=draw(st.sampled_from(nodes)) if running else "",
        affinity=affinity or None,
        containers=[container],
        **extra,
    )


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(2, 5))
    names = [f"n{i}" for i in range(count)]
    nodes = [
        node(n, cpu=draw(st.sampled_from(["2", "4"])), labels={HOST: n, ZONE: f"z{i % 3}"})
        for i, n in enumerate(names)
    ]
    running = [draw(_pod(f"r{i}", names, True)) for i in range(draw(st.integers(0, 5)))]
    pending = [draw(_pod(f"p{i}", names, False)) for i in range(draw(st.integers(1, 7)))]
    return nodes + running + pending


def _matches(term: AffinityTerm, owner: Pod, other: Pod) -> bool:
    return other.namespace == owner.namespace and term.selector.matches(other)


def _violations(
    p: Pod,
    node_name: str,
    placed: dict[str, tuple[Pod, str]],
    leaving: set[str],
    labels: dict[str, dict[str, str]],
) -> list[str]:
    """What binding `p` to `node_name` breaks, given the pods placed now."""
    found = []
    here = labels[node_name]
    others = [(o, n) for k, (o, n) in placed.items() if k != p.key]
    for o, n in others:
        if n == node_name and any(a.conflicts(b) for a in p.host_ports for b in o.host_ports):
            found.append(f"port clash with {o.key}")
    for owner, target, n in [(p, o, n) for o, n in others] + [(o, p, n) for o, n in others]:
        aff = owner.pod_affinity
        for term in aff.required_anti if aff else ():
            if labels[n].get(term.topology_key) == here.get(term.topology_key) and _matches(
                term, owner, target
            ):
                found.append(f"anti-affinity {owner.key} vs {target.key}")
    aff = p.pod_affinity
    if aff and aff.required:
        for term in aff.required:
            near = [
                o
                for o, n in others
                if labels[n].get(term.topology_key) == here.get(term.topology_key)
                and _matches(term, p, o)
            ]
            anywhere = [o for o, _ in others if all(_matches(t, p, o) for t in aff.required)]
            first = not anywhere and all(_matches(t, p, p) for t in aff.required)
            if not near and not first:
                found.append(f"affinity of {p.key}")
    for c in p.spread_constraints:
        counts = {v.get(c.topology_key): 0 for v in labels.values()}
        for o, n in others:
            if o.key not in leaving and o.namespace == p.namespace and c.selector.matches(o):
                counts[labels[n].get(c.topology_key)] += 1
        own = int(c.selector.matches(p))
        if counts[here.get(c.topology_key)] + own - min(counts.values()) > c.max_skew:
            found.append(f"spread of {p.key}")
    return found


@settings(max_examples=40, deadline=None)
@given(clusters())
def test_no_binding_breaks_an_inter_pod_rule(manifests: list[dict[str, Any]]) -> None:
    objects = objects_of(*manifests)
    labels = {n.name: n.labels for n in objects.nodes}
    pods = {p.key: p for p in objects.pods}
    state = build_state(objects)
    scheduler = Scheduler(state, default_config())
    placed = {p.key: (p, p.node_name) for p in objects.pods if p.node_name}
    for _ in range(10):
        scheduler.queue.flush()
        leaving: set[str] = set()
        acted = False
        for decision in scheduler.schedule_pass(NOW):
            if isinstance(decision, Evict):
                leaving.add(decision.pod)
                acted = True
            elif isinstance(decision, Bind):
                p = pods[decision.pod]
                assert _violations(p, decision.node, placed, leaving, labels) == []
                placed[p.key] = (p, decision.node)
                acted = True
        for key in leaving:
            state.remove_pod(key)
            placed.pop(key, None)
        if not acted:
            break


@settings(max_examples=25, deadline=None)
@given(clusters())
def test_indexes_kept_from_the_change_log_equal_a_fresh_count(
    manifests: list[dict[str, Any]],
) -> None:
    """Match counts and existing pods' terms, refreshed row by row as pods bind and leave,
    equal the same indexes built afresh over the final cluster."""
    import numpy as np

    from batchsched.objects.records import Selector
    from batchsched.plugins.interpodaffinity.existing import (
        PREFERRED,
        REQUIRED,
        REQUIRED_ANTI,
        ExistingTerms,
    )
    from batchsched.plugins.podtopologyspread.counts import MatchCounts, SpreadScope

    objects = objects_of(*manifests)
    state = build_state(objects)
    scheduler = Scheduler(state, default_config())
    kept_terms = ExistingTerms(state)
    kept_counts = MatchCounts(state)
    scope = SpreadScope("default", Selector((("app", "web"),)))
    for _ in range(6):
        kept_terms.sync()
        kept_counts.per_row(scope)
        scheduler.queue.flush()
        evicted = [d.pod for d in scheduler.schedule_pass(NOW) if isinstance(d, Evict)]
        for key in evicted:
            state.remove_pod(key)
    kept_terms.sync()
    fresh_terms = ExistingTerms(state)
    fresh_terms.sync()
    for kind in (REQUIRED_ANTI, REQUIRED, PREFERRED):
        kept = {t: a.tolist() for t, a in kept_terms.groups(kind)}
        assert kept == {t: a.tolist() for t, a in fresh_terms.groups(kind)}
    assert np.array_equal(kept_counts.per_row(scope), MatchCounts(state).per_row(scope))
