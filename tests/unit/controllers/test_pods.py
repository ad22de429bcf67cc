"""The steps after a pod is gone (controllers/pods.py, controllers/claims.py): its room given
back, its claims released as the resourceclaim controller would."""

from __future__ import annotations

from batchsched.commands.schedule import build_state
from batchsched.controllers import pod_gone
from tests.builders import node
from tests.conftest import objects_of
from tests.unit.plugins.dynamicresources.test_gangs import GPU_CLASS, allocated, gpus
from tests.unit.plugins.dynamicresources.test_preemption import holder


def test_a_gone_pod_leaves_its_claims_and_its_room() -> None:
    state = build_state(
        objects_of(
            GPU_CLASS,
            node("n1", cpu="8"),
            gpus("n1", 2),
            allocated("shared", "n1", "a", "b"),
            allocated("own", "n1", "a", device="gpu-1"),
            holder("a", "n1", "shared", "own"),
            holder("b", "n1", "shared"),
        )
    )
    free = state.nodes.free[state.nodes.row_of["n1"]].copy()
    gone = pod_gone(state, "ml/a")
    assert gone is not None and gone.key == "ml/a" and "ml/a" not in state.pods.by_key
    assert (state.nodes.free[state.nodes.row_of["n1"]] > free).any()  # its cpu is free again
    claims = state.devices.claims
    assert claims["ml/shared"].reserved_for == ("b",)
    assert claims["ml/shared"].allocation is not None  # b still holds it
    assert claims["ml/own"].reserved_for == () and claims["ml/own"].allocation is None
    assert pod_gone(state, "ml/a") is None  # gone already: nothing to do
