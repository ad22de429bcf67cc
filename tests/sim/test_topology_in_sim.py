"""Topology in the simulator (docs/simulate.md#topology): generated rack and block labels, a gang
job's topology request, the domains it spans and the slowdown per extra domain."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from batchsched.objects.records import TopologyRequest
from batchsched.sim.fields import ScenarioError
from batchsched.sim.metrics import run_summary
from batchsched.sim.report import summary_rows
from batchsched.sim.scenario import load_scenario
from batchsched.sim.workload import JobTopology
from tests.sim.simkit import gpu_node, job, simulation
from tests.sim.test_scenario import base, write

RACK, BLOCK = "example.com/rack", "example.com/block"


def with_topology(pool: Any = None, job_topology: Any = None, gang: bool = True) -> dict[str, Any]:
    scenario = base()
    scenario["cluster"]["pools"][0]["count"] = 6
    if pool is not None:
        scenario["cluster"]["pools"][0]["topology"] = pool
    one = scenario["work"]["jobs"][0]
    one["gang"] = gang
    if job_topology is not None:
        one["topology"] = job_topology
    return scenario


def test_pools_get_rack_and_block_labels(tmp_path: Path) -> None:
    levels = [{"key": RACK, "size": 2}, {"key": BLOCK, "size": 2}]
    scenario = load_scenario(write(tmp_path, with_topology(levels)))
    pool = [n for n in scenario.nodes if n.name.startswith("gpu-")]
    assert [(n.labels[RACK], n.labels[BLOCK]) for n in pool] == [
        ("gpu-rack-00", "gpu-block-00"),
        ("gpu-rack-00", "gpu-block-00"),
        ("gpu-rack-01", "gpu-block-00"),
        ("gpu-rack-01", "gpu-block-00"),
        ("gpu-rack-02", "gpu-block-01"),
        ("gpu-rack-02", "gpu-block-01"),
    ]
    assert all(n.labels["accelerator"] == "a100" for n in pool)  # the pool's own labels stay


def test_a_job_asks_for_a_topology(tmp_path: Path) -> None:
    asked = {"preferred": [RACK, BLOCK], "slowdown": 1.3}
    scenario = load_scenario(write(tmp_path, with_topology(None, asked)))
    [one] = [j for j in scenario.jobs(0) if j.name == "one"]
    assert one.topology == JobTopology(TopologyRequest(preferred=(RACK, BLOCK)), RACK, 1.3)


@pytest.mark.parametrize(
    ("pool", "asked", "gang", "message"),
    [
        ([{"key": "bad key", "size": 2}], None, True, "cluster.pools[0].topology[0].key:"),
        ([{"key": RACK, "size": 0}], None, True, "cluster.pools[0].topology[0].size:"),
        ([{"key": RACK, "size": 2}, {"key": RACK, "size": 2}], None, True, "is a level already"),
        (None, {"required": RACK}, False, "work.jobs[0].topology: only a gang job"),
        (None, {"required": RACK, "key": RACK}, True, "give one of required, preferred and key"),
        (None, {"key": RACK, "slowdown": 0.5}, True, "work.jobs[0].topology.slowdown:"),
        (None, {"preferred": []}, True, "work.jobs[0].topology.preferred:"),
    ],
)
def test_bad_topology_names_the_field(
    tmp_path: Path, pool: Any, asked: Any, gang: bool, message: str
) -> None:
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_scenario(write(tmp_path, with_topology(pool, asked, gang))).jobs(0)


def racked(count: int, per_rack: int) -> list[Any]:
    nodes = [gpu_node(f"n{i}") for i in range(count)]
    for i, node in enumerate(nodes):
        node.labels = {RACK: f"rack-{i // per_rack}"}
    return nodes


def test_the_span_is_counted_and_slows_the_run() -> None:
    # One node per rack: a gang of 2 spans 2 racks and runs 1.5 times as long.
    spread = JobTopology(TopologyRequest(), RACK, 1.5)
    gang = job("g", pods=2, min_member=2, work=3600.0, topology=spread)
    result = simulation(racked(2, 1), [gang]).run()
    [record] = result.jobs
    assert record.domains == [2]
    assert (record.start, record.end) == (0.0, 5400.0)
    topology = run_summary(result)["cluster"]["topology"]
    assert (topology["starts_in_one_domain"], topology["starts"]) == (0, 1)
    head, rows, _, _ = summary_rows([result])
    assert rows[0][head.index("gang domains mean / max")] == "2.00 / 2"


def test_a_required_gang_keeps_to_one_rack_where_packing_would_split_it() -> None:
    # n0 (rack-0) is full: packed as any gang, the members take n1 and n2, two racks, and run
    # 1.5 times as long; required, they take rack-1 whole and run at full speed.
    required = JobTopology(TopologyRequest(required=RACK), RACK, 1.5)
    filler = job("filler", work=7200.0)
    gang = job("g", pods=2, min_member=2, work=3600.0, submit=1.0, topology=required)
    result = simulation(racked(4, 2), [filler, gang]).run()
    record = next(r for r in result.jobs if r.name.endswith("/g"))
    assert (record.domains, record.start, record.end) == ([1], 1.0, 3601.0)
    scattered = replace(gang, topology=replace(required, request=TopologyRequest()))
    again = simulation(racked(4, 2), [filler, scattered]).run()
    record = next(r for r in again.jobs if r.name.endswith("/g"))
    assert (record.domains, record.start, record.end) == ([2], 1.0, 5401.0)


def test_without_topology_nothing_is_counted() -> None:
    result = simulation(racked(2, 1), [job("g", pods=2, min_member=2)]).run()
    assert result.jobs[0].domains == []
    assert "topology" not in run_summary(result)["cluster"]
    head, _, _, _ = summary_rows([result])
    assert "gang domains mean / max" not in head
