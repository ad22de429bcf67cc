"""Preferred topology (docs/topology.md#preferred-placement): one domain of the narrowest key
that fits, else one of a broader key, else as few domains as the search finds, else anywhere;
never pending for a preference alone."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import OneShotResult
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.topology import PREFERRED_ANNOTATION
from tests.builders import node, pod, pod_group
from tests.conftest import schedule

RACK = "example.com/rack"
BLOCK = "example.com/block"
GPU = "nvidia.com/gpu"


def gpu_node(name: str, rack: str | None, block: str | None = None, gpus: int = 8) -> Any:
    labels = {k: v for k, v in ((RACK, rack), (BLOCK, block)) if v}
    return node(name, cpu="32", labels=labels, nvidia_com__gpu=str(gpus))


def gang(name: str, size: int, *keys: str) -> dict[str, Any]:
    manifest = pod_group(name, size)
    if keys:
        manifest["metadata"]["annotations"] = {PREFERRED_ANNOTATION: ",".join(keys)}
    return manifest


def members(group: str, size: int, gpus: int = 8) -> list[dict[str, Any]]:
    return [
        pod(
            f"{group}-{i}",
            namespace="ml",
            labels={GROUP_LABEL: group},
            extra_requests={GPU: str(gpus)},
        )
        for i in range(size)
    ]


def bound(result: OneShotResult) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings}


# Two blocks of two racks; b1's racks have 16 and 8 GPUs, b2's 8 and 8.
CLUSTER = [
    gpu_node("r1-n1", "rack-1", "block-1"),
    gpu_node("r1-n2", "rack-1", "block-1"),
    gpu_node("r2-n1", "rack-2", "block-1"),
    gpu_node("r3-n1", "rack-3", "block-2"),
    gpu_node("r4-n1", "rack-4", "block-2"),
    gpu_node("loose", None, None, 16),
]


def test_one_rack_when_one_fits() -> None:
    result = schedule(gang("g", 2, RACK, BLOCK), *members("g", 2), *CLUSTER)
    assert set(bound(result).values()) == {"r1-n1", "r1-n2"}
    assert result.domains["ml/g"] == ["rack-1"]
    assert result.topology_keys["ml/g"] == RACK


def test_one_block_when_no_rack_fits() -> None:
    result = schedule(gang("g", 3, RACK, BLOCK), *members("g", 3), *CLUSTER)
    assert set(bound(result).values()) == {"r1-n1", "r1-n2", "r2-n1"}
    assert (result.topology_keys["ml/g"], result.domains["ml/g"]) == (BLOCK, ["block-1"])


def test_fewest_racks_when_no_single_domain_fits() -> None:
    # Only racks are asked for: rack-1 (16) and then rack-2 (8, first of the 8s by name).
    result = schedule(gang("g", 3, RACK), *members("g", 3), *CLUSTER)
    assert set(bound(result).values()) == {"r1-n1", "r1-n2", "r2-n1"}
    assert result.domains["ml/g"] == ["rack-1", "rack-2"]


def test_anywhere_rather_than_pending() -> None:
    # 6 x 8 GPUs: the 5 labelled nodes hold 40, so the unlabelled node is needed too.
    result = schedule(gang("g", 6, RACK, BLOCK), *members("g", 6), *CLUSTER)
    assert len(result.bindings) == 6 and not result.unschedulable


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["rack-a", "rack-b", None]), st.sampled_from([4, 8])),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 5),
    st.sampled_from([2, 4, 8]),
)
def test_a_preference_never_keeps_a_gang_pending(
    cluster: list[tuple[str | None, int]], size: int, gpus: int
) -> None:
    nodes = [gpu_node(f"n{i}", rack, None, g) for i, (rack, g) in enumerate(cluster)]
    plain = schedule(gang("g", size), *members("g", size, gpus), *nodes)
    preferring = schedule(gang("g", size, RACK), *members("g", size, gpus), *nodes)
    assert len(preferring.bindings) == len(plain.bindings)
