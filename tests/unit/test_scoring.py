from typing import Any

import pytest

from batchsched.config import parse_config
from batchsched.plugins.args import ConfigError
from tests.builders import node, pod
from tests.conftest import schedule


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


def placed(*manifests: dict[str, Any], config: Any = None) -> dict[str, str]:
    return {b.pod: b.node for b in schedule(*manifests, config=config).bindings}


def test_least_allocated_spreads() -> None:
    nodes = [node("a", cpu="8"), node("b", cpu="8")]
    busy = pod("busy", node_name="a", cpu="4")
    assert placed(*nodes, busy, pod("p", cpu="1")) == {"default/p": "b"}


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
    for n in placed(*nodes, *pods).values():
        counts[n] = counts.get(n, 0) + 1
    assert counts == {"n0": 2, "n1": 2, "n2": 2, "n3": 2}


@pytest.mark.parametrize(
    ("strategy", "match"),
    [
        ({"type": "Balanced"}, "'Balanced' is not one of LeastAllocated, MostAllocated"),
        ({"resources": [{"name": "cpu", "weight": 0}]}, "weight: must be 1..100"),
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
