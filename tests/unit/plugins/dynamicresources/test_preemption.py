"""Single-pod preemption frees the devices of victims' claims (scenarios:
tests/scenarios/dra/preempt-for-devices*.yaml): DynamicResources' rejection is resolvable where
only devices in use stand in the way, and its check shows the claims only the removed pods hold
as deallocated; the victims are chosen as for room (reprieve, PDBs, priority order)."""

from __future__ import annotations

from typing import Any

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Bind, Evict
from batchsched.plugins.dynamicresources.plugin import CANNOT_ALLOCATE, DynamicResources
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, priority_class
from tests.conftest import NOW, objects_of
from tests.unit.plugins.dynamicresources.test_gangs import GPU_CLASS, allocated, gpus, template


def holder(name: str, node_name: str, *claims: str, **more: Any) -> dict[str, Any]:
    manifest = pod(name, cpu="100m", namespace="ml", node_name=node_name, **more)
    manifest["metadata"]["uid"] = name
    manifest["spec"]["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    return manifest


def preemptor(name: str = "train") -> dict[str, Any]:
    manifest = pod(name, cpu="100m", namespace="ml", priority_class="high")
    manifest["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one"}]
    return manifest


def cluster(*objects: dict[str, Any]) -> ClusterState:
    return build_state(
        objects_of(
            GPU_CLASS,
            priority_class("high", 1000),
            priority_class("low", 100),
            template("one", 1),
            *objects,
        )
    )


def test_the_rejection_is_resolvable_where_devices_are_in_use_and_the_check_frees_them() -> None:
    state = cluster(
        node("n1", cpu="8"),
        node("n2", cpu="8"),
        node("bare", cpu="8"),
        gpus("n1", 1),
        gpus("n2", 1),
        allocated("alone", "n1", "a"),
        allocated("shared", "n2", "b", "c"),
        holder("a", "n1", "alone"),
        holder("b", "n2", "shared"),
        holder("c", "n2", "shared"),
        holder("idle", "n1"),
        preemptor(),
    )
    plugin = DynamicResources()
    plugin.attach(state)
    rejections = plugin.evaluate(state, state.pods.by_key["ml/train"])
    n1, n2, bare = (state.nodes.row_of[n] for n in ("n1", "n2", "bare"))
    resolvable = [r for r in rejections if r.resolvable]
    assert [r.reason for r in rejections] == [CANNOT_ALLOCATE, CANNOT_ALLOCATE]
    assert resolvable[0].nodes[[n1, n2, bare]].tolist() == [True, True, False]
    check = resolvable[0].still_fails
    assert check is not None
    claims_before, in_use_before = dict(state.devices.claims), set(state.devices.in_use())
    assert not check(n1, {"ml/a"})
    assert check(n1, {"ml/idle"})  # holds no claim
    assert check(n2, {"ml/b"})  # "shared" stays allocated for c
    assert not check(n2, {"ml/b", "ml/c"})
    # The check shows the claims deallocated only while it runs.
    assert state.devices.claims == claims_before
    assert state.devices.in_use() == in_use_before


def test_only_the_holder_is_evicted() -> None:
    state = cluster(
        node("n1", cpu="8"),
        gpus("n1", 1),
        allocated("alone", "n1", "a"),
        holder("a", "n1", "alone"),
        holder("idle", "n1"),  # lower too, but evicting it frees nothing: reprieved
        preemptor(),
    )
    decisions = Scheduler(state, default_config()).schedule_pass(NOW)
    assert [(d.pod, d.preemptor) for d in decisions if isinstance(d, Evict)] == [
        ("ml/a", "ml/train")
    ]


def test_the_least_important_holder_goes_and_pdbs_are_spared_first() -> None:
    """Two GPUs each held by one pod: the pod needs one, so the other holder is reprieved,
    most important first; a holder a PDB covers is kept over one it does not."""
    objects = (
        node("n1", cpu="8"),
        gpus("n1", 2),
        allocated("ga", "n1", "a"),
        allocated("gb", "n1", "b", device="gpu-1"),
        preemptor(),
    )
    # Alike, b would go (ties break on start time, then name): each rule turns that round.
    by_priority = cluster(
        *objects, holder("a", "n1", "ga"), holder("b", "n1", "gb", priority_class="low")
    )
    decisions = Scheduler(by_priority, default_config()).schedule_pass(NOW)
    assert [d.pod for d in decisions if isinstance(d, Evict)] == ["ml/a"]
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": "ml"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": 0},
    }
    by_budget = cluster(
        *objects,
        budget,
        holder("a", "n1", "ga"),
        holder("b", "n1", "gb", labels={"app": "db"}),
    )
    decisions = Scheduler(by_budget, default_config()).schedule_pass(NOW)
    assert [d.pod for d in decisions if isinstance(d, Evict)] == ["ml/a"]
    assert not [d for d in decisions if isinstance(d, Bind)]  # it waits for the victim
