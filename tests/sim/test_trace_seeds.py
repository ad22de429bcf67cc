"""What a seed varies in a trace replay (work.trace.sample and jitter), what `simulate` says
about seeds when it varies nothing, per-queue time averages from queues.measureFrom, and
report plots that draw without matplotlib warnings."""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.cli import main
from batchsched.sim.fields import ScenarioError
from batchsched.sim.plotting import legend
from batchsched.sim.queue_metrics import QueueTimeline, queue_summary
from batchsched.sim.scenario import load_scenario
from batchsched.sim.stats import few_seeds
from batchsched.sim.traces.common import PerSeed
from batchsched.sim.workload import GPU, JobSpec
from tests.sim.test_queues_in_sim import teams, write


def philly_rows(count: int) -> str:
    """`count` one-GPU jobs of two tenants, a minute apart, from 2017-10-03."""
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for i in range(count):
        lines.append(f"2017-10-03 00:{i // 60:02d}:{i % 60:02d},600.0,1,600.0,t{i % 2}")
    return "\n".join(lines) + "\n"


def trace_scenario(folder: Path, **trace: Any) -> Path:
    (folder / "philly.csv").write_text(philly_rows(200))
    scenario = {
        "name": "replay",
        "cluster": {"pools": [{"name": "g", "count": 4, "allocatable": {"cpu": "64", GPU: "8"}}]},
        "work": {"trace": {"format": "philly", "path": "philly.csv", **trace}},
        "variants": [{"name": "a"}, {"name": "b"}],
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_without_sample_or_jitter_every_seed_replays_the_same_jobs(tmp_path: Path) -> None:
    scenario = load_scenario(trace_scenario(tmp_path))
    assert scenario.same_work
    assert scenario.jobs(0) == scenario.jobs(1) and len(scenario.jobs(0)) == 200


def test_sample_keeps_a_share_of_the_jobs_drawn_per_seed(tmp_path: Path) -> None:
    scenario = load_scenario(trace_scenario(tmp_path, sample=0.5))
    assert not scenario.same_work
    first, again, other = scenario.jobs(3), scenario.jobs(3), scenario.jobs(4)
    assert first == again  # a seed always gives the same jobs
    assert first != other
    assert 60 <= len(first) <= 140 and 60 <= len(other) <= 140
    everyone = {j.name: j for j in load_scenario(trace_scenario(tmp_path)).jobs(0)}
    assert all(everyone[j.name] == j for j in first)  # kept as they are: no jitter asked


def test_jitter_moves_each_submission_within_its_bound_never_before_the_origin(
    tmp_path: Path,
) -> None:
    original = {j.name: j.submit for j in load_scenario(trace_scenario(tmp_path)).jobs(0)}
    scenario = load_scenario(trace_scenario(tmp_path, jitter="10m"))
    jobs = scenario.jobs(7)
    assert len(jobs) == 200 and not scenario.same_work
    moved = [j.submit - original[j.name] for j in jobs]
    assert all(-600.0 <= d <= 600.0 for d in moved) and all(j.submit >= 0 for j in jobs)
    assert sum(1 for d in moved if d != 0.0) > 150
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)  # in submit order
    assert jobs != scenario.jobs(8)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("sample", 0, r"work\.trace\.sample: must be above 0"),
        ("sample", 1.5, r"work\.trace\.sample: "),
        ("sample", "half", r"work\.trace\.sample: "),
        ("jitter", "-5m", r"work\.trace\.jitter: "),
        ("jitter", "soon", r"work\.trace\.jitter: "),
    ],
)
def test_bad_sample_or_jitter_names_the_field(
    tmp_path: Path, option: str, value: object, message: str
) -> None:
    with pytest.raises(ScenarioError, match=message):
        load_scenario(trace_scenario(tmp_path, **{option: value}))


def test_bad_sample_exits_2_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(trace_scenario(tmp_path, sample=0))]) == 2
    assert "work.trace.sample: must be above 0" in capsys.readouterr().err


