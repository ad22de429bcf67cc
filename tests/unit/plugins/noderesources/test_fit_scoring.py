from typing import Any

import pytest
import yaml

from batchsched.config import SchedulerConfig, default_config, load_config, parse_config
from batchsched.plugins.args import ConfigError
from batchsched.plugins.noderesources.fit import NodeResourcesFit
from tests.builders import node, pod
from tests.conftest import schedule
from tests.paths import ROOT


def most_allocated(resources: dict[str, int]) -> Any:
    weights = [{"name": k, "weight": v} for k, v in resources.items()]
    return parse_config(
        {
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {
                                "scoringStrategy": {"type": "MostAllocated", "resources": weights}
                            },
                        }
                    ],
                }
            ]
        }
    )


SCORING = ROOT / "examples" / "scoring"
# kube-scheduler's default scoring, one pluginConfig entry away from batchsched's.
LEAST_ALLOCATED = load_config(SCORING / "least-allocated.yaml")
# batchsched's default scoring, written out.
GPU_PACKING = load_config(SCORING / "gpu-packing.yaml")


def placed(*manifests: dict[str, Any], config: Any = None) -> dict[str, str]:
    return {b.pod: b.node for b in schedule(*manifests, config=config).bindings}


def test_least_allocated_spreads() -> None:
    nodes = [node("a", cpu="8"), node("b", cpu="8")]
    busy = pod("busy", node_name="a", cpu="4")
    assert placed(*nodes, busy, pod("p", cpu="1"), config=LEAST_ALLOCATED) == {"default/p": "b"}


def gpu_pod(name: str, gpus: str) -> dict[str, Any]:
    return pod(name, cpu="8", extra_requests={"nvidia.com/gpu": gpus})


def test_gpu_packing_leaves_whole_nodes_free() -> None:
    nodes = [node("a", cpu="64", nvidia_com__gpu="8"), node("b", cpu="64", nvidia_com__gpu="8")]
    jobs = [gpu_pod("t1", "4"), gpu_pod("t2", "4"), gpu_pod("big", "8")]
    jobs[2]["metadata"]["creationTimestamp"] = "2026-11-22T09:30:00Z"  # after the trainers
    packed = placed(*nodes, *jobs, config=GPU_PACKING)
    assert packed["default/t1"] == packed["default/t2"]
    assert packed["default/big"] != packed["default/t1"]
    # LeastAllocated spreads the trainers, and the 8-GPU job finds no whole node.
    spread = placed(*nodes, *jobs, config=LEAST_ALLOCATED)
    assert spread["default/t1"] != spread["default/t2"] and "default/big" not in spread


def fit_of(config: SchedulerConfig) -> NodeResourcesFit:
    plugin = config.profiles[0].instantiate()["NodeResourcesFit"]
    assert isinstance(plugin, NodeResourcesFit)
    return plugin


def test_the_default_packs_as_the_gpu_packing_example_writes_it() -> None:
    default, written = fit_of(default_config()), fit_of(GPU_PACKING)
    assert (default.strategy, default.resources) == ("MostAllocated", written.resources)
    # The example's whole-node job runs with the default and waits with LeastAllocated.
    whole = yaml.safe_load((SCORING / "whole-nodes.yaml").read_text())["items"]
    assert placed(*whole)["ml/big-job"] != placed(*whole)["ml/trainer-1"]
    assert placed(*whole) == placed(*whole, config=GPU_PACKING)
    assert "ml/big-job" not in placed(*whole, config=LEAST_ALLOCATED)


