"""The default profile's scores: each scenario under tests/scenarios/scores is decided by one
score, so turning that score off (or taking away what it reads) changes the decision."""

from __future__ import annotations

import pytest

from batchsched.commands.schedule import run
from batchsched.config import SchedulerConfig, default_config, parse_config
from batchsched.objects.load import load_text
from batchsched.plugins.args import ConfigError
from batchsched.plugins.registry import DEFAULT_PLUGINS
from tests.conftest import NOW
from tests.paths import ROOT

SCORES = ROOT / "tests" / "scenarios" / "scores"


def bindings(
    name: str, config: SchedulerConfig | None = None, edit: tuple[str, str] = ("", "")
) -> dict[str, str]:
    text = (SCORES / name).read_text().replace(*edit)
    result = run(load_text(text, name), config or default_config(), NOW)
    return {b.pod: b.node for b in result.bindings}


def without(score: str) -> SchedulerConfig:
    return parse_config(
        {
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "plugins": {"score": {"disabled": [{"name": score}]}},
                }
            ]
        }
    )


def test_default_weights_are_kube_schedulers() -> None:
    assert dict(DEFAULT_PLUGINS["score"]) == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "VolumeBinding": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
        "PodTopology": 2,  # batchsched's own: a pod's preferred topology (docs/topology.md)
        "Backfill": 2,  # batchsched's own: where nodes stay busy anyway (docs/backfill.md)
    }


@pytest.mark.parametrize(
    ("scenario", "score", "pod", "with_it", "without_it"),
    [
        ("node-affinity-preferred.yaml", "NodeAffinity", "default/likes-b", "node-b", "node-a"),
        ("taint-prefer-no-schedule.yaml", "TaintToleration", "default/plain", "node-b", "node-a"),
        ("image-locality.yaml", "ImageLocality", "ml/train", "node-b", "node-a"),
        (
            "balanced-allocation.yaml",
            "NodeResourcesBalancedAllocation",
            "default/new",
            "node-b",
            "node-a",
        ),
    ],
)
def test_each_score_decides_its_scenario(
    scenario: str, score: str, pod: str, with_it: str, without_it: str
) -> None:
    assert bindings(scenario)[pod] == with_it
    assert bindings(scenario, without(score))[pod] == without_it


def test_a_lower_weight_lets_another_score_win() -> None:
    # The pod prefers node-a (weight 1) but node-a has an untolerated PreferNoSchedule
    # taint: TaintToleration (weight 3) outweighs NodeAffinity (2) by default, and loses
    # once NodeAffinity's weight is raised to 10.
    manifests = """
kind: Node
metadata: {name: node-a, labels: {disk: ssd}}
spec: {taints: [{key: spot, effect: PreferNoSchedule}]}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
kind: Node
metadata: {name: node-b}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
kind: Pod
metadata: {name: p}
spec:
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - {weight: 1, preference: {matchExpressions: [{key: disk, operator: Exists}]}}
  containers: [{name: c}]
"""
    objects = load_text(manifests, "test")
    assert run(objects, default_config(), NOW).bindings[0].node == "node-b"
    heavier = parse_config(
        {
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "plugins": {"score": {"enabled": [{"name": "NodeAffinity", "weight": 10}]}},
                }
            ]
        }
    )
    assert run(load_text(manifests, "test"), heavier, NOW).bindings[0].node == "node-a"


def test_containers_without_requests_count_the_non_zero_defaults() -> None:
    assert bindings("nonzero-requests.yaml") == {"default/best-effort": "node-b"}
    # An explicit zero request is not a missing one: no default, so the nodes tie (node-a).
    zero = '{name: c, resources: {requests: {cpu: "0", memory: "0"}}}'
    explicit = ("containers: [{name: c}]}", f"containers: [{zero}]}}")
    assert bindings("nonzero-requests.yaml", edit=explicit) == {"default/best-effort": "node-a"}


