"""Reservations and backfill in the simulator (docs/backfill.md): a long-waiting job reserves
its start, a short one backfills, a long one waits, and the report counts them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from batchsched.config import load_config, parse_config
from batchsched.sim.command import comparison_text
from batchsched.sim.fields import ScenarioError
from batchsched.sim.metrics import JobRecord, backfill_summary, size_class
from batchsched.sim.report import render_html
from batchsched.sim.scenario import load_scenario
from batchsched.sim.workload import JobSpec
from tests.sim.simkit import gpu_node, job, simulation


def _jobs() -> list[JobSpec]:
    return [
        job("run", gpus=4, work=3600, priority_class="high", stated_runtime=3600),
        job("big", gpus=8, work=1000, submit=1, priority_class="low", stated_runtime=7200),
        job("short", gpus=2, work=100, submit=700, priority_class="low", stated_runtime=200),
        job("long", gpus=2, work=100, submit=700, priority_class="low", stated_runtime=7200),
    ]


def test_a_reserved_job_starts_on_time_beside_a_backfilled_one() -> None:
    result = simulation([gpu_node("n1")], _jobs()).run()
    by_name = {j.name: j for j in result.jobs}
    assert by_name["default/short"].start == 700  # ends by 3600: backfilled
    assert by_name["default/big"].start == 3600  # when "run" ends, as expected
    assert by_name["default/long"].start == 4600  # would have run past 3600: after big
    # long, waiting since 700, reserves at 3600 the start big's stated 2 h allow: 10800;
    # big ends after its true 1000 s and long starts 6200 s early.
    assert result.backfill.expected_start == {"default/big": 3600, "default/long": 10800}
    assert result.backfill.backfilled == {"default/short"}
    summary = backfill_summary(result)
    assert summary["backfilled_jobs"] == 1 and summary["reserved_jobs"] == 2
    assert summary["start_error_seconds"]["mean"] == -3100
    assert summary["start_error_abs_seconds"]["mean"] == 3100
    assert summary["jobs_by_size"] == {
        "1 GPU": 0,
        "partial node": 3,
        "whole node": 1,
        "multi-node": 0,
        "4+ nodes": 0,
    }


def test_one_seeds_text_and_page_give_waits_per_size_and_what_reservations_did() -> None:
    # Without --seeds the comparison over seeds is not made: the per-size figures the issue
    # asks for are still shown, per run (docs/backfill.md#simulator).
    result = simulation([gpu_node("n1")], _jobs()).run()
    text = comparison_text([result])
    assert "PER JOB SIZE" in text and "RESERVATIONS" in text
    rows = [line.split() for line in text.splitlines()]
    assert ["partial", "node", result.name, "3"] == rows[_row(rows, "partial")][:4]
    assert ["whole", "node", result.name, "1"] == rows[_row(rows, "whole")][:4]
    # backfilled 1, reserved 2, no broken promise, start error 3100 s = 51.7 min
    assert [result.name, "1", "2", "0", "51.7"] in rows
    run = {"name": result.name, "scenario": "s", "variant": "", "seeds": [result.seed]}
    meta = {"version": "x", "configs": [], "runs": [run]}
    page = render_html([result], meta)
    assert "<h2>Per job size</h2>" in page and "<td>51.7</td>" in page


def _row(rows: list[list[str]], first: str) -> int:
    return next(i for i, row in enumerate(rows) if row[:1] == [first])


def test_a_reserved_node_goes_to_its_holder_the_moment_it_frees() -> None:
    # Three alike jobs wait for the two nodes; two of them reserve one each. The holders
    # were filed, before they reserved, with their waiting twins: when n2 frees at 3600 s a
    # holder must be tried then, not left asleep behind a twin that fails there, while n2
    # stays empty. (Planned again as n2 frees, the first holder moves there: it starts
    # sooner than on its own node.)
    jobs = [job("long", work=7200), job("short", work=3600)]
    jobs += [job(f"w{i}", work=600, submit=10 * i) for i in (1, 2, 3)]
    sim = simulation([gpu_node("n1"), gpu_node("n2")], jobs)
    sim.advance(3000)
    holders = {r.holder for r in sim.state.start_reservations.by_holder.values()}
    assert len(holders) == 2
    by_name = {j.name: j for j in sim.run().jobs}
    starts = {by_name[h.removeprefix("Pod ").removesuffix("-0")].start for h in holders}
    assert 3600 in starts


def test_without_the_plugin_the_small_jobs_go_first() -> None:
    config = parse_config(
        {"profiles": [{"plugins": {"filter": {"disabled": [{"name": "Backfill"}]}}}]}
    )
    result = simulation([gpu_node("n1")], _jobs(), config=config).run()
    by_name = {j.name: j for j in result.jobs}
    assert by_name["default/long"].start == 700  # takes the room big waits for
    assert by_name["default/big"].start == 3600  # when "run" ends: long ended at 800
    assert result.backfill.backfilled == set() and result.backfill.expected_start == {}


def test_size_classes() -> None:
    def record(gpus: float, pods: int = 1) -> JobRecord:
        return JobRecord("j", "low", "low", pods, gpus, pods > 1, 0.0)

    assert [size_class(record(g), 8) for g in (0, 1, 4, 8, 16)] == [
        None,
        "1 GPU",
        "partial node",
        "whole node",
        "multi-node",
    ]


def _scenario(tmp_path: Path, stated: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ncluster: {pools: [{name: g, count: 1, allocatable: {nvidia.com/gpu: '8'}}]}\n"
        "work:\n"
        f"  statedRuntime: {stated}\n"
        "  jobs: [{name: a, duration: 1h, requests: {nvidia.com/gpu: 1}},"
        " {name: b, duration: 30m, requests: {nvidia.com/gpu: 1}}]\n"
    )
    return path


def test_stated_runtime_is_the_runtime_times_the_factor(tmp_path: Path) -> None:
    jobs = load_scenario(_scenario(tmp_path, "{factor: 1.5}")).jobs(0)
    assert [j.stated_runtime for j in jobs] == [5400, 2700]
    assert [j.stated_runtime for j in load_scenario(_scenario(tmp_path, "{}")).jobs(0)] == [
        7200,
        3600,
    ]
    none = load_scenario(_scenario(tmp_path, "{none: 1}")).jobs(0)
    assert [j.stated_runtime for j in none] == [None, None]


def test_a_share_of_jobs_under_estimates(tmp_path: Path) -> None:
    under = load_scenario(_scenario(tmp_path, "{under: 1, underFactor: 0.25}")).jobs(0)
    assert [j.stated_runtime for j in under] == [900, 450]
    default = load_scenario(_scenario(tmp_path, "{under: 1}")).jobs(0)
    assert [j.stated_runtime for j in default] == [1800, 900]
    # `under: 0` draws nothing more: the bounds are those of a scenario without it.
    kept = load_scenario(_scenario(tmp_path, "{factor: {uniform: [1, 3]}, under: 0}")).jobs(3)
    plain = load_scenario(_scenario(tmp_path, "{factor: {uniform: [1, 3]}}")).jobs(3)
    assert [j.stated_runtime for j in kept] == [j.stated_runtime for j in plain]


def test_a_job_past_its_stated_runtime_is_evicted_for_a_reservation() -> None:
    """`late` states 1 h but runs 2 h; `big`, waiting since 1 s, reserves at its first
    attempt after reserveAfterSeconds (600 s) with expected start 3600 (late's stated end),
    is tried again then, evicts late and starts once late's grace period (30 s) is over.
    late starts again (from scratch: it saved no checkpoint) when big ends, at 4630."""
    jobs = [
        job("late", gpus=8, work=7200, priority_class="low", stated_runtime=3600),
        job("big", gpus=8, work=1000, submit=1, priority_class="low", stated_runtime=2000),
    ]
    result = simulation([gpu_node("n1")], jobs).run()
    by_name = {j.name: j for j in result.jobs}
    # late, waiting again, reserves for big's stated end (3630 + 2000).
    assert result.backfill.expected_start == {"default/big": 3600, "default/late": 5630}
    assert by_name["default/big"].start == 3630
    assert by_name["default/late"].preemptions == by_name["default/late"].broken_promises == 1
    assert backfill_summary(result)["broken_promises_evicted"] == 1
    assert by_name["default/big"].end == 4630
    assert by_name["default/late"].end == 4630 + 7200


def test_the_jobs_of_a_seed_are_the_same_with_stated_runtimes(tmp_path: Path) -> None:
    with_bounds = load_scenario(_scenario(tmp_path, "{factor: {uniform: [1, 3]}}")).jobs(4)
    (tmp_path / "s.yaml").write_text(
        (tmp_path / "s.yaml")
        .read_text()
        .replace("  statedRuntime: {factor: {uniform: [1, 3]}}\n", "")
    )
    without = load_scenario(tmp_path / "s.yaml").jobs(4)
    assert [(j.name, j.work) for j in with_bounds] == [(j.name, j.work) for j in without]
    assert all(j.stated_runtime is None for j in without)


@pytest.mark.parametrize(
    ("stated", "fragment"),
    [
        ("{none: 2}", "work.statedRuntime.none"),
        ("{factor: 0}", "work.statedRuntime.factor"),
        ("{factors: 2}", "unknown field"),
        ("{under: -0.1}", "work.statedRuntime.under"),
        ("{underFactor: 0}", "work.statedRuntime.underFactor"),
        ("{underFactor: 1}", r"underFactor: must be greater than 0 and less than 1, got 1$"),
        ("{underFactor: 2.5}", r"underFactor: must be greater than 0 and less than 1, got 2.5"),
        ("{underFactor: {uniform: [0.5, 1.5]}}", r"underFactor: must be greater than 0 and less"),
        ("{underFactor: {choice: [0.5, 1]}}", r"underFactor: must be greater than 0 and less"),
        ("{underFactor: {exponential: 0.5}}", r"underFactor: must be a value, uniform or choice"),
        (
            "{underFactor: {lognormal: {median: 0.5, sigma: 1}}}",
            r"underFactor: must be a value, uniform or choice",
        ),
    ],
)
def test_bad_stated_runtime(tmp_path: Path, stated: str, fragment: str) -> None:
    with pytest.raises(ScenarioError, match=fragment):
        load_scenario(_scenario(tmp_path, stated))


EXAMPLES = Path(__file__).parents[2] / "examples"


def test_the_examples_compare_the_profile_with_and_without_backfill() -> None:
    without = load_config(EXAMPLES / "backfill" / "without-backfill.yaml")
    default = load_config(EXAMPLES / "backfill" / "default.yaml")
    assert "Backfill" not in dict(without.profiles[0].plugins["filter"])
    assert "Backfill" in dict(default.profiles[0].plugins["filter"])
    demo = load_scenario(EXAMPLES / "ml-cluster" / "scenario.yaml")
    jobs = demo.jobs(7)
    assert jobs and all(j.stated_runtime == math.ceil(2 * j.work) for j in jobs)


def test_a_reservation_moves_to_a_node_that_frees_sooner() -> None:
    # "a" fills one node till 3000 (stated 3600), b1 and b2 half the other each (stated
    # 7200 and 1800): big first reserves a's node. b1 ends at 600, so the other node's
    # stated end is 1800: all reservations are planned again on any change (as Slurm's
    # backfill does each cycle), big moves there and holds the half b1 left, which "small"
    # would otherwise take for hours; big starts when b2 ends, at 1500.
    jobs = [
        job("a", gpus=8, work=3000, stated_runtime=3600, priority_class="low"),
        job("b1", gpus=4, work=600, stated_runtime=7200, priority_class="low"),
        job("b2", gpus=4, work=1500, stated_runtime=1800, priority_class="low"),
        job("big", gpus=8, work=100, submit=1, stated_runtime=200, priority_class="low"),
        job("small", gpus=4, work=5000, submit=300, stated_runtime=9000, priority_class="low"),
    ]
    config = parse_config(
        {"profiles": [{"pluginConfig": [{"name": "Backfill", "args": {"reserveAfterSeconds": 0}}]}]}
    )
    result = simulation([gpu_node("n1"), gpu_node("n2")], jobs, config=config).run()
    by_name = {j.name: j for j in result.jobs}
    assert result.backfill.expected_start["default/big"] == 3600  # first planned
    assert by_name["default/big"].start == 1500
    assert by_name["default/small"].start == 1600  # once big (100 s) is done


def test_a_job_reserving_first_with_no_expected_start_keeps_the_first_it_gets() -> None:
    # "f1" and "f2" state no runtime: big's reservation waits for them with no expected
    # start, so none is recorded then. When f2 ends, big is planned again on n2 by f3's
    # stated end: that is its first expected start, recorded though big held room before.
    jobs = [
        job("f1", gpus=8, work=3000),
        job("f2", gpus=4, work=500),
        job("f3", gpus=4, work=1500, stated_runtime=2000),
        job("big", gpus=8, work=100, submit=1, stated_runtime=200),
    ]
    config = parse_config(
        {"profiles": [{"pluginConfig": [{"name": "Backfill", "args": {"reserveAfterSeconds": 0}}]}]}
    )
    sim = simulation([gpu_node("n1"), gpu_node("n2")], jobs, config=config)
    sim.advance(400)
    held = sim.state.start_reservations.by_holder["Pod default/big-0"]
    assert held.start is None and sim.backfill.expected_start == {}
    result = sim.run()
    assert result.backfill.expected_start == {"default/big": 2000}
    assert {j.name: j.start for j in result.jobs}["default/big"] == 1500
