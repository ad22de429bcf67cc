"""DRA claims of gang members: held across the tentative placement and given back together,
shared claims allocated once, victims' devices freed for gang preemption (scenarios:
tests/scenarios/dra/gang-*.yaml)."""

from __future__ import annotations

from typing import Any

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Bind, ReserveClaims
from batchsched.objects.dra import read_resource_claim, read_resource_slice
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.devices import EVERY_NODE, DeviceState
from tests.builders import node
from tests.builders import pod_group as group
from tests.conftest import NOW, objects_of
from tests.unit.plugins.dynamicresources.test_allocator import claim, exactly, slice_

GPU_CLASS = {
    "kind": "DeviceClass",
    "metadata": {"name": "gpu"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
}


def template(name: str, count: int) -> dict[str, Any]:
    return {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [exactly("gpu", count)]}}},
    }


def member(name: str, gang: str, **claims: str) -> dict[str, Any]:
    """A gang member; `claims` maps entry name to `template:x` or `claim:x`."""
    refs = []
    for entry, ref in claims.items():
        kind, target = ref.split(":")
        key = "resourceClaimTemplateName" if kind == "template" else "resourceClaimName"
        refs.append({"name": entry, key: target})
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": {GROUP_LABEL: gang}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "resourceClaims": refs,
        },
    }


def gpus(name: str, count: int) -> dict[str, Any]:
    return slice_(f"{name}-gpus", name, *[{"name": f"gpu-{i}"} for i in range(count)])


def two_gpu_pair(n1: int, n2: int) -> ClusterState:
    """Two nodes with `n1` and `n2` GPUs; a gang of two members, each asking for two."""
    return build_state(
        objects_of(
            GPU_CLASS,
            node("n1", cpu="8"),
            node("n2", cpu="8"),
            gpus("n1", n1),
            gpus("n2", n2),
            template("two", 2),
            group("g", 2, namespace="ml"),
            member("m0", "g", gpus="template:two"),
            member("m1", "g", gpus="template:two"),
        )
    )


def test_a_gang_that_fails_gives_back_every_tentative_allocation() -> None:
    state = two_gpu_pair(2, 1)
    claims_before = dict(state.devices.claims)
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    assert not [d for d in decisions if isinstance(d, Bind)]
    assert state.devices.claims == claims_before  # the template claims made are forgotten
    assert state.devices.in_use() == set()
    assert state.devices.allocated_here == []


def test_members_are_allocated_against_the_devices_the_members_before_them_left() -> None:
    state = two_gpu_pair(3, 2)
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    binds = {d.pod: d for d in decisions if isinstance(d, Bind)}
    assert {p: b.node for p, b in binds.items()} in (
        {"ml/m0": "n1", "ml/m1": "n2"},
        {"ml/m0": "n2", "ml/m1": "n1"},
    )
    held = set()
    for bind in binds.values():
        (step,) = bind.pre_bind
        assert isinstance(step, ReserveClaims)
        (reservation,) = step.claims
        assert reservation.allocation is not None
        devices = {d.id for d in reservation.allocation.devices}
        assert len(devices) == 2 and all(d.split("/")[1] == bind.node for d in devices)
        held |= devices
    assert len(held) == 4 and state.devices.in_use() == held


def test_a_claim_shared_by_members_is_allocated_once_and_pins_them_together() -> None:
    state = build_state(
        objects_of(
            GPU_CLASS,
            node("n1", cpu="8"),
            node("n2", cpu="8"),
            gpus("n1", 1),
            gpus("n2", 1),
            claim("shared", exactly("gpu")),
            group("g", 3, namespace="ml"),
            *[member(f"m{i}", "g", gpu="claim:shared") for i in range(3)],
        )
    )
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    nodes = {d.node for d in decisions if isinstance(d, Bind)}
    assert len(nodes) == 1
    shared = state.devices.claims["ml/shared"]
    assert shared.allocation is not None and len(shared.allocation.devices) == 1
    assert sorted(shared.reserved_for) == ["m0", "m1", "m2"]
    assert state.devices.allocated_here == ["ml/shared"]


def allocated(name: str, node_name: str, *reserved: str, device: str = "gpu-0") -> dict[str, Any]:
    """A claim for one GPU, allocated `device` of `node_name` and reserved for `reserved`."""
    manifest = claim(name, exactly("gpu"))
    manifest["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.example.com",
                        "pool": node_name,
                        "device": device,
                    }
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": p} for p in reserved],
    }
    return manifest


def test_release_frees_the_claims_only_victims_hold_until_put_back() -> None:
    devices = DeviceState()
    devices.upsert_claim(read_resource_claim(allocated("alone", "n1", "a")))
    devices.upsert_claim(read_resource_claim(allocated("both", "n2", "a", "b")))
    assert devices.held_only_by(["ml/a"]) == ["ml/alone"]
    assert sorted(devices.held_only_by(["ml/a", "ml/b"])) == ["ml/alone", "ml/both"]
    assert devices.held_only_by(["other/a"]) == []
    before = dict(devices.claims)
    in_use = set(devices.in_use())
    saved = devices.release(devices.held_only_by(["ml/a"]), ["n1"])
    assert devices.in_use() == {"gpu.example.com/n2/gpu-0"}
    assert devices.changed[-1] == "n1"  # per-node verdicts kept elsewhere are refreshed there
    devices.put_back(saved, ["n1"])
    assert devices.claims == before and devices.in_use() == in_use


def test_a_pod_gone_deletes_its_own_claims_and_leaves_the_shared_ones() -> None:
    devices = DeviceState()
    devices.upsert_claim(read_resource_claim(allocated("own", "n1", "a")))
    devices.upsert_claim(read_resource_claim(allocated("both", "n2", "a", "b")))
    devices.upsert_claim(read_resource_claim(allocated("named", "n3", "a")))
    devices.pod_gone("ml", "a", ["ml/both", "ml/named"], ["ml/own"], "n1")
    assert "ml/own" not in devices.claims
    assert devices.claims["ml/both"].reserved_for == ("b",)
    assert devices.claims["ml/both"].allocation is not None
    named = devices.claims["ml/named"]
    assert named.reserved_for == () and named.allocation is None  # deallocated, not deleted
    assert devices.in_use() == {"gpu.example.com/n2/gpu-0"}


def test_releasing_a_device_of_a_shared_pool_concerns_every_node() -> None:
    shared = slice_("rack", "", {"name": "gpu-0"}, pool="rack")
    del shared["spec"]["nodeName"]
    shared["spec"]["allNodes"] = True
    devices = DeviceState()
    devices.upsert_slice(read_resource_slice(shared))
    devices.upsert_claim(read_resource_claim(allocated("alone", "rack", "a")))
    saved = devices.release(devices.held_only_by(["ml/a"]), ["n1"])
    assert devices.changed[-1] == EVERY_NODE and devices.in_use() == set()
    devices.put_back(saved, ["n1"])
    assert devices.changed[-1] == EVERY_NODE and devices.in_use() == {"gpu.example.com/rack/gpu-0"}
    devices.pod_gone("ml", "a", ["ml/alone"], [], "n1")
    assert devices.changed[-1] == EVERY_NODE and devices.in_use() == set()
