"""Scenarios with Queues: declared (manifests, a table) or derived, jobs mapped to them (a trace
column, a generator's choice), per-queue metrics, and errors that name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.config import default_config
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.sim.engine import Simulation
from batchsched.sim.fields import ScenarioError
from batchsched.sim.queue_metrics import QueueTimeline, jain_series, queue_summary
from batchsched.sim.queues import _shares
from batchsched.sim.scenario import load_scenario
from batchsched.sim.workload import GPU
from tests.sim.simkit import START, classes, gpu_node, job
from tests.sim.test_traces import OPENB_PODS, PHILLY


def teams(**extra: Any) -> dict[str, Any]:
    """Two teams on 4 nodes of 8 GPUs; team-b may use at most 16 GPUs."""
    return {
        "name": "teams",
        "start": "2026-11-22T00:00:00Z",
        "cluster": {"pools": [{"name": "gpu", "count": 4, "allocatable": {"cpu": "64", GPU: "8"}}]},
        "queues": {
            "table": [
                {"name": "team-a", "resources": {GPU: {"nominal": 16}}},
                {"name": "team-b", "resources": {GPU: {"nominal": 16, "limit": 16}}},
            ]
        },
        "work": {
            "generators": [
                {
                    "name": "train",
                    "arrivalsPerHour": 6,
                    "count": 40,
                    "requests": {GPU: 8},
                    "duration": "2h",
                    "queue": {"choice": {"team-a": 1, "team-b": 3}},
                }
            ]
        },
        "variants": [{"name": "no-queues", "queues": False}, {"name": "queues"}],
        **extra,
    }


def write(tmp_path: Path, scenario: dict[str, Any], name: str = "scenario.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scenario))
    return path


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["simulate", *args, "-o", "json"]) == 0
    data: dict[str, Any] = orjson.loads(capsys.readouterr().out)
    return data


def test_a_queue_limit_holds_only_in_the_variant_with_queues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = run_json(capsys, str(write(tmp_path, teams())), "--jobs", "1")
    runs = {r["name"]: r for r in data["runs"]}
    for run in runs.values():
        per_queue = run["queues"]["queues"]
        assert set(per_queue) == {"team-a", "team-b"}
        assert per_queue["team-a"]["jobs"] + per_queue["team-b"]["jobs"] == 40
        assert run["queues"]["resource"] == GPU
    # team-b asks for 3/4 of the work: without queues it takes more than its 16 GPUs (50%).
    assert runs["no-queues"]["queues"]["queues"]["team-b"]["share_percent"] > 50
    assert runs["queues"]["queues"]["queues"]["team-b"]["share_percent"] <= 50
    # Both runs are measured against the fair shares of the same queues: the scheduler's,
    # and without queues what it would compute for the same demand.
    for run in runs.values():
        summary = run["queues"]
        assert 0 < summary["jain_index_mean"] <= 1
        for queue in summary["queues"].values():
            assert 0 < queue["fair_share_percent"] <= 50  # nominal 16 of 32, demand capped
    # Without the limit team-b takes more than its fair share.
    assert runs["no-queues"]["queues"]["queues"]["team-b"]["deviation_percent"] > 0


def test_the_share_timeline_never_passes_a_limit(tmp_path: Path) -> None:
    from batchsched.sim.command import Plan, simulate

    what = Plan((write(tmp_path, teams()),), (), None)
    runs = {run.name: run for run in what.runs()}
    result = simulate(runs["queues"], None, None, None)
    assert result.queues is not None
    b = result.queues.queues.index("team-b")
    assert max(sample[b] for sample in result.queues.allocated) <= 16
    free = simulate(runs["no-queues"], None, None, None)
    assert free.queues is not None
    assert max(sample[b] for sample in free.queues.allocated) > 16


def test_text_has_one_line_per_queue_and_run_within_100_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["simulate", str(write(tmp_path, teams())), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 100 for line in out.splitlines())
    section = out[out.index("PER QUEUE") :]
    rows = [line.split() for line in section.splitlines() if line.startswith("  team-")]
    assert [(r[0], r[1]) for r in rows] == [
        (rows[0][0], "no-queues"),
        (rows[0][0], "queues"),
        (rows[2][0], "no-queues"),
        (rows[2][0], "queues"),
    ]
    assert {rows[0][0], rows[2][0]} == {"team-a", "team-b"}
    # Worst first: the largest deviation from the fair share over the runs.
    worst = [max(float(r[5]) for r in rows[k : k + 2]) for k in (0, 2)]
    assert worst[0] >= worst[1]


def test_two_saturating_queues_each_get_their_nominal_share(tmp_path: Path) -> None:
    """Both queues always have more work than their nominal 16 GPUs: water-filling gives each
    16 of the 32, and with the scheduler's queues on, each holds its share."""
    from batchsched.sim.command import Plan, simulate

    scenario = teams()
    scenario["queues"]["table"][1]["resources"][GPU] = {"nominal": 16}
    scenario["work"]["generators"][0]["queue"] = {"choice": ["team-a", "team-b"]}
    scenario["work"]["generators"][0].update(arrivalsPerHour=60, count=200)
    what = Plan((write(tmp_path, scenario),), (), None)
    result = simulate(what.runs()[1], None, None, None)
    assert result.queues is not None
    busy = [k for k, t in enumerate(result.queues.times) if 3600 < t < 4 * 3600]
    assert busy
    assert all(result.queues.fair[k] == [16, 16] for k in busy)


