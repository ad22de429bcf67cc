"""PodTopologySpread: filter, score, defaults and preemption, rule by rule."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.config import parse_config
from batchsched.plugins.args import ConfigError
from tests.builders import node, pod
from tests.conftest import least_allocated, schedule

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
APP = {"app": "web"}


def zoned(name: str, zone: str | None, **kw: Any) -> dict[str, Any]:
    labels = {HOST: name}
    if zone is not None:
        labels[ZONE] = zone
    return node(name, labels=labels, **kw)


def spread(key: str = ZONE, skew: int = 1, hard: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": APP},
        **extra,
    }


def web(name: str, *constraints: dict[str, Any], **kw: Any) -> dict[str, Any]:
    labels = kw.pop("labels", APP)
    if constraints:
        kw["topologySpreadConstraints"] = list(constraints)
    return pod(name, labels=labels, **kw)


def bindings(*manifests: dict[str, Any]) -> dict[str, str]:
    # Spreading resources break the ties these expectations were written with.
    return {b.pod: b.node for b in schedule(*manifests, config=least_allocated()).bindings}


ZONES = [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")]


def test_hard_spread_goes_to_the_emptier_zone() -> None:
    held = [web("w1", node_name="a1"), web("w2", node_name="a2")]
    assert bindings(*ZONES, *held, web("p", spread())) == {"default/p": "b1"}


def test_skew_message_and_missing_label_is_unresolvable() -> None:
    nodes = [zoned("a1", "a", cpu="500m"), zoned("b1", "b"), zoned("x", None)]
    held = [web("w1", node_name="b1"), web("w2", node_name="b1")]
    result = schedule(*nodes, *held, web("p", spread()))
    assert result.unschedulable["default/p"].startswith(
        "0/3 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) didn't match pod topology spread constraints (missing required label)."
    )


def test_pods_not_matching_and_other_namespaces_do_not_count() -> None:
    held = [
        web("w1", node_name="b1", labels={"app": "db"}),
        web("w2", node_name="b1", namespace="other"),
        web("w3", node_name="a1"),
    ]
    assert bindings(*ZONES, *held, web("p", spread())) == {"default/p": "b1"}


def test_a_pod_not_matching_its_own_selector_adds_nothing() -> None:
    held = [web("w1", node_name="a1")]
    p = web("p", spread(), labels={"app": "other"}, nodeSelector={ZONE: "a"})
    assert bindings(*ZONES, *held, p) == {"default/p": "a2"}


def test_min_domains_counts_missing_domains_as_empty() -> None:
    one_zone = [zoned("a1", "a"), zoned("a2", "a")]
    held = [web("w1", node_name="a1")]
    assert bindings(*one_zone, *held, web("p", spread(skew=1))) == {"default/p": "a2"}
    assert bindings(*one_zone, *held, web("p", spread(skew=1, minDomains=2))) == {}


def test_node_affinity_policy_limits_the_domains_counted() -> None:
    # Only zone a is eligible for the pod: with Honor, zone b's emptiness does not count.
    held = [web("w1", node_name="a1")]
    honor = web("p", spread(), nodeSelector={ZONE: "a"})
    ignore = web("p", spread(nodeAffinityPolicy="Ignore"), nodeSelector={ZONE: "a"})
    assert bindings(*ZONES, *held, honor) == {"default/p": "a2"}
    assert bindings(*ZONES, *held, ignore) == {}


def test_node_taints_policy_honor_skips_tainted_domains() -> None:
    taint = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    nodes = [zoned("a1", "a"), zoned("b1", "b", taints=taint)]
    held = [web("w1", node_name="a1")]
    assert bindings(*nodes, *held, web("p", spread())) == {}
    assert bindings(*nodes, *held, web("p", spread(nodeTaintsPolicy="Honor"))) == {
        "default/p": "a1"
    }


def test_match_label_keys_narrow_the_selector() -> None:
    held = [
        web("w1", node_name="a1", labels={**APP, "rev": "1"}),
        web("w2", node_name="a2", labels={**APP, "rev": "1"}),
        pod("filler", cpu="2", node_name="b1"),  # resources alone would pick zone a
    ]
    p = web("p", spread(matchLabelKeys=["rev"]), labels={**APP, "rev": "2"})
    # Revision 1 pods do not count for revision 2: nothing to spread from.
    assert bindings(*ZONES, *held, p) == {"default/p": "a1"}
    assert bindings(*ZONES, *held, web("p", spread(), labels={**APP, "rev": "2"})) == {
        "default/p": "b1"
    }


def test_pods_of_one_pass_spread_over_zones() -> None:
    result = bindings(*ZONES, *(web(f"p{i}", spread()) for i in range(4)))
    zones = sorted("a" if n.startswith("a") else "b" for n in result.values())
    assert zones == ["a", "a", "b", "b"]


def test_schedule_anyway_prefers_the_emptier_zone_but_never_refuses() -> None:
    big = [zoned("a1", "a", cpu="64"), zoned("b1", "b", cpu="2")]
    held = [web(f"w{i}", node_name="a1") for i in range(4)]
    assert bindings(*big, *held, web("p", spread(hard=False))) == {"default/p": "b1"}
    assert bindings(*big, *held, web("p", spread(hard=False), cpu="3")) == {"default/p": "a1"}


def owned(name: str, **kw: Any) -> dict[str, Any]:
    m = pod(name, **kw)
    m["metadata"]["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": "web-1", "uid": "u", "controller": True}
    ]
    return m


def test_system_defaults_spread_pods_of_one_replicaset() -> None:
    nodes = [zoned("a1", "a", cpu="64", memory="256Gi"), zoned("b1", "b", cpu="8")]
    held = [owned(f"w{i}", node_name="a1") for i in range(6)]
    assert bindings(*nodes, *held, owned("p")) == {"default/p": "b1"}
    assert bindings(*nodes, *held, pod("p")) == {"default/p": "a1"}  # no owner: no defaults


def test_list_defaults_and_their_validation() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
        ],
    }
    config = parse_config(
        {"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": args}]}]}
    )
    nodes = [zoned("a1", "a"), zoned("b1", "b", cpu="500m")]
    held = [owned("w1", node_name="a1")]
    result = schedule(*nodes, *held, owned("p"), config=config)
    assert result.bindings == []
    for bad, what in [
        ({"defaultConstraints": args["defaultConstraints"]}, "must be empty"),
        ({**args, "defaultConstraints": [{**spread(), "maxSkew": 1}]}, "must not be set"),
        ({"defaultingType": "Sometimes"}, "not one of System, List"),
    ]:
        with pytest.raises(ConfigError, match=what):
            parse_config(
                {"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": bad}]}]}
            )


def test_preemption_removes_matching_pods_from_the_crowded_domain() -> None:
    nodes = [zoned("a1", "a"), zoned("b1", "b", cpu="1")]
    held = [
        web("w1", node_name="a1", priority=1),
        web("w2", node_name="a1", priority=1),
        pod("other", node_name="a1", priority=1),
        pod("full", node_name="b1", priority=100),
    ]
    result = schedule(*nodes, *held, web("p", spread(), priority=10))
    # skew in a: 2 + 1 - 0 = 3 > 1: two matching pods must go, the bystander stays.
    assert sorted(e.pod for e in result.evictions) == ["default/w1", "default/w2"]


def test_bad_constraint_is_a_clear_error() -> None:
    from batchsched.objects.errors import ManifestError
    from tests.conftest import objects_of

    with pytest.raises(ManifestError, match=r"topologySpreadConstraints\[0\].maxSkew"):
        objects_of(web("p", spread(skew=0)))
    with pytest.raises(ManifestError, match="whenUnsatisfiable"):
        objects_of(web("p", {**spread(), "whenUnsatisfiable": "Maybe"}))