def test_other_fit_args_keep_the_packing_and_a_strategy_replaces_it() -> None:
    def with_args(args: dict[str, Any]) -> NodeResourcesFit:
        config = {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": args}]}]}
        return fit_of(parse_config(config))

    assert with_args({"ignoredResources": ["example.com/x"]}).strategy == "MostAllocated"
    # As upstream, a strategy without resources scores cpu and memory.
    most = with_args({"scoringStrategy": {"type": "MostAllocated"}})
    assert [r.name for r in most.resources] == ["cpu", "memory"]
    assert with_args({"scoringStrategy": {"type": "LeastAllocated"}}).strategy == "LeastAllocated"


def test_gpu_packing_prefers_nodes_whose_gpus_are_in_use_over_cpu() -> None:
    # a has more cpu in use, b more GPUs: GPUs weigh 10, so the pod joins b.
    nodes = [node("a", cpu="8", nvidia_com__gpu="8"), node("b", cpu="8", nvidia_com__gpu="8")]
    cpu_heavy = pod("x", node_name="a", cpu="6", extra_requests={"nvidia.com/gpu": "1"})
    gpu_heavy = pod("y", node_name="b", cpu="1", extra_requests={"nvidia.com/gpu": "6"})
    job = pod("p", cpu="1", extra_requests={"nvidia.com/gpu": "1"})
    assert placed(*nodes, cpu_heavy, gpu_heavy, job, config=GPU_PACKING) == {"default/p": "b"}


def test_most_allocated_packs() -> None:
    nodes = [node("a", cpu="8"), node("b", cpu="8")]
    busy = pod("busy", node_name="b", cpu="4")
    config = most_allocated({"cpu": 1, "memory": 1})
    assert placed(*nodes, busy, pod("p", cpu="1"), config=config) == {"default/p": "b"}


def test_resource_weights_decide() -> None:
    # a is fuller on cpu, b on gpus: weighting gpus up moves the packed pod to b.
    nodes = [node("a", cpu="8", nvidia_com__gpu="8"), node("b", cpu="8", nvidia_com__gpu="8")]
    cpu_heavy = pod("x", node_name="a", cpu="6", extra_requests={"nvidia.com/gpu": "1"})
    gpu_heavy = pod("y", node_name="b", cpu="1", extra_requests={"nvidia.com/gpu": "6"})
    job = pod("p", cpu="1", extra_requests={"nvidia.com/gpu": "1"})
    assert placed(*nodes, cpu_heavy, gpu_heavy, job, config=most_allocated({"cpu": 1})) == {
        "default/p": "a"
    }
    assert placed(
        *nodes, cpu_heavy, gpu_heavy, job, config=most_allocated({"cpu": 1, "nvidia.com/gpu": 10})
    ) == {"default/p": "b"}


def test_ties_break_on_node_name_whatever_the_input_order() -> None:
    nodes = [node("c"), node("a"), node("b")]
    assert placed(*nodes, pod("p")) == {"default/p": "a"}


def test_nominated_node_is_preferred_when_it_fits() -> None:
    nominated = pod("p")
    nominated["status"]["nominatedNodeName"] = "b"
    assert placed(node("a", cpu="64"), node("b"), nominated) == {"default/p": "b"}


def test_many_identical_pods_spread_evenly() -> None:
    nodes = [node(f"n{i}", cpu="4") for i in range(4)]
    pods = [pod(f"p{i}", cpu="1", memory="1Gi") for i in range(8)]
    counts: dict[str, int] = {}
    for n in placed(*nodes, *pods, config=LEAST_ALLOCATED).values():
        counts[n] = counts.get(n, 0) + 1
    assert counts == {"n0": 2, "n1": 2, "n2": 2, "n3": 2}


@pytest.mark.parametrize(
    ("strategy", "match"),
    [
        ({"type": "Balanced"}, "'Balanced' is not one of LeastAllocated, MostAllocated"),
        ({"resources": [{"name": "cpu", "weight": 0}]}, "weight: must be between 1 and 100, got 0"),
        ({"resources": []}, "must name at least one resource"),
        ({"shape": 1}, "unknown argument"),
    ],
)
def test_bad_scoring_args_say_what_is_allowed(strategy: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_config(
            {
                "profiles": [
                    {
                        "pluginConfig": [
                            {"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}
                        ]
                    }
                ]
            }
        )


@pytest.mark.parametrize("key", ["ignoredResources", "ignoredResourceGroups"])
@pytest.mark.parametrize("item", [7, True, ["example.com"], {"name": "example.com"}])
def test_ignored_resources_are_strings(key: str, item: object) -> None:
    """kube-scheduler decodes both into a Go []string: an item that is not a string is an
    error naming it, never its Python text (which would ignore nothing)."""
    config = {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {key: [item]}}]}]}
    with pytest.raises(ConfigError, match=rf"pluginConfig\[0\].args.{key}\[0\]: must be a string"):
        parse_config(config)