def test_the_report_plots_each_queue_and_lists_it(tmp_path: Path) -> None:
    report = tmp_path / "report"
    args = ["simulate", str(write(tmp_path, teams())), "--jobs", "1", "--report", str(report)]
    assert main(args) == 0
    page = (report / "report.html").read_text()
    assert "Each queue&#x27;s share over time against its fair share" in page
    assert "<td>team-b</td>" in page
    header = (report / "jobs.csv").read_text().splitlines()[0].split(",")
    assert "queue" in header


def test_comparison_over_seeds_has_queue_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = run_json(capsys, str(write(tmp_path, teams())), "--seeds", "2", "--jobs", "1")
    metrics = data["comparison"]["metrics"]
    share = metrics["queue team-b: share %"]
    assert share["difference"]["queues"]["mean"] < 0  # the limit holds team-b back
    assert "queues: Jain's index (time mean)" in metrics
    assert "queue team-a: wait p95 (min)" in metrics


def test_cross_queue_preemption_counts_as_a_reclaim() -> None:
    queues = [
        Queue("a", QUEUE_API, resources={GPU: QueueQuota(0, 8)}),
        Queue("b", QUEUE_API, resources={GPU: QueueQuota(0, 8)}),
    ]
    jobs = [
        job("victim", work=3600, priority_class="low", queue="a", checkpoint_interval=600.0),
        job("taker", work=60, submit=1000, priority_class="high", queue="b"),
        job("same-queue", work=60, submit=3000, priority_class="high", queue="a"),
    ]
    sim = Simulation(
        "t",
        [gpu_node("n")],
        classes(),
        jobs,
        default_config(),
        START,
        queues=queues,
        queues_on=False,
    )
    result = sim.run()
    records = {r.name: r for r in result.jobs}
    victim = records["default/victim"]
    assert victim.preemptions == 2
    assert victim.reclaims == 1  # the second preemption was by its own queue's job
    assert victim.reclaim_lost_gpu_seconds == pytest.approx(400 * 8)
    assert result.queues is not None
    summary = queue_summary(result.queues, result.jobs, result.end_time)
    assert summary["queues"]["a"]["reclaims"] == 1
    assert summary["reclaim_lost_gpu_hours"] == pytest.approx(400 * 8 / 3600)


