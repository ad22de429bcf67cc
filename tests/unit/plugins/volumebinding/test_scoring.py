"""VolumeBinding's Score (StorageCapacityScoring): the shape, its validation, and which node
a pod's unbound claims favour."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from batchsched.commands.schedule import build_state
from batchsched.config import SchedulerConfig, parse_config
from batchsched.objects.volume_parse import read_csi_storage_capacity
from batchsched.plugins.args import ArgsReader, ConfigError
from batchsched.plugins.volumebinding.affinity import AffinityIndex
from batchsched.plugins.volumebinding.capacity import CapacityIndex
from batchsched.plugins.volumebinding.matching import options
from batchsched.plugins.volumebinding.scoring import (
    DEFAULT_SHAPE,
    CapacityScorer,
    _interpolate,
    read_shape,
)
from tests.builders import node
from tests.conftest import objects_of, schedule
from tests.unit.state.test_volumes import claim_pod, pv, pvc, wffc_class

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
PACK = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]


def shape_of(raw: Any) -> tuple[tuple[int, int], ...]:
    return read_shape(ArgsReader("VolumeBinding", {"shape": raw}, ("shape",)))


def with_shape(shape: list[dict[str, int]] | None) -> SchedulerConfig:
    args = {} if shape is None else {"shape": shape}
    return parse_config(
        {
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "pluginConfig": [{"name": "VolumeBinding", "args": args}],
                }
            ]
        }
    )


def hosts(*names: str) -> list[dict[str, Any]]:
    return [node(n, labels={HOST: n, ZONE: f"zone-{n}"}) for n in names]


def local_pv(name: str, host: str, size: str, storage_class: str = "local") -> dict[str, Any]:
    return pv(
        name,
        host,
        capacity={"storage": size},
        accessModes=["ReadWriteOnce"],
        storageClassName=storage_class,
        local={"path": "/x"},
    )


def claim(name: str, size: str, storage_class: str = "local") -> dict[str, Any]:
    return pvc(
        name,
        storageClassName=storage_class,
        accessModes=["ReadWriteOnce"],
        resources={"requests": {"storage": size}},
    )


def placed(result: Any) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings}


def test_the_default_shape_falls_from_ten_to_zero() -> None:
    assert DEFAULT_SHAPE == ((0, 10), (100, 0))
    assert shape_of(None) == DEFAULT_SHAPE


def test_the_shape_interpolates_and_is_flat_beyond_its_ends() -> None:
    shape = ((20, 0), (60, 100), (80, 50))
    assert [_interpolate(shape, u) for u in (0, 20, 40, 60, 70, 80, 100)] == [
        0,
        0,
        50,
        100,
        75,
        50,
        50,
    ]


def test_a_falling_segment_truncates_toward_zero_as_upstream() -> None:
    # 100 - 1000/30 = 66.67: Go's integer division gives 67, a floor would give 66.
    assert _interpolate(((0, 100), (30, 0)), 10) == 67


def test_scores_are_the_shape_times_ten() -> None:
    scorer = CapacityScorer(DEFAULT_SHAPE)
    assert scorer._mean({"local": [5, 10]}) == 50
    assert scorer._mean({"local": [1, 4], "fast": [0, 4]}) == 88  # (75 + 100) / 2, rounded up
    assert scorer._mean({"local": [5, 4]}) == 0  # more than the capacity: full
    assert scorer._mean({"local": [0, 0]}) == 0  # no capacity: full
    assert scorer._mean({}) == 0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], r"args.shape: must list at least one point, got \[\]"),
        ("x", r"args.shape: must list at least one point"),
        ([3], r"args.shape\[0\]: must be a mapping of utilization and score, got 3"),
        ([{"utilization": 0, "weight": 1}], r"args.shape\[0\]: unknown keys \['weight'\]"),
        (
            [{"utilization": 101, "score": 1}],
            r"shape\[0\].utilization: must be between 0 and 100, got 101",
        ),
        (
            [{"utilization": 0, "score": 11}],
            r"shape\[0\].score: must be between 0 and 10, got 11",
        ),
        (
            [{"utilization": 0, "score": True}],
            r"shape\[0\].score: must be an integer between 0 and 10, got True",
        ),
        (
            [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}],
            r"shape\[1\].utilization: utilization values must be sorted in increasing order",
        ),
    ],
)
def test_a_bad_shape_says_what_is_allowed(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        shape_of(raw)


def test_a_missing_point_field_reads_as_zero() -> None:
    assert shape_of([{"score": 3}, {"utilization": 10}]) == ((0, 3), (10, 0))


def test_a_bad_shape_in_a_config_names_the_plugin() -> None:
    with pytest.raises(ConfigError, match=r"profiles\[0\].pluginConfig\[0\].args.shape\[0\].score"):
        with_shape([{"utilization": 0, "score": -1}])


STATIC = [
    *hosts("n1", "n2"),
    wffc_class("local", "kubernetes.io/no-provisioner"),
    local_pv("small", "n1", "10Gi"),
    local_pv("large", "n2", "50Gi"),
    claim("data", "5Gi"),
    claim_pod("p", "data"),
]


def test_by_default_a_claim_takes_the_pv_it_fills_least() -> None:
    result = schedule(*STATIC)
    assert placed(result) == {"default/p": "n2"}
    assert [(b.claim, b.volume) for b in result.volume_bindings] == [("default/data", "large")]


def test_a_packing_shape_takes_the_pv_it_fills_most() -> None:
    assert placed(schedule(*STATIC, config=with_shape(PACK))) == {"default/p": "n1"}


def test_disabling_the_score_leaves_the_choice_to_the_other_scores() -> None:
    config = parse_config(
        {
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "plugins": {"score": {"disabled": [{"name": "VolumeBinding"}]}},
                }
            ]
        }
    )
    assert placed(schedule(*STATIC, config=config)) == {"default/p": "n1"}  # a tie: first name


def capacity(name: str, zone: str, size: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "kube-system"},
        "storageClassName": "fast",
        "nodeTopology": {"matchLabels": {ZONE: zone}},
        "capacity": size,
        **extra,
    }


DYNAMIC = [
    *hosts("n1", "n2", "n3"),
    wffc_class("fast", "fast.csi.example.com"),
    {
        "kind": "CSIDriver",
        "metadata": {"name": "fast.csi.example.com"},
        "spec": {"storageCapacity": True},
    },
    capacity("a", "zone-n1", "20Gi"),
    # maximumVolumeSize admits the claim; `capacity` is what it is weighed against.
    capacity("b", "zone-n2", "100Gi", maximumVolumeSize="50Gi"),
    capacity("c", "zone-n3", "1Gi"),  # no room: filtered out
    claim("scratch", "10Gi", "fast"),
    claim_pod("p", "scratch"),
]


def test_provisioning_favours_the_node_with_the_most_published_capacity() -> None:
    result = schedule(*DYNAMIC)
    assert placed(result) == {"default/p": "n2"}
    assert [(b.claim, b.volume) for b in result.volume_bindings] == [("default/scratch", "")]


def test_provisioning_with_a_packing_shape_fills_the_smallest_capacity() -> None:
    assert placed(schedule(*DYNAMIC, config=with_shape(PACK))) == {"default/p": "n1"}


def test_where_a_pv_is_bound_provisioning_is_left_out_of_the_score() -> None:
    # n1: "data" on a 12Gi PV (utilization 75: 25), "scratch" provisioned in 20Gi (50).
    # n2: "data" on a 10Gi PV (90: 10), "scratch" in 100Gi (10: 90). As upstream, a node
    # with a static binding is scored on those alone: n1 (25 > 10); averaging every claim
    # would have chosen n2 (50 > 38).
    result = schedule(
        *DYNAMIC[:-1],
        wffc_class("local", "kubernetes.io/no-provisioner"),
        local_pv("roomier", "n1", "12Gi"),
        local_pv("tight", "n2", "10Gi"),
        claim("data", "9Gi"),
        claim_pod("p", "scratch", "data"),
    )
    assert placed(result) == {"default/p": "n1"}


def test_two_claims_are_weighed_per_class() -> None:
    # n1: both local claims on 10Gi PVs, 2Gi + 2Gi of 20Gi (score 80); n2: on 100Gi PVs,
    # 4Gi of 200Gi (score 98).
    result = schedule(
        *hosts("n1", "n2"),
        wffc_class("local", "kubernetes.io/no-provisioner"),
        local_pv("a1", "n1", "10Gi"),
        local_pv("b1", "n1", "10Gi"),
        local_pv("a2", "n2", "100Gi"),
        local_pv("b2", "n2", "100Gi"),
        claim("x", "2Gi"),
        claim("y", "2Gi"),
        claim_pod("p", "x", "y"),
    )
    assert placed(result) == {"default/p": "n2"}


def test_pods_with_bound_claims_only_are_not_scored() -> None:
    result = schedule(
        *hosts("n1"),
        pv("bound", capacity={"storage": "1Gi"}, accessModes=["ReadWriteOnce"]),
        pvc("data", "bound"),
        claim_pod("p", "data"),
    )
    assert placed(result) == {"default/p": "n1"}


def test_a_capacity_object_keeps_its_capacity_apart_from_its_limit() -> None:
    both = read_csi_storage_capacity(capacity("b", "z", "100Gi", maximumVolumeSize="50Gi"))
    assert (both.limit, both.capacity) == (50 * 2**30, 100 * 2**30)
    only_max = capacity("m", "z", "1Gi", maximumVolumeSize="2Gi")
    del only_max["capacity"]
    parsed = read_csi_storage_capacity(only_max)
    assert (parsed.limit, parsed.capacity) == (2 * 2**30, None)


def test_utilization_is_exact_for_the_largest_quantities() -> None:
    huge = 2**63 - 1
    sizes = np.array([huge, huge // 2, 0], dtype=np.int64)
    assert CapacityScorer._utilizations(huge // 4, sizes).tolist() == [24, 49, 100]
    assert CapacityScorer._utilizations(5, np.array([10, 4], dtype=np.int64)).tolist() == [50, 100]


@pytest.mark.parametrize("shape", [DEFAULT_SHAPE, ((0, 0), (100, 10)), ((20, 3), (50, 9), (90, 1))])
def test_one_claim_scored_by_columns_agrees_with_the_per_node_match(
    shape: tuple[tuple[int, int], ...],
) -> None:
    # Nodes with one PV, two PVs (the smaller is chosen), none (provisioned within the
    # published capacity), none and no capacity (not scored).
    state = build_state(
        objects_of(
            *hosts("n1", "n2", "n3", "n4", "n5"),
            wffc_class("local", "fast.csi.example.com"),
            {
                "kind": "CSIDriver",
                "metadata": {"name": "fast.csi.example.com"},
                "spec": {"storageCapacity": True},
            },
            {**capacity("c3", "zone-n3", "40Gi"), "storageClassName": "local"},
            {**capacity("c4", "zone-n4", "7Gi"), "storageClassName": "local"},
            local_pv("a", "n1", "10Gi"),
            local_pv("b-big", "n2", "80Gi"),
            local_pv("b-small", "n2", "12Gi"),
            claim("data", "6Gi"),
        )
    )
    found = options(state, AffinityIndex(), CapacityIndex(), [state.volumes.claims["default/data"]])
    scorer = CapacityScorer(shape)
    feasible = state.nodes.valid[: state.nodes.rows].copy()
    by_columns = scorer._one_claim(state, CapacityIndex(), found[0], feasible)
    per_node = scorer._per_node(state, CapacityIndex(), found, feasible)
    assert by_columns.tolist() == per_node.tolist()
    assert by_columns[state.nodes.row_of["n5"]] == 0