@settings(deadline=None)  # a loaded machine
@given(
    sample=st.floats(min_value=0.01, max_value=1.0),
    jitter=st.floats(min_value=0.0, max_value=7200.0),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_a_seed_draws_a_subset_each_within_its_jitter(
    sample: float, jitter: float, seed: int
) -> None:
    jobs = [JobSpec(f"j{i}", float(i * 30), 1, {GPU: 1}, 60.0) for i in range(50)]
    drawn = PerSeed(sample, jitter).draw(jobs, random.Random(seed))
    assert drawn == PerSeed(sample, jitter).draw(jobs, random.Random(seed))
    original = {j.name: j for j in jobs}
    assert len({j.name for j in drawn}) == len(drawn) <= len(jobs)
    for job in drawn:
        before = original[job.name]
        assert job.submit >= 0.0 and abs(job.submit - before.submit) <= jitter + 1e-9
        assert job.work == before.work and job.pods == before.pods
    if sample == 1.0:
        assert len(drawn) == len(jobs)


def test_few_seeds_says_what_seeds_vary_for_a_trace_replayed_as_it_is() -> None:
    assert few_seeds(1, 3, same_work=True) == ""  # one deterministic run per variant
    said = few_seeds(8, 2, same_work=True)
    assert "a trace replays the same jobs on every seed: the 8 seeds give identical runs" in said
    assert "work.trace.sample or work.trace.jitter" in said
    assert "one seed" in few_seeds(1, 2)  # drawn work: one seed is one draw


def test_simulate_warns_of_identical_seeds_only_when_nothing_is_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = trace_scenario(tmp_path)
    assert main(["simulate", str(plain), "--jobs", "1"]) == 0
    assert "warning: one seed" not in capsys.readouterr().err
    assert main(["simulate", str(plain), "--jobs", "1", "--seeds", "2"]) == 0
    assert "the 2 seeds give identical runs" in capsys.readouterr().err
    (tmp_path / "drawn").mkdir()  # another file: a process plans a scenario file once
    drawn = trace_scenario(tmp_path / "drawn", sample=0.9)
    assert main(["simulate", str(drawn), "--jobs", "1", "--seeds", "5"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_legend_only_where_something_is_labelled() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (empty, drawn) = plt.subplots(1, 2)
    drawn.plot([0, 1], [0, 1], label="run")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        legend(empty)
        legend(drawn)
    assert empty.get_legend() is None and drawn.get_legend() is not None
    plt.close(fig)


def test_the_report_with_queues_draws_without_warnings(tmp_path: Path) -> None:
    # Its nodes have no memory (an empty utilisation panel) and one queue's class runs.
    path = write(tmp_path, teams())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args = ["simulate", str(path), "--jobs", "1", "--report", str(tmp_path / "r")]
        assert main(args) == 0
    page = (tmp_path / "r" / "report.html").read_text()
    assert "share over time against its fair share" in page


def test_queue_time_averages_count_from_measure_from() -> None:
    timeline = QueueTimeline("nvidia.com/gpu", ["a", "b"], ["", ""], [True, True], 16)
    # 0-10 s: a alone holds everything (fair share 16); 10-30 s: 4 and 12, fair 8 each.
    timeline.record(0.0, [16, 0], [0, 0], [16, 0])
    timeline.record(10.0, [4, 12], [0, 0], [8, 8])
    whole = queue_summary(timeline, [], 30.0)
    assert whole["queues"]["a"]["share_percent"] == pytest.approx((160 + 80) / 480 * 100)
    timeline.since = 20.0  # a window that starts between two samples: 20-30 s only
    window = queue_summary(timeline, [], 30.0)
    assert window["measured_from_seconds"] == 20.0
    assert window["queues"]["a"]["share_percent"] == pytest.approx(25.0)
    assert window["queues"]["b"]["fair_share_percent"] == pytest.approx(50.0)
    assert window["queues"]["a"]["deviation_percent"] == pytest.approx(50.0)
    assert window["jain_index_mean"] == pytest.approx((0.5 + 1.5) ** 2 / (2 * 2.5))
    timeline.since = 40.0  # after the end: nothing to average
    late = queue_summary(timeline, [], 30.0)
    assert late["queues"]["a"]["share_percent"] == 0.0
    assert late["queues"]["a"]["deviation_percent"] is None and late["jain_index_mean"] is None


def test_measure_from_reaches_the_run_and_its_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = teams()
    scenario["queues"]["measureFrom"] = "3h"
    path = write(tmp_path, scenario)
    assert main(["simulate", str(path), "--jobs", "1", "-o", "json"]) == 0
    runs = orjson.loads(capsys.readouterr().out)["runs"]
    assert {r["queues"]["measured_from_seconds"] for r in runs} == {10800.0}
    assert main(["simulate", str(path), "--jobs", "1"]) == 0
    assert "PER QUEUE (shares of nvidia.com/gpu, time-averaged from 3.0h on)" in (
        capsys.readouterr().out
    )


def test_a_bad_measure_from_names_the_field(tmp_path: Path) -> None:
    scenario = teams()
    scenario["queues"]["measureFrom"] = "tomorrow"
    with pytest.raises(ScenarioError, match=r"queues\.measureFrom: "):
        load_scenario(write(tmp_path, scenario))