def test_a_gang_reclaims_as_soon_as_its_victims_come_of_age() -> None:
    # b fills both nodes; its pods may be reclaimed from 1000 s (b-1) and 1010 s (b-2).
    # The gang arrives at 150 s: tried again at 1000 s, not at the next periodic retry
    # (1050 s), and takes b-1, then binds once b-1's 30 s grace is over.
    queues = [
        Queue("a", QUEUE_API, resources={GPU: QueueQuota(0, 8)}),
        Queue("b", QUEUE_API, resources={GPU: QueueQuota(0, 8)}, reclaim_min_runtime=1000.0),
    ]
    jobs = [
        job("b-1", work=20000, queue="b"),
        job("b-2", work=20000, submit=10, queue="b"),
        job("gang", gpus=4, pods=2, min_member=2, work=600, submit=150, queue="a"),
    ]
    nodes = [gpu_node("n1"), gpu_node("n2")]
    sim = Simulation("t", nodes, classes(), jobs, default_config(), START, queues=queues)
    records = {r.name: r for r in sim.run().jobs}
    assert records["default/gang"].start == 1030
    assert records["default/b-1"].reclaims == 1


def test_fair_share_deviation_and_jain_index_from_a_timeline() -> None:
    timeline = QueueTimeline("nvidia.com/gpu", ["a", "b"], ["", ""], [True, True], 16.0)
    # 0-10 s: a holds 12 (fair 8), b 4 (fair 8); 10-20 s: both at their fair share.
    timeline.record(0.0, [12.0, 4.0], [0, 0], [8.0, 8.0])
    timeline.record(10.0, [8.0, 8.0], [0, 0], [8.0, 8.0])
    summary = queue_summary(timeline, [], 20.0)
    assert summary["queues"]["a"]["deviation_percent"] == pytest.approx(25.0)
    assert summary["queues"]["b"]["deviation_percent"] == pytest.approx(25.0)
    assert summary["queues"]["a"]["share_percent"] == pytest.approx(62.5)
    assert summary["queues"]["a"]["fair_share_percent"] == pytest.approx(50.0)
    # x = (1.5, 0.5): (2)^2 / (2 * 2.5) = 0.8, then 1.
    assert summary["jain_index_mean"] == pytest.approx(0.9)


def test_jain_index_is_one_over_n_when_one_queue_holds_everything() -> None:
    series = jain_series(np.array([[8.0, 0.0, 0.0, 0.0]]), np.array([[2.0, 2.0, 2.0, 2.0]]))
    assert series[0] == pytest.approx(0.25)
    # A queue without a fair share is left out; with none at all there is no index.
    assert jain_series(np.array([[1.0, 5.0]]), np.array([[1.0, 0.0]]))[0] == pytest.approx(1.0)
    assert np.isnan(jain_series(np.array([[1.0]]), np.array([[0.0]]))[0])


def test_philly_tenants_become_derived_queues_in_proportion_to_gpu_hours(
    tmp_path: Path,
) -> None:
    (tmp_path / "philly.csv").write_text(PHILLY)
    scenario = {
        "cluster": {"pools": [{"name": "gpu", "count": 10, "allocatable": {GPU: "8"}}]},
        "queues": {"derive": {"resource": GPU, "by": "gpuHours"}},
        "work": {"trace": {"format": "philly", "path": "philly.csv", "queueColumn": "cluster"}},
    }
    loaded = load_scenario(write(tmp_path, scenario))
    jobs = loaded.jobs(0)
    assert {j.queue for j in jobs} == {"11cb48", "6214e9", "aaaaaa"}
    tree = {q.name: q for q in loaded.queue_tree(jobs)}
    nominal = {name: q.resources[GPU].nominal for name, q in tree.items()}
    assert sum(nominal.values()) == 80  # the cluster's GPUs, shared out whole
    # GPU-seconds: 11cb48 66, 6214e9 35412 + 3200, aaaaaa 90.
    assert nominal == {"11cb48": 0, "6214e9": 80, "aaaaaa": 0}
    assert all(q.resources[GPU].guaranteed == 0 for q in tree.values())


