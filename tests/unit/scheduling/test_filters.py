"""One test per filter rule, through the one-shot scheduler as a user would run it."""

from typing import Any

from tests.builders import node, pod, priority_class
from tests.conftest import schedule


def bindings(*manifests: dict[str, Any]) -> dict[str, str]:
    return {b.pod: b.node for b in schedule(*manifests).bindings}


def message(*manifests: dict[str, Any], pod_key: str = "default/p") -> str:
    """The filters' part of the pod's message (what preemption adds is tested with it)."""
    return schedule(*manifests).unschedulable[pod_key].split(" preemption: ")[0]


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def test_cordoned_node_takes_no_pod_unless_tolerated() -> None:
    assert message(node("a", unschedulable=True), pod("p")) == (
        "0/1 nodes are available: 1 node(s) were unschedulable."
    )
    tolerant = pod(
        "p",
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
    )
    assert bindings(node("a", unschedulable=True), tolerant) == {"default/p": "a"}


def test_untolerated_noschedule_and_noexecute_taints_filter() -> None:
    nodes = [
        node("a", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        node("b", taints=[{"key": "maint", "value": "", "effect": "NoExecute"}]),
        node("c", taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]),
    ]
    assert bindings(*nodes, pod("p")) == {"default/p": "c"}
    msg = message(*nodes[:2], pod("p"))
    assert msg == (
        "0/2 nodes are available: 1 node(s) had untolerated taint {gpu: true}, "
        "1 node(s) had untolerated taint {maint: }."
    )


def test_toleration_operators_and_effects() -> None:
    tainted = node("a", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    equal = pod("p", tolerations=[{"key": "gpu", "operator": "Equal", "value": "true"}])
    wrong_value = pod("p", tolerations=[{"key": "gpu", "operator": "Equal", "value": "no"}])
    wrong_effect = pod(
        "p", tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]
    )
    everything = pod("p", tolerations=[{"operator": "Exists"}])
    assert bindings(tainted, equal) == {"default/p": "a"}
    assert bindings(tainted, wrong_value) == {}
    assert bindings(tainted, wrong_effect) == {}
    assert bindings(tainted, everything) == {"default/p": "a"}


def test_node_selector_must_match_every_label() -> None:
    nodes = [node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z1", "disk": "ssd"})]
    assert bindings(*nodes, pod("p", node_selector={"zone": "z1", "disk": "ssd"})) == {
        "default/p": "b"
    }
    assert message(*nodes, pod("p", node_selector={"zone": "z2"})) == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )


def test_required_affinity_operators() -> None:
    nodes = [
        node("a", labels={"gen": "3", "pool": "x"}),
        node("b", labels={"gen": "5"}),
        node("c", labels={"gen": "9", "pool": "y"}),
    ]

    def where(*exprs: dict[str, Any]) -> set[str]:
        result = schedule(*nodes, pod("p", affinity=affinity({"matchExpressions": list(exprs)})))
        return {b.node for b in result.bindings}

    assert where(
        {"key": "gen", "operator": "Gt", "values": ["4"]}, {"key": "pool", "operator": "Exists"}
    ) == {"c"}
    assert where({"key": "gen", "operator": "Lt", "values": ["4"]}) == {"a"}
    assert where({"key": "pool", "operator": "DoesNotExist"}) == {"b"}
    assert where({"key": "pool", "operator": "NotIn", "values": ["x", "y"]}) == {"b"}
    assert where({"key": "pool", "operator": "In", "values": ["y"]}) == {"c"}


def test_terms_are_ored_and_match_fields_pin_by_name() -> None:
    nodes = [node("a"), node("b", labels={"k": "v"}), node("c")]
    pinned = pod(
        "p",
        affinity=affinity(
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}
        ),
    )
    assert bindings(*nodes, pinned) == {"default/p": "c"}
    either = pod(
        "p",
        affinity=affinity(
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["zzz"]}]},
            {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]},
        ),
    )
    assert bindings(*nodes, either) == {"default/p": "b"}


def test_every_resource_must_fit_including_pod_count_and_extended() -> None:
    nodes = [node("a", cpu="2", pods="1"), node("b", cpu="8", nvidia_com__gpu="2")]
    running = pod("r", node_name="a", cpu="100m")
    gpu = pod("p", cpu="4", extra_requests={"nvidia.com/gpu": "4"})
    assert message(*nodes, running, gpu) == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 Too many pods, "
        "2 Insufficient nvidia.com/gpu."
    )


def test_first_failing_filter_is_reported_per_node() -> None:
    # Node a is both tainted and too small: only the taint (the earlier filter) is counted.
    nodes = [
        node("a", cpu="1", taints=[{"key": "t", "value": "v", "effect": "NoSchedule"}]),
        node("b", cpu="1"),
    ]
    assert message(*nodes, pod("p", cpu="2")) == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {t: v}."
    )


def test_running_pods_use_room_and_finished_pods_do_not() -> None:
    nodes = [node("a", cpu="2")]
    assert bindings(
        *nodes, pod("done", node_name="a", cpu="2", phase="Succeeded"), pod("p", cpu="2")
    ) == {"default/p": "a"}
    assert (
        bindings(*nodes, pod("busy", node_name="a", cpu="2", phase="Running"), pod("p", cpu="2"))
        == {}
    )


def test_terminating_pods_still_hold_room() -> None:
    leaving = pod("old", node_name="a", cpu="2")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-22T09:59:00Z"
    assert bindings(node("a", cpu="2"), leaving, pod("p", cpu="1")) == {}


def test_pods_of_other_schedulers_are_left_alone() -> None:
    result = schedule(node("a"), pod("p", scheduler="default-scheduler"))
    assert result.bindings == [] and result.unschedulable == {}


def test_priority_orders_the_queue() -> None:
    nodes = [node("a", cpu="2")]
    result = schedule(
        *nodes,
        priority_class("high", 100),
        pod("early-low", cpu="2", created="2026-11-22T08:00:00Z"),
        pod("late-high", cpu="2", priority_class="high", created="2026-11-22T09:00:00Z"),
    )
    assert [b.pod for b in result.bindings] == ["default/late-high"]
