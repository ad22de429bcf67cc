"""Trace importers on tiny files in the real formats, written by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchsched.sim.fields import Fields, ScenarioError
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
    return trace_format.load(Fields(scenario, raw, "work.trace", ("format", *trace_format.options)))


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
