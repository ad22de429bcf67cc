"""NodePorts: host port clashes, rule by rule, and how preemption lifts them."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.errors import ManifestError
from tests.builders import node, pod
from tests.conftest import objects_of, schedule


def ports(*entries: dict[str, Any], sidecar: bool = False, cpu: str = "1") -> dict[str, Any]:
    """spec fields giving a pod's main container (or a sidecar) these ports."""
    container = {"name": "main", "image": "x", "ports": list(entries)}
    container["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if sidecar:
        side = {"name": "side", "image": "x", "restartPolicy": "Always", "ports": list(entries)}
        return {"initContainers": [side], "containers": [{**container, "ports": []}]}
    return {"containers": [container]}


def with_ports(name: str, *entries: dict[str, Any], **kw: Any) -> dict[str, Any]:
    spec = ports(*entries, sidecar=kw.pop("sidecar", False), cpu=kw.pop("cpu", "1"))
    return pod(name, **kw, **spec)


def bindings(*manifests: dict[str, Any]) -> dict[str, str]:
    return {b.pod: b.node for b in schedule(*manifests).bindings}


P80 = {"containerPort": 8080, "hostPort": 80}


def test_same_host_port_goes_to_another_node() -> None:
    result = bindings(
        node("a"), node("b"), with_ports("held", P80, node_name="a"), with_ports("p", P80)
    )
    assert result == {"default/p": "b"}


def test_clash_message_and_no_node() -> None:
    result = schedule(node("a"), with_ports("held", P80, node_name="a"), with_ports("p", P80))
    assert result.unschedulable["default/p"].startswith(
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    )


@pytest.mark.parametrize(
    ("held", "wanted", "clash"),
    [
        ({"hostPort": 80}, {"hostPort": 80, "protocol": "UDP"}, False),
        ({"hostPort": 80, "protocol": "UDP"}, {"hostPort": 80, "protocol": "UDP"}, True),
        ({"hostPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 80, "hostIP": "10.0.0.2"}, False),
        ({"hostPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 80, "hostIP": "10.0.0.1"}, True),
        ({"hostPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 80}, True),
        ({"hostPort": 80}, {"hostPort": 80, "hostIP": "10.0.0.1"}, True),
        ({"hostPort": 80, "hostIP": "0.0.0.0"}, {"hostPort": 80, "hostIP": "10.0.0.1"}, True),
        ({"hostPort": 80}, {"hostPort": 81}, False),
        ({"containerPort": 80}, {"containerPort": 80}, False),  # no hostPort: nothing bound
    ],
)
def test_protocol_and_address_rules(
    held: dict[str, Any], wanted: dict[str, Any], clash: bool
) -> None:
    result = bindings(node("a"), with_ports("held", held, node_name="a"), with_ports("p", wanted))
    assert result == ({} if clash else {"default/p": "a"})


def test_sidecar_ports_count_plain_init_containers_do_not() -> None:
    assert (
        bindings(
            node("a"), with_ports("held", P80, node_name="a", sidecar=True), with_ports("p", P80)
        )
        == {}
    )
    plain_init = pod(
        "held",
        node_name="a",
        initContainers=[{"name": "init", "image": "x", "ports": [P80]}],
    )
    assert bindings(node("a"), plain_init, with_ports("p", P80)) == {"default/p": "a"}


def test_pods_of_one_pass_see_each_other() -> None:
    result = bindings(node("a"), node("b"), *(with_ports(f"p{i}", P80) for i in range(3)))
    assert sorted(result.values()) == ["a", "b"]


def test_finished_pod_frees_its_port() -> None:
    done = with_ports("done", P80, node_name="a", phase="Succeeded")
    assert bindings(node("a"), done, with_ports("p", P80)) == {"default/p": "a"}


def test_bad_port_is_a_clear_error() -> None:
    with pytest.raises(ManifestError, match=r"spec.containers\[0\].ports\[0\].hostPort"):
        objects_of(with_ports("p", {"hostPort": 70000}))
    with pytest.raises(ManifestError, match=r"protocol.*not one of TCP, UDP, SCTP"):
        objects_of(with_ports("p", {"hostPort": 80, "protocol": "HTTP"}))


def test_preemption_evicts_the_port_holder_only() -> None:
    result = schedule(
        node("a", cpu="8"),
        with_ports("holder", P80, node_name="a", priority=1),
        pod("bystander", node_name="a", priority=1),
        with_ports("p", P80, priority=10),
    )
    assert [e.pod for e in result.evictions] == ["default/holder"]


def test_no_eviction_when_the_port_holder_outranks() -> None:
    result = schedule(
        node("a", cpu="2"),
        with_ports("holder", P80, node_name="a", priority=100),
        pod("small", node_name="a", priority=1),
        with_ports("p", P80, priority=10),
    )
    assert result.evictions == []
    assert (
        "preemption: 0/1 nodes are available: 1 No preemption victims found"
        in (result.unschedulable["default/p"])
    )


def test_preemption_needs_both_the_port_and_room() -> None:
    # The holder is small; room comes from the big pod, which must go as well.
    result = schedule(
        node("a", cpu="4"),
        with_ports("holder", P80, node_name="a", priority=1),
        pod("big", cpu="3", node_name="a", priority=2),
        with_ports("p", P80, priority=10, cpu="2"),
    )
    assert sorted(e.pod for e in result.evictions) == ["default/big", "default/holder"]
