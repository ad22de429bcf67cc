"""WaitForFirstConsumer volumes in the simulator: a job's pods get their own claims (generic
ephemeral volumes), bound at scheduling time to the scenario's PVs; a PV is free again once
the pod that had it is gone."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.config import default_config
from batchsched.sim.engine import Simulation
from batchsched.sim.fields import ScenarioError
from batchsched.sim.report import write_jobs_csv
from batchsched.sim.scenario import load_scenario


def _node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}},
    }


def _scratch(size: str, storage_class: str = "local") -> list[dict[str, Any]]:
    spec = {
        "storageClassName": storage_class,
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    return [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}]


def _scenario(tmp_path: Path, **job_extra: Any) -> Path:
    term = {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]
    }
    raw = {
        "name": "volumes",
        "start": "2026-11-22T00:00:00Z",
        "cluster": {
            "nodes": [_node("n1"), _node("n2")],
            "storage": [
                {
                    "kind": "StorageClass",
                    "metadata": {"name": "local"},
                    "provisioner": "kubernetes.io/no-provisioner",
                    "volumeBindingMode": "WaitForFirstConsumer",
                },
                {
                    "kind": "PersistentVolume",
                    "metadata": {"name": "nvme-n2"},
                    "spec": {
                        "capacity": {"storage": "100Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "local",
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
                    },
                },
            ],
        },
        "work": {
            "jobs": [
                {"name": "a", "requests": {"cpu": "1"}, "duration": "1h", **job_extra},
                {"name": "b", "requests": {"cpu": "1"}, "duration": "1h", **job_extra},
                {"name": "plain", "requests": {"cpu": "1"}, "duration": "1h"},
            ]
        },
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _simulation(path: Path) -> Simulation:
    scenario = load_scenario(path)
    return Simulation(
        "v",
        scenario.nodes,
        scenario.priority_classes,
        scenario.jobs(0),
        default_config(),
        scenario.start,
        storage=scenario.storage,
    )


def test_jobs_follow_the_local_volume_and_take_turns_on_it(tmp_path: Path) -> None:
    sim = _simulation(_scenario(tmp_path, volumes=_scratch("50Gi")))
    result = sim.run()
    jobs = {j.name.removeprefix("default/"): j for j in result.jobs}
    assert jobs["a"].start == 0 and jobs["plain"].start == 0
    assert jobs["b"].start == 3600  # the one PV is free again once a's pod is gone
    assert jobs["b"].end == 7200
    assert sim.state.volumes.claims == {}  # every pod's claims went with it
    # The report says which PV each job's claim got, as one-shot's volumeBindings does.
    assert jobs["a"].volume_bindings == {"default/a-0-scratch": "nvme-n2"}
    assert jobs["b"].volume_bindings == {"default/b-0-scratch": "nvme-n2"}
    assert jobs["plain"].volume_bindings == {}
    assert sim.state.volumes.volumes["nvme-n2"].phase == "Available"


def test_a_claim_larger_than_every_volume_never_runs(tmp_path: Path) -> None:
    result = _simulation(_scenario(tmp_path, volumes=_scratch("1Ti"))).run()
    jobs = {j.name.removeprefix("default/"): j for j in result.jobs}
    assert jobs["a"].start is None and jobs["b"].start is None
    assert jobs["plain"].end == 3600


@pytest.mark.parametrize(
    ("volumes", "message"),
    [
        (
            _scratch("1Gi", "fast"),
            "work.jobs\\[0\\].volumes\\[0\\].ephemeral.volumeClaimTemplate.spec.storageClassName: "
            "fast: must name a WaitForFirstConsumer StorageClass of cluster.storage",
        ),
        ([{"name": "scratch"}], "ephemeral.volumeClaimTemplate.spec: is required"),
    ],
)
def test_bad_job_volumes_name_the_field(tmp_path: Path, volumes: Any, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        load_scenario(_scenario(tmp_path, volumes=volumes))


def test_jobs_csv_lists_each_jobs_volume_bindings(tmp_path: Path) -> None:
    result = _simulation(_scenario(tmp_path, volumes=_scratch("50Gi"))).run()
    write_jobs_csv(tmp_path / "jobs.csv", [result])
    with (tmp_path / "jobs.csv").open(newline="") as handle:
        rows = {r["job"].removeprefix("default/"): r for r in csv.DictReader(handle)}
    assert rows["a"]["volume_bindings"] == "default/a-0-scratch=nvme-n2"
    assert rows["plain"]["volume_bindings"] == ""