def test_shares_add_up_by_largest_remainder() -> None:
    assert _shares(10, [1.0, 1.0, 1.0]) == [4, 3, 3]
    assert _shares(7, [0.0, 0.0]) == [4, 3]
    assert _shares(100, [3.0, 1.0]) == [75, 25]


def test_openb_qos_classes_map_to_queues(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(OPENB_PODS)
    scenario = {
        "cluster": {"pools": [{"name": "n", "count": 2, "allocatable": {"cpu": "64"}}]},
        "priorityClasses": [
            {"metadata": {"name": c}, "value": v}
            for c, v in (("high", 9000), ("medium", 8500), ("low", 8000))
        ],
        "queues": {
            "table": [
                {"name": "latency", "resources": {"cpu": {"nominal": "64"}}},
                {"name": "batch", "resources": {"cpu": {"nominal": "64"}}},
            ]
        },
        "work": {
            "trace": {
                "format": "openb",
                "path": "pods.csv",
                "queueColumn": "qos",
                "queueNames": {
                    "LS": "latency",
                    "Guaranteed": "latency",
                    "Burstable": "batch",
                    "BE": "batch",
                },
            }
        },
    }
    jobs = load_scenario(write(tmp_path, scenario)).jobs(0)
    assert {j.name: j.queue for j in jobs} == {
        "openb-pod-0000": "latency",
        "openb-pod-0001": "batch",
        "openb-pod-0002": "batch",
    }


def philly_scenario(tmp_path: Path, trace: dict[str, Any], queues: Any) -> dict[str, Any]:
    (tmp_path / "philly.csv").write_text(PHILLY)
    return {
        "cluster": {"pools": [{"name": "gpu", "count": 2, "allocatable": {GPU: "8"}}]},
        "queues": queues,
        "work": {"trace": {"format": "philly", "path": "philly.csv", **trace}},
    }


DECLARED = {"table": [{"name": "11cb48"}, {"name": "6214e9"}]}


@pytest.mark.parametrize(
    ("trace", "queues", "field", "says"),
    [
        ({"queueColumn": "tenant"}, DECLARED, "work.trace.queueColumn", "no column 'tenant'"),
        ({"queueColumn": "cluster"}, DECLARED, "work.trace.queueColumn", "names queue 'aaaaaa'"),
        ({"queueColumn": "cluster"}, None, "work.trace.queueColumn", "declares no queues"),
        ({"queueNames": {"x": "y"}}, DECLARED, "work.trace.queueNames", "needs queueColumn"),
        (
            {"queueColumn": "cluster", "queueNames": {"11cb48": "11cb48"}},
            DECLARED,
            "work.trace.queueNames",
            "has no queue for '6214e9'",
        ),
        ({}, {"table": [{"name": "a", "weight": -1}]}, "queues.table[0]", "weight"),
        ({}, {"table": [{"name": "a", "parent": "x"}]}, "queues", "no Queue 'x'"),
        ({}, {"table": [{"name": "a"}, {"name": "a"}]}, "queues", "more than once"),
        ({}, {}, "queues", "declares nothing"),
        ({}, {"derive": {"resource": GPU, "by": "luck"}}, "queues.derive.by", "gpuHours"),
        ({}, {"derive": {"resource": GPU, "parent": "org"}}, "queues.derive.parent", "'org'"),
        ({}, {"objects": [{"kind": "Queue"}]}, "queues.objects[0]", "name"),
    ],
)
def test_bad_queue_input_names_the_field(
    tmp_path: Path, trace: dict[str, Any], queues: Any, field: str, says: str
) -> None:
    scenario = philly_scenario(tmp_path, trace, queues)
    if queues is None:
        del scenario["queues"]
    with pytest.raises(ScenarioError) as err:
        load_scenario(write(tmp_path, scenario)).jobs(0)
    assert f": {field}" in str(err.value)
    assert says in str(err.value)


def test_a_generator_naming_an_unknown_or_inner_queue_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = teams()
    scenario["work"]["generators"][0]["queue"] = "team-x"
    assert main(["simulate", str(write(tmp_path, scenario))]) == 2
    err = capsys.readouterr().err
    assert "work.generators[0].queue: names queue 'team-x'" in err
    assert "team-a, team-b" in err
    scenario = teams()
    scenario["queues"]["table"] = [
        {"name": "org"},
        {"name": "team-a", "parent": "org"},
        {"name": "team-b", "parent": "org"},
    ]
    scenario["work"]["generators"][0]["queue"] = "org"
    assert main(["simulate", str(write(tmp_path, scenario))]) == 2
    assert "has child queues" in capsys.readouterr().err


def test_inner_queues_sum_their_leaves(tmp_path: Path) -> None:
    from batchsched.sim.command import Plan, simulate

    scenario = teams()
    scenario["queues"]["table"] = [
        {"name": "org"},
        {"name": "team-a", "parent": "org"},
        {"name": "team-b", "parent": "org"},
    ]
    what = Plan((write(tmp_path, scenario),), (), None)
    result = simulate(what.runs()[1], None, None, None)
    assert result.queues is not None
    assert result.queues.queues == ["org", "team-a", "team-b"]
    assert result.queues.leaves == [False, True, True]
    for sample in result.queues.allocated:
        assert sample[0] == sample[1] + sample[2]


def test_the_meters_fair_shares_are_water_fillings_for_any_demand() -> None:
    """Where every queue's demand fits, the meter takes each queue's cap without running
    water-filling; any demand gives what state/fair_share.py gives."""
    import random

    from batchsched.sim.queue_metrics import QueueMeter
    from batchsched.state.fair_share import fair_shares

    queues = [
        Queue("org", QUEUE_API, resources={GPU: QueueQuota(0, 16, 24)}),
        Queue("a", QUEUE_API, parent="org", resources={GPU: QueueQuota(0, 8)}),
        Queue("b", QUEUE_API, parent="org", resources={GPU: QueueQuota(0, 8, 12)}, weight=2),
        Queue("c", QUEUE_API, resources={GPU: QueueQuota(0, 8)}),
    ]
    rng = random.Random(7)
    capped = 0
    meter = QueueMeter(queues, GPU, 32)
    asks: dict[str, list[int]] = {"a": [], "b": [], "c": []}  # each pending pod's GPUs
    for _ in range(300):
        # Pods come and go on one meter (it keeps each cap as demand moves).
        for leaf in ("a", "b", "c"):
            meter.bound(
                meter.path(leaf), rng.randint(-min(meter.allocated[meter.index[leaf]], 6), 6)
            )
            roll = rng.random()
            if asks[leaf] and roll < 0.3:
                meter.waiting(meter.path(leaf), -1, asks[leaf].pop(rng.randrange(len(asks[leaf]))))
            elif asks[leaf] and roll < 0.6:  # one starts: what it asks is allocated now
                meter.started(meter.path(leaf), asks[leaf].pop(rng.randrange(len(asks[leaf]))))
            else:
                asks[leaf].append(rng.choice([1, 4, 8]))
                meter.waiting(meter.path(leaf), 1, asks[leaf][-1])
            assert meter.pending[meter.index[leaf]] == len(asks[leaf])
            assert meter.asked[meter.index[leaf]] == sum(asks[leaf])
        order = meter.timeline.queues
        demand = {q: {GPU: meter.allocated[i] + meter.asked[i]} for i, q in enumerate(order)}
        expected = fair_shares({q.name: q for q in queues}, demand, {GPU: 32})
        assert meter.fair_shares() == [expected[q][GPU] for q in order]
        meter.sample(float(len(meter.timeline.times)))
        assert meter.timeline.fair[-1] == [expected[q][GPU] for q in order]
        cap = {q.name: min(demand[q.name][GPU], q.resources[GPU].limit or 10**9) for q in queues}
        fits = cap["org"] + cap["c"] <= 32 and cap["a"] + cap["b"] <= cap["org"]
        assert meter.everyone_capped() == fits
        capped += fits
    assert 0 < capped < 300  # both ways were taken
