"""InterPodAffinity: required and preferred (anti-)affinity, symmetry, namespaces,
label keys and preemption, rule by rule."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.decisions import Bind, Evict, Nominate, Unschedulable
from batchsched.objects.load import load_text
from batchsched.plugins.args import ConfigError
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod
from tests.conftest import NOW, least_allocated, objects_of, schedule
from tests.paths import ROOT

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}
DB = {"app": "db"}
SCENARIOS = ROOT / "tests" / "scenarios" / "inter-pod"


def zoned(name: str, zone: str, **kw: Any) -> dict[str, Any]:
    return node(name, labels={HOST: name, ZONE: zone}, **kw)


NODES = [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")]


def term(labels: dict[str, str], key: str = HOST, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def affine(
    name: str,
    *,
    required: Any = (),
    anti: Any = (),
    preferred: Any = (),
    preferred_anti: Any = (),
    **kw: Any,
) -> dict[str, Any]:
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    affinity: dict[str, Any] = {}
    if required or preferred:
        affinity["podAffinity"] = {req: list(required), pref: list(preferred)}
    if anti or preferred_anti:
        affinity["podAntiAffinity"] = {req: list(anti), pref: list(preferred_anti)}
    return pod(name, affinity=affinity, **kw)


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def bindings(*manifests: dict[str, Any], **kw: Any) -> dict[str, str]:
    # Spreading resources break the ties these expectations were written with.
    kw.setdefault("config", least_allocated())
    return {b.pod: b.node for b in schedule(*manifests, **kw).bindings}


def test_required_anti_affinity_keeps_replicas_apart() -> None:
    pods = [affine(f"w{i}", anti=[term(WEB)], labels=WEB) for i in range(4)]
    result = schedule(*NODES, *pods)
    assert sorted(b.node for b in result.bindings) == ["a1", "a2", "b1"]
    (pending,) = result.unschedulable.values()
    assert pending.startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    )


def test_zone_anti_affinity_and_existing_pods_symmetry() -> None:
    held = [pod("d", labels=DB, node_name="a1")]
    p = affine("p", anti=[term(DB, ZONE)])
    assert bindings(*NODES, *held, p) == {"default/p": "b1"}
    # The existing pod's own anti-affinity keeps a matching newcomer out of its zone.
    held = [affine("d", anti=[term(WEB, ZONE)], labels=DB, node_name="a1")]
    result = schedule(*NODES, *held, pod("p", labels=WEB, cpu="1"))
    assert {b.pod: b.node for b in result.bindings} == {"default/p": "b1"}
    result = schedule(zoned("a1", "a"), *held, pod("p", labels=WEB))
    assert result.unschedulable["default/p"].startswith(
        "0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules."
    )


def test_required_affinity_follows_the_matching_pod_and_never_preempts() -> None:
    held = [pod("d", labels=DB, node_name="b1", priority=0)]
    assert bindings(*NODES, *held, affine("p", required=[term(DB, ZONE)])) == {"default/p": "b1"}
    full = [zoned("a1", "a"), zoned("b1", "b", cpu="1")]
    held = [pod("d", labels=DB, node_name="b1", priority=0)]
    result = schedule(*full, *held, affine("p", required=[term(DB, ZONE)], priority=10))
    assert result.evictions == []  # the only pod in the domain is the one it follows
    assert "1 node(s) didn't match pod affinity rules" in result.unschedulable["default/p"]


def test_first_pod_rule() -> None:
    own = affine("p", required=[term(WEB, ZONE)], labels=WEB)
    assert bindings(*NODES, own) == {"default/p": "a1"}
    other = affine("p", required=[term(WEB, ZONE)], labels=DB)
    assert bindings(*NODES, other) == {}
    # Pods of one pass follow the first into its zone.
    pods = [affine(f"w{i}", required=[term(WEB, ZONE)], labels=WEB) for i in range(3)]
    assert set(bindings(*NODES, *pods).values()) <= {"a1", "a2"}


def test_namespaces_and_namespace_selector() -> None:
    held = [pod("d", labels=DB, namespace="data", node_name="a1")]
    same_ns = affine("p", anti=[term(DB)])
    listed = affine("p", anti=[term(DB, namespaces=["data"])])
    selected = affine("p", anti=[term(DB, namespaceSelector={"matchLabels": {"team": "x"}})])
    every = affine("p", anti=[term(DB, namespaceSelector={})])
    ns = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "data", "labels": {"team": "x"}},
    }
    one = [zoned("a1", "a")]
    assert bindings(*one, *held, same_ns) == {"default/p": "a1"}
    assert bindings(*one, *held, listed) == {}
    assert bindings(*one, *held, selected) == {"default/p": "a1"}  # no Namespace object
    assert bindings(*one, ns, *held, selected) == {}
    assert bindings(*one, *held, every) == {}


def test_match_and_mismatch_label_keys() -> None:
    held = [pod("d", labels={**WEB, "rev": "1"}, node_name="a1")]
    one = [zoned("a1", "a")]
    match = affine("p", anti=[term(WEB, matchLabelKeys=["rev"])], labels={**WEB, "rev": "2"})
    mismatch = affine("p", anti=[term(WEB, mismatchLabelKeys=["rev"])], labels={**WEB, "rev": "2"})
    assert bindings(*one, *held, match) == {"default/p": "a1"}
    assert bindings(*one, *held, mismatch) == {}


def test_preferred_terms_score() -> None:
    held = [pod("d", labels=DB, node_name="b1")]
    near = affine("p", preferred=[weighted(50, term(DB, ZONE))])
    away = affine("p", preferred_anti=[weighted(50, term(DB, ZONE))], cpu="500m")
    assert bindings(*NODES, *held, near) == {"default/p": "b1"}
    assert bindings(*NODES, *held, away) == {"default/p": "a1"}


def test_existing_pods_terms_score_the_newcomer() -> None:
    held = [affine("d", required=[term(WEB, ZONE)], labels=DB, node_name="b1")]
    assert bindings(*NODES, *held, pod("p", labels=WEB)) == {"default/p": "b1"}
    config = least_allocated(InterPodAffinity={"hardPodAffinityWeight": 0})
    assert bindings(*NODES, *held, pod("p", labels=WEB), config=config) == {"default/p": "a1"}
    prefers = [affine("d", preferred=[weighted(80, term(WEB, ZONE))], labels=DB, node_name="b1")]
    assert bindings(*NODES, *prefers, pod("p", labels=WEB)) == {"default/p": "b1"}
    ignoring = least_allocated(InterPodAffinity={"ignorePreferredTermsOfExistingPods": True})
    assert bindings(*NODES, *prefers, pod("p", labels=WEB), config=ignoring) == {"default/p": "a1"}


def test_args_validation() -> None:
    for args, what in [
        ({"hardPodAffinityWeight": 101}, "between 0 and 100"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "bool"),
        ({"other": 1}, "unknown argument"),
    ]:
        with pytest.raises(ConfigError, match=what):
            parse_config(
                {"profiles": [{"pluginConfig": [{"name": "InterPodAffinity", "args": args}]}]}
            )


def test_preemption_lifts_anti_affinity_on_the_node_only() -> None:
    held = [
        pod("low", labels=DB, node_name="a1", priority=1),
        pod("bystander", node_name="a1", priority=1),
    ]
    p = affine("p", anti=[term(DB)], priority=10, nodeSelector={HOST: "a1"})
    result = schedule(*NODES, *held, p)
    assert [e.pod for e in result.evictions] == ["default/low"]
    # Zone anti-affinity with a matching pod on another node of the zone: no victim set works.
    held = [pod("low", labels=DB, node_name="a2", priority=1)]
    p = affine("p", anti=[term(DB, ZONE)], priority=10, nodeSelector={HOST: "a1"})
    result = schedule(*NODES, *held, p)
    assert result.evictions == []


def test_preemption_of_an_existing_pods_anti_affinity() -> None:
    held = [affine("low", anti=[term(WEB)], node_name="a1", priority=1)]
    p = pod("p", labels=WEB, priority=10, nodeSelector={HOST: "a1"})
    assert [e.pod for e in schedule(*NODES, *held, p).evictions] == ["default/low"]
    high = [affine("high", anti=[term(WEB)], node_name="a1", priority=100)]
    assert schedule(*NODES, *high, p).evictions == []


def member(name: str, **kw: Any) -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": "g", **kw.pop("labels", WEB)}
    return affine(name, namespace="ml", labels=labels, **kw)


def test_gang_members_see_each_other_while_placed_together() -> None:
    from tests.builders import pod_group

    anti = [term(WEB)]
    gang = [member(f"m{i}", anti=anti) for i in range(3)]
    result = schedule(*NODES, pod_group("g", 3), *gang)
    assert sorted(b.node for b in result.bindings) == ["a1", "a2", "b1"]
    # Three members that must not share a node, on two nodes: none binds (all or nothing).
    result = schedule(*NODES[:2], pod_group("g", 3), *gang)
    assert result.bindings == []
    # Members that must share a zone follow the first member's zone.
    together = [member(f"m{i}", required=[term(WEB, ZONE)]) for i in range(3)]
    small = [zoned("a1", "a", cpu="2"), zoned("a2", "a", cpu="2"), zoned("b1", "b", cpu="2")]
    result = schedule(*small, pod_group("g", 3), *together)
    zones = {b.node[0] for b in result.bindings}
    assert len(result.bindings) == 3 and len(zones) == 1


def test_gang_preemption_removes_what_the_members_clash_with() -> None:
    from tests.builders import pod_group

    held = [
        pod(f"low{i}", labels=WEB, namespace="ml", node_name=n, priority=1)
        for i, n in enumerate(["a1", "a2"])
    ]
    gang = [member(f"m{i}", anti=[term(WEB)], priority=10) for i in range(2)]
    result = schedule(*NODES[:2], pod_group("g", 2), *held, *gang)
    assert sorted(e.pod for e in result.evictions) == ["ml/low0", "ml/low1"]
    assert sorted(b.node for b in result.bindings) == ["a1", "a2"]


def test_nominated_pods_count_where_they_are_nominated() -> None:
    # Pods of another scheduler, nominated to a1 with a higher priority: one that matches
    # keeps an anti-affine newcomer off a1, and one's own anti-affinity does too.
    one = [zoned("a1", "a", cpu="8"), zoned("b1", "b", cpu="8")]
    nominated = pod("n", labels=DB, priority=100, scheduler="other")
    nominated["status"]["nominatedNodeName"] = "a1"
    p = affine("p", anti=[term(DB)], cpu="500m")
    assert bindings(*one, nominated, p) == {"default/p": "b1"}
    assert bindings(*one, p) == {"default/p": "a1"}
    holder = affine("n", anti=[term(WEB)], priority=100, scheduler="other")
    holder["status"]["nominatedNodeName"] = "a1"
    assert bindings(*one, holder, pod("p", labels=WEB, cpu="500m")) == {"default/p": "b1"}
    low = affine("n", anti=[term(WEB)], priority=0, scheduler="other")
    low["status"]["nominatedNodeName"] = "a1"
    assert bindings(*one, low, pod("p", labels=WEB, cpu="500m", priority=5)) == {"default/p": "a1"}


def test_preemption_on_a_node_short_of_room_also_lifts_its_anti_affinity() -> None:
    # a1 fails first for room; the pod it must not share a node with goes, the filler stays.
    held = [
        pod("web", labels=WEB, cpu="500m", node_name="a1", priority=5),
        pod("filler", cpu="1", node_name="a1", priority=1),
    ]
    p = affine("p", anti=[term(WEB)], priority=10, nodeSelector={HOST: "a1"})
    result = schedule(zoned("a1", "a", cpu="2"), *held, p)
    assert [e.pod for e in result.evictions] == ["default/web"]
    assert {b.pod: b.node for b in result.bindings} == {"default/p": "a1"}


def test_a_pod_nominated_after_preempting_keeps_lower_pods_off_its_node_in_the_same_pass() -> None:
    # The first pass of scenarios/inter-pod/nominated-pod-anti-affinity-keeps-others-off-its-
    # node.yaml: p1 evicts r1 and is nominated to n0; p0, judged in the same pass, meets p1's
    # anti-affinity on n0 and, on n1 and n2, a skew of 2 (the terminating r1 is not counted).
    path = SCENARIOS / "nominated-pod-anti-affinity-keeps-others-off-its-node.yaml"
    state = build_state(load_text(path.read_text(), str(path)))
    scheduler = Scheduler(state, default_config())
    scheduler.queue.flush()
    decisions = scheduler.schedule_pass(NOW)
    assert [(d.pod, d.node) for d in decisions if isinstance(d, Evict | Nominate)] == [
        ("default/r1", "n0"),
        ("default/p1", "n0"),
    ]
    assert not [d for d in decisions if isinstance(d, Bind)]
    (message,) = [
        d.message for d in decisions if isinstance(d, Unschedulable) and d.pod == "default/p0"
    ]
    assert message.startswith(
        "0/3 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules, "
        "2 node(s) didn't match pod topology spread constraints."
    )


def test_a_shape_seen_before_still_meets_terms_that_come_later() -> None:
    """Whether InterPodAffinity has something to say about a pod reads the cluster (does a
    pod carry terms now), not only the pod's shape: the framework asks it again per pod."""
    objects = objects_of(
        zoned("a1", "a"),
        affine("gone", anti=[term(WEB)], node_name="a1"),  # makes `app` a term key
        pod("first", labels=WEB),
        pod("second", labels=WEB),
        affine("guard", anti=[term(WEB)], node_name="a1"),
    )
    by_name = {p.name: p for p in objects.pods}
    state = build_state(objects_of(zoned("a1", "a")))
    scheduler = Scheduler(state, default_config())
    state.upsert_pod(by_name["gone"])
    state.remove_pod(by_name["gone"].key)
    state.upsert_pod(by_name["first"])
    assert [type(d) for d in scheduler.schedule_pass(NOW)] == [Bind]  # no pod carries terms
    state.upsert_pod(by_name["guard"])
    state.upsert_pod(by_name["second"])  # the first pod's shape, in a cluster with terms now
    (decision,) = scheduler.schedule_pass(NOW)
    assert isinstance(decision, Unschedulable) and "anti-affinity" in decision.message
