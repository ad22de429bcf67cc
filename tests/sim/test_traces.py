"""Trace importers on tiny files in the real formats, written by the tests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.sim.fields import Fields, ScenarioError
from batchsched.sim.scenario import load_scenario
from batchsched.sim.traces import TRACE_FORMATS
from batchsched.sim.workload import GPU, GPU_MILLI

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,12,35412.0,6214e9
2017-10-09 08:00:00,100.0,32,3200.0,6214e9
2017-10-09 08:00:00,10.0,9,90.0,aaaaaa
"""

HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
OPENB_PODS = (
    HEADER
    + """openb-pod-0000,12000,16384,1,1000,,LS,Running,0,1000,10
openb-pod-0001,6000,12288,1,460,,BE,Running,50,900,60
openb-pod-0002,4000,8192,0,0,,Burstable,Succeeded,70,200,70
openb-pod-0003,4000,8192,2,1000,,BE,Pending,80,300,
"""
)

OPENB_NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,64000,262144,2,P100
openb-node-0001,32000,131072,0,
"""


def load(tmp_path: Path, fmt: str, **options: object) -> tuple[list, list]:  # type: ignore[type-arg]
    scenario = tmp_path / "scenario.yaml"
    trace_format = TRACE_FORMATS[fmt]
    raw = {"format": fmt, **options}
    trace = trace_format.load(
        Fields(scenario, raw, "work.trace", ("format", *trace_format.options))
    )
    return trace.jobs, trace.nodes


def test_philly_jobs_in_time_order_with_gangs_for_multi_node_jobs(tmp_path: Path) -> None:
    (tmp_path / "philly.csv").write_text(PHILLY)
    jobs, nodes = load(tmp_path, "philly", path="philly.csv", priorityClass="low")
    assert nodes == []
    by_gpus = {j.pods * j.requests[GPU]: j for j in jobs}
    assert [j.submit for j in jobs] == [0.0, 48 * 60 + 52, 6417.0, 6417.0]
    one = by_gpus[1]
    assert (one.pods, one.min_member, one.work, one.priority_class) == (1, None, 66.0, "low")
    assert (by_gpus[12].pods, by_gpus[12].requests[GPU], by_gpus[12].min_member) == (2, 6, 2)
    assert (by_gpus[32].pods, by_gpus[32].requests[GPU], by_gpus[32].min_member) == (4, 8, 4)
    assert (by_gpus[9].pods, by_gpus[9].requests[GPU]) == (3, 3)
    assert jobs[0].name == "philly-00000" and jobs[0].work == 2951.0


def test_philly_gpus_per_node_and_limit(tmp_path: Path) -> None:
    (tmp_path / "philly.csv").write_text(PHILLY)
    jobs, _ = load(tmp_path, "philly", path="philly.csv", gpusPerNode=4, limit=2)
    assert len(jobs) == 2
    assert (jobs[0].pods, jobs[0].requests[GPU]) == (3, 4)  # 12 GPUs on 4-GPU nodes


def test_openb_maps_qos_to_classes_and_gpu_shares(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(OPENB_PODS)
    (tmp_path / "nodes.csv").write_text(OPENB_NODES)
    jobs, nodes = load(tmp_path, "openb", path="pods.csv", nodes="nodes.csv")
    assert [j.name for j in jobs] == ["openb-pod-0000", "openb-pod-0001", "openb-pod-0002"]
    whole, shared, cpu_only = jobs
    assert whole.priority_class == "high" and whole.work == 990 and whole.submit == 0
    assert whole.requests == {
        "cpu": 12000,
        "memory": 16384 * 2**20,
        "pods": 1,
        GPU_MILLI: 1000,
        GPU: 1,
    }
    assert shared.priority_class == "low" and shared.requests[GPU_MILLI] == 460
    assert GPU not in shared.requests
    assert cpu_only.priority_class == "medium" and GPU_MILLI not in cpu_only.requests
    gpu_node, cpu_node = nodes
    assert gpu_node.allocatable[GPU] == 2 and gpu_node.allocatable[GPU_MILLI] == 2000
    assert gpu_node.labels == {"gpu-model": "P100"}
    assert GPU not in cpu_node.allocatable and cpu_node.allocatable["cpu"] == 32000


def test_openb_qos_table_is_configurable(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(OPENB_PODS)
    table = {"LS": "prod", "BE": "batch", "Burstable": "batch", "Guaranteed": "prod"}
    jobs, _ = load(tmp_path, "openb", path="pods.csv", qosClasses=table)
    assert [j.priority_class for j in jobs] == ["prod", "batch", "batch"]


def test_openb_qos_without_a_class_is_an_error_naming_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(OPENB_PODS)
    with pytest.raises(ScenarioError, match=r"pods.csv: line 3: qos: 'BE' has no class"):
        load(tmp_path, "openb", path="pods.csv", qosClasses={"LS": "high"})


def test_missing_column_and_bad_number_are_named(tmp_path: Path) -> None:
    (tmp_path / "philly.csv").write_text("timestamp,duration\n2017-10-09 07:01:55,66.0\n")
    with pytest.raises(ScenarioError, match="missing column.*num_gpus"):
        load(tmp_path, "philly", path="philly.csv")
    (tmp_path / "philly.csv").write_text("timestamp,duration,num_gpus\n2017-10-09 07:01:55,x,1\n")
    with pytest.raises(ScenarioError, match="line 2: duration: 'x' is not a number"):
        load(tmp_path, "philly", path="philly.csv")


def test_missing_trace_file_and_unknown_option_are_named(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"work.trace.path: no such file"):
        load(tmp_path, "philly", path="absent.csv")
    with pytest.raises(ScenarioError, match=r"work.trace.gpus: unknown field"):
        load(tmp_path, "philly", path="absent.csv", gpus=8)


def philly_scenario(folder: Path, trace_path: str, **top: object) -> Path:
    scenario = {
        "name": "replay",
        **top,
        "cluster": {"pools": [{"name": "g", "count": 4, "allocatable": {"cpu": "64", GPU: "8"}}]},
        "priorityClasses": [{"kind": "PriorityClass", "metadata": {"name": "low"}, "value": 1}],
        "work": {"trace": {"format": "philly", "path": trace_path, "priorityClass": "low"}},
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_the_clock_starts_at_the_first_job_unless_start_says_otherwise(tmp_path: Path) -> None:
    (tmp_path / "philly.csv").write_text(PHILLY)
    scenario = load_scenario(philly_scenario(tmp_path, "philly.csv"))
    assert scenario.start == datetime(2017, 10, 9, 6, 13, 3, tzinfo=UTC)
    assert [j.submit for j in scenario.jobs(0)] == [0.0, 2932.0, 6417.0, 6417.0]
    # A later start replays from there: the jobs before it are left out, the rest shift.
    later = philly_scenario(tmp_path, "philly.csv", start="2017-10-09T07:00:00Z")
    scenario = load_scenario(later)
    assert scenario.start == datetime(2017, 10, 9, 7, tzinfo=UTC)
    assert [j.submit for j in scenario.jobs(0)] == [115.0, 3600.0, 3600.0]


def test_trace_paths_resolve_beside_the_scenario_then_env_then_traces_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario_dir, env_dir, flag_dir = (tmp_path / d for d in ("s", "env", "flag"))
    for folder in (scenario_dir, env_dir, flag_dir):
        folder.mkdir()
    path = philly_scenario(scenario_dir, "philly.csv")
    monkeypatch.delenv("BATCHSCHED_TRACES", raising=False)
    with pytest.raises(ScenarioError) as missing:
        load_scenario(path, flag_dir)
    message = str(missing.value)
    assert "work.trace.path: no such file; looked for" in message
    assert "philly.csv' (the scenario's folder)" in message
    assert "philly.csv' (--traces)" in message
    monkeypatch.setenv("BATCHSCHED_TRACES", str(env_dir))
    with pytest.raises(ScenarioError, match=r"philly.csv' \(BATCHSCHED_TRACES\)"):
        load_scenario(path)
    (flag_dir / "philly.csv").write_text(PHILLY)
    assert len(load_scenario(path, flag_dir).jobs(0)) == 4  # found with --traces
    (env_dir / "philly.csv").write_text(PHILLY.splitlines(keepends=True)[0] + PHILLY.split("\n")[1])
    assert len(load_scenario(path, flag_dir).jobs(0)) == 1  # the environment comes first
    (scenario_dir / "philly.csv").write_text(PHILLY)
    assert len(load_scenario(path, flag_dir).jobs(0)) == 4  # beside the scenario, first of all


def test_counts_are_finished_out_of_submitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "philly.csv").write_text(PHILLY)
    path = philly_scenario(tmp_path, "philly.csv")
    assert main(["simulate", str(path), "--until", "49m", "-o", "json"]) == 0
    jobs = orjson.loads(capsys.readouterr().out)["runs"][0]["jobs"]
    assert (jobs["total"], jobs["submitted"], jobs["finished"]) == (4, 2, 0)
    assert main(["simulate", str(path), "--until", "49m"]) == 0
    assert "0/2" in capsys.readouterr().out