def test_image_locality_needs_the_image_on_some_node() -> None:
    other = ("image: registry.example/trainer,", "image: registry.example/other,")
    assert bindings("image-locality.yaml", edit=other) == {"ml/train": "node-a"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"resources": [{"name": "cpu", "weight": 2}]},
            "args.resources[0].weight: must be 1, got 2",
        ),
        (
            {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
            "args.resources[1].name: 'cpu' is listed twice",
        ),
        ({"resources": []}, "args.resources: must name at least one resource"),
        ({"resource": []}, "args.resource: unknown argument (known: resources)"),
    ],
)
def test_balanced_allocation_args_are_validated(args: dict[str, object], message: str) -> None:
    raw = {
        "profiles": [{"pluginConfig": [{"name": "NodeResourcesBalancedAllocation", "args": args}]}]
    }
    with pytest.raises(ConfigError) as err:
        parse_config(raw, "cfg.yaml")
    assert f"cfg.yaml: profiles[0].pluginConfig[0].{message}" in str(err.value)


def test_balanced_allocation_resources_are_configurable() -> None:
    # Counting only cpu, both nodes are at the same cpu fraction: the balance no longer
    # tells them apart and the first name wins.
    only_cpu = parse_config(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesBalancedAllocation",
                            "args": {"resources": [{"name": "cpu", "weight": 1}]},
                        }
                    ]
                }
            ]
        }
    )
    assert bindings("balanced-allocation.yaml", only_cpu) == {"default/new": "node-a"}


def added_affinity(affinity: object) -> SchedulerConfig:
    args = {"addedAffinity": affinity}
    return parse_config({"profiles": [{"pluginConfig": [{"name": "NodeAffinity", "args": args}]}]})


def test_added_affinity_is_required_and_preferred_for_every_pod() -> None:
    zone = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    preferred = added_affinity(
        {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": zone}]}
    )
    # likes-c prefers a zone no node is in: the added preference alone takes it to zone b.
    assert bindings("node-affinity-preferred.yaml", preferred)["default/likes-c"] == "node-b"
    zone_a = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    required = added_affinity(
        {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone_a]}}
    )
    # likes-b prefers zone b, but the profile only allows zone a.
    assert bindings("node-affinity-preferred.yaml", required) == {
        "default/likes-b": "node-a",
        "default/likes-c": "node-a",
    }


def test_added_affinity_that_no_node_matches_says_so() -> None:
    nowhere = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}
    config = added_affinity(
        {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [nowhere]}}
    )
    text = (SCORES / "node-affinity-preferred.yaml").read_text()
    result = run(load_text(text, "x"), config, NOW).to_json()
    assert result["unschedulable"][0]["message"].startswith(
        "0/2 nodes are available: 2 node(s) didn't match scheduler-enforced node affinity."
    )


@pytest.mark.parametrize(
    ("affinity", "message"),
    [
        ("zone-a", "args.addedAffinity: must be of type dict, got 'zone-a'"),
        (
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]},
            "args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
            "must be between 1 and 100, got 0",
        ),
    ],
)
def test_added_affinity_errors_name_the_field(affinity: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        added_affinity(affinity)
    assert f"profiles[0].pluginConfig[0].{message}" in str(err.value)


def test_normalisation_is_against_the_feasible_maximum() -> None:
    import numpy as np

    from batchsched.framework.interface import normalize_by_max

    raw = np.array([0, 3, 6, 9], dtype=np.int64)
    feasible = np.array([True, True, True, False])
    assert normalize_by_max(raw, feasible).tolist() == [0, 50, 100, 150]  # 150: infeasible
    assert normalize_by_max(raw, feasible, reverse=True).tolist() == [100, 50, 0, -50]
    nothing = np.array([True, False, False, False])
    assert normalize_by_max(raw, nothing).tolist() == [0, 0, 0, 0]
    assert normalize_by_max(raw, nothing, reverse=True).tolist() == [100, 100, 100, 100]
