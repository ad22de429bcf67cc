"""DRA in the simulator: a pool's nodes carry devices, a job's pods each get a claim from the
job's template, allocated by DynamicResources and deleted with the pod (its devices free
again); gangs hold devices all or none; jobs.csv lists the devices; the reader names bad
fields."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.config import default_config
from batchsched.sim.engine import Simulation
from batchsched.sim.fields import ScenarioError
from batchsched.sim.report import write_jobs_csv
from batchsched.sim.scenario import load_scenario

EXAMPLE = Path(__file__).parents[2] / "examples" / "dra" / "mig-policy.yaml"
DRIVER = "gpu.example.com"


def _class(name: str, profile: str) -> dict[str, Any]:
    expression = f"device.attributes['{DRIVER}'].profile == '{profile}'"
    return {
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _claim(device_class: str, count: int = 1, **more: Any) -> list[dict[str, Any]]:
    request = {"name": "r", "exactly": {"deviceClassName": device_class, "count": count}}
    return [{"name": "dev", "spec": {"devices": {"requests": [request], **more}}}]


def _scenario(tmp_path: Path, jobs: list[dict[str, Any]], **pool: Any) -> Path:
    devices = pool.pop(
        "devices",
        [
            {"driver": DRIVER, "name": "mig", "count": 2, "attributes": {"profile": "1g"}},
            {"driver": DRIVER, "name": "gpu", "count": 1, "attributes": {"profile": "full"}},
        ],
    )
    raw = {
        "name": "dra",
        "start": "2026-11-22T00:00:00Z",
        "cluster": {
            "deviceClasses": [_class("mig", "1g"), _class("full", "full")],
            "pools": [
                {
                    "name": "n",
                    "count": 2,
                    "allocatable": {"cpu": "64"},
                    "devices": devices,
                    **pool,
                }
            ],
        },
        "work": {"jobs": jobs},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _job(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "requests": {"cpu": "1"}, "duration": "1h", **extra}


def _simulation(path: Path) -> Simulation:
    scenario = load_scenario(path)
    return Simulation(
        "d",
        scenario.nodes,
        scenario.priority_classes,
        scenario.jobs(0),
        default_config(),
        scenario.start,
        devices=scenario.devices,
    )


def test_pods_get_devices_that_are_free_again_once_they_are_gone(tmp_path: Path) -> None:
    # Two nodes with one whole GPU each: three single-GPU jobs take turns.
    jobs = [_job(name, resourceClaims=_claim("full")) for name in ("a", "b", "c")]
    sim = _simulation(_scenario(tmp_path, jobs))
    result = sim.run()
    runs = {j.name.removeprefix("default/"): j for j in result.jobs}
    assert (runs["a"].start, runs["b"].start, runs["c"].start) == (0, 0, 3600)
    assert runs["c"].end == 7200
    held = {d for j in runs.values() for devices in j.device_allocations.values() for d in devices}
    assert held == {f"{DRIVER}/n-000/gpu-0", f"{DRIVER}/n-001/gpu-0"}
    assert runs["a"].device_allocations == {"default/a-0-dev": (f"{DRIVER}/n-000/gpu-0",)}
    assert sim.state.devices.claims == {}  # every pod's claim went with it
    assert sim.state.devices.in_use() == set()


def test_a_gang_that_needs_more_devices_than_exist_holds_none(tmp_path: Path) -> None:
    # Four MIG slices in all: a gang of three pods with two each never runs, and the single
    # pods after it get slices (a tentative allocation left behind would starve them).
    jobs = [
        _job("gang", pods=3, gang=True, resourceClaims=_claim("mig", 2)),
        _job("one", submit="1m", resourceClaims=_claim("mig", 2)),
        _job("two", submit="1m", resourceClaims=_claim("mig", 2)),
    ]
    result = _simulation(_scenario(tmp_path, jobs)).run()
    runs = {j.name.removeprefix("default/"): j for j in result.jobs}
    assert runs["gang"].start is None and runs["gang"].device_allocations == {}
    assert runs["one"].start == 60 and runs["two"].start == 60


def test_match_attribute_keeps_a_pods_devices_on_one_island(tmp_path: Path) -> None:
    devices = [
        {"driver": DRIVER, "name": "a", "count": 1, "attributes": {"profile": "full", "link": 0}},
        {"driver": DRIVER, "name": "b", "count": 2, "attributes": {"profile": "full", "link": 1}},
    ]
    claim = _claim("full", 2, constraints=[{"matchAttribute": f"{DRIVER}/link"}])
    result = _simulation(
        _scenario(tmp_path, [_job("j", resourceClaims=claim)], devices=devices)
    ).run()
    (job,) = result.jobs
    assert job.device_allocations == {
        "default/j-0-dev": (f"{DRIVER}/n-000/b-0", f"{DRIVER}/n-000/b-1")
    }


def test_jobs_csv_lists_each_jobs_devices(tmp_path: Path) -> None:
    jobs = [_job("a", resourceClaims=_claim("mig", 2)), _job("plain")]
    result = _simulation(_scenario(tmp_path, jobs)).run()
    write_jobs_csv(tmp_path / "jobs.csv", [result])
    with (tmp_path / "jobs.csv").open(newline="") as handle:
        rows = {r["job"].removeprefix("default/"): r for r in csv.DictReader(handle)}
    assert rows["a"]["device_allocations"] == (
        f"default/a-0-dev={DRIVER}/n-000/mig-0 {DRIVER}/n-000/mig-1"
    )
    assert rows["plain"]["device_allocations"] == ""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"jobs": [_job("a", resourceClaims=_claim("nope"))]},
            r"work.jobs\[0\].resourceClaims\[0\].spec.devices.requests: request r: "
            r"deviceClassName 'nope' must name a DeviceClass of cluster.deviceClasses "
            r"\(full, mig\)",
        ),
        (
            {"jobs": [_job("a", resourceClaims=[{"name": "dev"}])]},
            r"resourceClaims\[0\].spec: is required",
        ),
        (
            {"devices": [{"driver": DRIVER, "name": "g", "attributes": {"x": [1]}}]},
            r"cluster.pools\[0\].devices\[0\].attributes.x: must be an int, a bool or a string",
        ),
        (
            {"devices": [{"driver": DRIVER, "name": "g", "capacity": {"memory": "lots"}}]},
            r"cluster.pools\[0\].devices\[0\].capacity.memory:",
        ),
        (
            {"devices": [{"driver": DRIVER, "name": "g", "size": 1}]},
            r"devices\[0\].size: unknown field \(allowed: driver, name, count, attributes, "
            r"capacity\)",
        ),
        (
            {"devices": [{"driver": DRIVER, "name": "g"}, {"driver": DRIVER, "name": "g"}]},
            r"devices\[1\].name: g: another entry of the pool has it for driver",
        ),
        ({"devices": [{"name": "g"}]}, r"devices\[0\].driver: is required"),
    ],
)
def test_bad_devices_and_claims_name_the_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    jobs = change.pop("jobs", [_job("a")])
    with pytest.raises(ScenarioError, match=message):
        load_scenario(_scenario(tmp_path, jobs, **change))


def test_the_mig_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", str(EXAMPLE), "--until", "3h", "--report", str(tmp_path)])
    assert code == 0
    with (tmp_path / "jobs.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    slices = [r for r in rows if r["job"].startswith("default/infer") and r["start_s"]]
    assert slices and all("/mig-1g-" in r["device_allocations"] for r in slices)
    trains = [r for r in rows if r["job"].startswith("default/train") and r["start_s"]]
    assert trains
    for row in trains:
        for claim in row["device_allocations"].split(";"):
            devices = claim.split("=")[1].split()
            # Two whole GPUs of one node and one NVLink island each.
            assert len(devices) == 2 and len({d.rsplit("-", 1)[0] for d in devices}) == 1


def test_a_gang_preempts_the_pods_holding_its_devices(tmp_path: Path) -> None:
    # Both whole GPUs are held by low-priority jobs; a high-priority gang of two pods, one GPU
    # each, evicts them (their claims' devices come free once they are gone) and runs.
    jobs = [
        _job("low-a", resourceClaims=_claim("full"), **{"class": "low"}),
        _job("low-b", resourceClaims=_claim("full"), **{"class": "low"}),
        _job(
            "gang",
            submit="10m",
            pods=2,
            gang=True,
            resourceClaims=_claim("full"),
            **{"class": "high", "terminationGracePeriodSeconds": 30},
        ),
    ]
    path = _scenario(tmp_path, jobs)
    raw = yaml.safe_load(path.read_text())
    raw["priorityClasses"] = [
        {"kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
        {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    ]
    path.write_text(yaml.safe_dump(raw))
    sim = _simulation(path)
    runs = {j.name.removeprefix("default/"): j for j in sim.run().jobs}
    assert runs["low-a"].preemptions == 1 and runs["low-b"].preemptions == 1
    assert runs["gang"].start == 630  # submitted at 10m, the victims gone 30 s later
    assert len({d for ds in runs["gang"].device_allocations.values() for d in ds}) == 2
