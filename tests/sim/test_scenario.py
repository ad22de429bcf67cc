"""Scenario files: clusters, work sources, variants, and errors that name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.sim.fields import ScenarioError
from batchsched.sim.scenario import load_scenario
from batchsched.sim.workload import GPU, parse_duration

CLASSES = [
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "low"},
        "value": 8000,
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 9000,
    },
]


def base() -> dict[str, Any]:
    return {
        "name": "s",
        "start": "2026-11-22T00:00:00Z",
        "cluster": {
            "pools": [
                {
                    "name": "gpu",
                    "count": 3,
                    "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                    "labels": {"accelerator": "a100"},
                    "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                }
            ]
        },
        "priorityClasses": CLASSES,
        "work": {
            "jobs": [
                {
                    "name": "one",
                    "submit": "5m",
                    "requests": {"nvidia.com/gpu": 8},
                    "duration": "1h",
                    "class": "high",
                    "pods": 2,
                    "gang": True,
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                }
            ],
            "generators": [
                {
                    "name": "gen",
                    "arrivalsPerHour": 10,
                    "to": "10h",
                    "class": {"choice": {"low": 3, "high": 1}},
                    "requests": {"nvidia.com/gpu": {"choice": [1, 2, 4]}, "cpu": "4"},
                    "duration": {"lognormal": {"median": "30m", "sigma": 0.5}},
                    "pods": {"uniform": [1, 3]},
                    "checkpointInterval": "10m",
                }
            ],
        },
    }


def write(tmp_path: Path, scenario: dict[str, Any]) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_pools_explicit_jobs_and_generators(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, base()))
    assert [n.name for n in scenario.nodes] == ["gpu-000", "gpu-001", "gpu-002"]
    node = scenario.nodes[0]
    assert node.allocatable[GPU] == 8 and node.allocatable["pods"] == 110
    assert node.labels == {"accelerator": "a100"} and node.taints[0].key == "gpu"
    jobs = scenario.jobs(seed=1)
    one = next(j for j in jobs if j.name == "one")
    assert (one.submit, one.work, one.pods, one.min_member) == (300, 3600, 2, 2)
    assert one.tolerations[0].operator == "Exists"
    generated = [j for j in jobs if j.name.startswith("gen-")]
    assert 50 <= len(generated) <= 150  # ~100 Poisson arrivals in 10 h
    assert all(j.submit < 36000 and j.checkpoint_interval == 600 for j in generated)
    assert {j.priority_class for j in generated} == {"low", "high"}
    assert {j.requests[GPU] for j in generated} == {1, 2, 4}
    assert {j.pods for j in generated} <= {1, 2, 3}
    assert jobs == sorted(jobs, key=lambda j: (j.submit, j.namespace, j.name))


def test_same_seed_same_workload_other_seed_other_workload(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, base()))
    assert scenario.jobs(3) == scenario.jobs(3)
    assert scenario.jobs(3) != scenario.jobs(4)


def test_variants_rename_classes_and_default_to_one_unnamed(tmp_path: Path) -> None:
    raw = base()
    assert [v.name for v in load_scenario(write(tmp_path, raw)).variants] == [""]
    raw["variants"] = [{"name": "a"}, {"name": "b", "classes": {"low": "high"}}]
    scenario = load_scenario(write(tmp_path, raw))
    _, b = scenario.variants
    assert b.classes == {"low": "high"}
    renamed = [j.with_class(b.classes) for j in scenario.jobs(1)]
    assert {j.priority_class for j in renamed} == {"high"}
    was_low = [j for j in renamed if j.workload_class]
    assert was_low and {j.workload_class for j in was_low} == {"low"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.update(colour="red"), r"colour: unknown field"),
        (
            lambda s: s["work"]["jobs"][0].update(duration="soon"),
            r"work.jobs\[0\].duration: 'soon' is not a duration",
        ),
        (lambda s: s["work"]["jobs"][0].pop("requests"), r"work.jobs\[0\].requests: is required"),
        (
            lambda s: s["work"]["jobs"][0].update(requests={"cpu": "lots"}),
            r"work.jobs\[0\].requests.cpu: 'lots' is not a quantity",
        ),
        (
            lambda s: s["work"]["jobs"][0].update(tolerations=[{"operator": "Equal"}]),
            r"work.jobs\[0\].tolerations\[0\].operator: must be Exists",
        ),
        (lambda s: s["work"]["generators"][0].pop("to"), r"work.generators\[0\].to: give `to`"),
        (
            lambda s: s["work"]["generators"][0].update(arrivalsPerHour=0),
            r"arrivalsPerHour: must be a positive number",
        ),
        (
            lambda s: s["work"]["generators"][0].update(duration={"normal": 3}),
            r"duration: must be a value or one of",
        ),
        (
            lambda s: s["work"]["generators"][0].update(duration={"uniform": ["2h", "1h"]}),
            r"uniform: high must be at least low",
        ),
        (
            lambda s: s["work"]["generators"][0].update(**{"class": {"uniform": [1, 2]}}),
            r"class: uniform needs numbers",
        ),
        (
            lambda s: s["cluster"]["pools"][0].update(count=0),
            r"cluster.pools\[0\].count: must be between 1 and 100000",
        ),
        (
            lambda s: s["cluster"]["pools"][0].update(taints=[{"key": "a", "effect": "Never"}]),
            r"cluster.pools\[0\].spec.taints\[0\].effect",
        ),
        (lambda s: s.pop("cluster"), r"cluster: has no nodes"),
        (lambda s: s.pop("work"), r"work: is required"),
        (
            lambda s: s["work"].update(trace={"format": "slurm"}),
            r"work.trace.format: 'slurm' is not one of openb, philly",
        ),
        (
            lambda s: s.update(variants=[{"name": "a"}, {"name": "a"}]),
            r"variants: names must be unique",
        ),
        (
            lambda s: s.update(
                priorityClasses=[{"kind": "PriorityClass", "metadata": {"name": "x"}}]
            ),
            r"priorityClasses\[0\]: .*value: is required",
        ),
    ],
)
def test_bad_scenarios_name_the_field(tmp_path: Path, change: Any, message: str) -> None:
    raw = base()
    change(raw)
    with pytest.raises(ScenarioError, match=message):
        load_scenario(write(tmp_path, raw))


def test_a_job_naming_an_unknown_class_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    raw = base()
    raw["work"]["jobs"][0]["class"] = "urgent"
    scenario = load_scenario(write(tmp_path, raw))
    with pytest.raises(ScenarioError, match=r"job one: priority class 'urgent' .*\(high, low\)"):
        scenario.jobs(1)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), (45, 45), ("10m", 600), ("1h30m", 5400), ("2d", 172800), ("1.5h", 5400)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "-5", "5x", "h", True])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_generator_with_a_count_stops_after_that_many_jobs(tmp_path: Path) -> None:
    raw = base()
    gen = raw["work"]["generators"][0]
    gen.pop("to")
    gen.update(count=7, **{"from": "1h"})
    jobs = [j for j in load_scenario(write(tmp_path, raw)).jobs(1) if j.name.startswith("gen-")]
    assert [j.name for j in jobs] == [f"gen-{i:05d}" for i in range(7)]
    assert all(j.submit > 3600 for j in jobs)


def test_job_templates_carry_labels_affinity_and_spread(tmp_path: Path) -> None:
    raw = base()
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "ps"}}, "topologyKey": "host"}
            ]
        }
    }
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "ps"}},
        }
    ]
    raw["work"]["jobs"][0].update(labels={"app": "ps"}, affinity=anti)
    raw["work"]["generators"][0]["topologySpreadConstraints"] = spread
    jobs = load_scenario(write(tmp_path, raw)).jobs(seed=1)
    one = next(j for j in jobs if j.name == "one")
    assert one.labels == {"app": "ps"}
    assert one.pod_affinity is not None and one.pod_affinity.required_anti[0].topology_key == "host"
    generated = next(j for j in jobs if j.name.startswith("gen-"))
    assert generated.spread_constraints[0].topology_key == "zone"
    raw["work"]["jobs"][0]["topologySpreadConstraints"] = [{**spread[0], "maxSkew": 0}]
    with pytest.raises(
        ScenarioError, match=r"work.jobs\[0\].topologySpreadConstraints\[0\].maxSkew"
    ):
        load_scenario(write(tmp_path, raw))


def test_anti_affinity_jobs_spread_in_the_simulator() -> None:
    from batchsched.objects.records import AffinityTerm, PodAffinity, Selector
    from tests.sim.simkit import gpu_node, job, simulation

    term = AffinityTerm(Selector((("app", "ps"),)), "kubernetes.io/hostname")
    nodes = []
    for i in range(3):
        n = gpu_node(f"n{i}")
        n.labels["kubernetes.io/hostname"] = n.name
        nodes.append(n)
    jobs = [
        job(f"ps{i}", gpus=1, labels={"app": "ps"}, pod_affinity=PodAffinity(required_anti=(term,)))
        for i in range(3)
    ]
    sim = simulation(nodes, jobs, until=10.0)
    sim.run()
    placed = {p.node_name for p in sim.state.pods.by_key.values() if p.node_name}
    assert placed == {"n0", "n1", "n2"}
