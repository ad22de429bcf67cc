"""The event loop: jobs start when they fit, finish after their work, wait in order."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import datetime

import pytest

from batchsched.config import default_config
from batchsched.decisions import Decision
from batchsched.objects.records import PriorityClass
from batchsched.sim.engine import JobRun, Simulation, Unit
from batchsched.sim.metrics import cluster_summary
from batchsched.sim.workload import GPU
from tests.sim.simkit import START, gpu_node, job, simulation


def test_a_job_runs_at_submit_and_ends_after_its_work() -> None:
    result = simulation([gpu_node("n1")], [job("a", work=100, submit=10)]).run()
    (a,) = result.jobs
    assert (a.submit, a.start, a.end, a.wait) == (10, 10, 110, 0)
    assert result.end_time == 110


def test_a_job_that_does_not_fit_waits_for_room() -> None:
    jobs = [job("a", gpus=6, work=100), job("b", gpus=4, work=50, submit=5)]
    result = simulation([gpu_node("n1")], jobs).run()
    a, b = result.jobs
    assert (a.start, a.end) == (0, 100)
    assert (b.start, b.end, b.wait) == (100, 150, 95)


def test_higher_priority_waiting_job_goes_first() -> None:
    jobs = [
        job("running", work=100, priority_class="high"),  # nothing may preempt it
        job("low-early", submit=1, priority_class="low"),
        job("high-late", submit=2, priority_class="high"),
    ]
    result = simulation([gpu_node("n1")], jobs).run()
    by_name = {j.name: j for j in result.jobs}
    assert by_name["default/high-late"].start == 100
    assert by_name["default/low-early"].start == 200


def test_bound_pods_carry_pod_scheduled_at_bind_time() -> None:
    sim = simulation([gpu_node("n1")], [job("a", work=100, submit=30)])
    sim.advance(50)
    pod = sim.state.pods.by_key["default/a-0"]
    cond = pod.condition("PodScheduled")
    assert cond is not None and cond.status == "True"
    assert cond.last_transition_time == pod.start_time
    assert (pod.start_time - START).total_seconds() == 30
    assert pod.node_name == "n1"


def test_until_stops_the_clock_and_leaves_jobs_unfinished() -> None:
    result = simulation([gpu_node("n1")], [job("a", work=1000)], until=300).run()
    assert result.end_time == 300
    assert result.jobs[0].start == 0 and result.jobs[0].end is None


def test_a_job_that_never_fits_stays_pending_and_the_run_ends() -> None:
    result = simulation([gpu_node("n1")], [job("huge", gpus=16), job("ok", work=10)]).run()
    huge, ok = result.jobs
    assert huge.start is None and ok.end == 10
    assert result.decisions["Unschedulable"] >= 1


def test_utilisation_and_pending_are_time_weighted() -> None:
    # a: 4 GPUs over [0, 100); b: 8 GPUs waits over [0, 100), runs over [100, 200).
    jobs = [job("a", gpus=4, work=100), job("b", gpus=8, work=100)]
    result = simulation([gpu_node("n1")], jobs).run()
    summary = cluster_summary(result)
    assert summary["utilisation"][GPU] == pytest.approx((4 * 100 + 8 * 100) / (8 * 200))
    assert summary["pending_pods_mean"] == pytest.approx(0.5)
    assert summary["pending_pods_max"] == 1


def test_independent_pods_of_one_job_run_as_room_allows() -> None:
    result = simulation([gpu_node("n1")], [job("w", gpus=4, pods=3, work=100)]).run()
    (w,) = result.jobs
    assert (w.start, w.end) == (0, 200)  # two pods at once, the third after them


def test_waiting_pods_are_retried_every_five_minutes_only_if_a_rule_reads_the_clock() -> None:
    jobs = [job("long", work=86400), job("waits", submit=1)]
    plain = Simulation(
        "plain", [gpu_node("n1")], [PriorityClass("low", 8000)], jobs, default_config(), START
    )
    # Nothing changes for a day and no rule depends on time: one attempt, then one at the end.
    result = plain.run()
    assert result.decisions["Unschedulable"] == 1
    # A class with a toleration makes time matter: the queue's 5-minute retry is simulated.
    timed = simulation([gpu_node("n1")], jobs).run()
    assert timed.decisions["Unschedulable"] == 1 + ((86400 - 1) // 300)
    assert timed.jobs[1].start == result.jobs[1].start == 86400


def test_one_pass_sees_every_event_of_its_instant() -> None:
    # "urgent" is submitted the second "ends" finishes, and its submit is queued first. A
    # pass between the two events would see a full node and preempt "ends"; a cluster's
    # scheduler sees both changes before its next attempt, so "urgent" takes the freed room.
    jobs = [
        job("urgent", submit=100, priority_class="high"),
        job("ends", work=100, priority_class="low"),
    ]
    sim = simulation([gpu_node("n1")], jobs)
    passes: list[float] = []
    pass_steps = sim.scheduler.pass_steps

    def counted(now: datetime) -> Iterator[list[Decision]]:
        passes.append((now - START).total_seconds())
        return pass_steps(now)

    sim.scheduler.pass_steps = counted  # type: ignore[method-assign]
    result = sim.run()
    urgent, ends = result.jobs
    assert (ends.end, ends.preemptions) == (100, 0)
    assert (urgent.start, urgent.end) == (100, 200)
    assert "Evict" not in result.decisions
    assert passes == [0, 100, 200]  # one pass per instant, not per event


def test_fragmentation_follows_the_changed_nodes_exactly() -> None:
    """Kept per node as rows change; each sample must equal a count over every node."""
    nodes = [gpu_node(f"n{i}") for i in range(4)]
    jobs = [job(f"j{i}", gpus=1 + i % 8, work=50.0 + 17 * i, submit=5.0 * i) for i in range(30)]
    sim = simulation(nodes, jobs)
    seen = []
    while sim._first_event_time() is not None:
        sim.advance(sim.now + 7.0)
        state, col = sim.state, state_col(sim)
        free, alloc = (
            state.nodes.free[: state.nodes.rows, col],
            state.nodes.allocatable[: state.nodes.rows, col],
        )
        partly = (free > 0) & (free < alloc)
        assert sim._fragmentation() == float(free[partly].sum())
        seen.append(sim._fragmentation())
    assert any(seen) and seen[-1] == 0.0


def state_col(sim: Simulation) -> int:
    col = sim.state.nodes.resources.get(GPU)
    assert col is not None
    return col


def test_a_run_leaves_the_collector_as_it_found_it() -> None:
    before = gc.get_threshold()
    simulation([gpu_node("n")], [job("a"), job("b", submit=10.0)]).run()
    assert gc.get_threshold() == before


def test_at_one_time_submissions_come_before_the_events_due_then() -> None:
    # "first" finishes at 100, when "second" is submitted: the submission is handled first,
    # as if pushed before any event of that time (submissions wait beside the event heap).
    jobs = [job("first", work=100), job("second", submit=100)]
    sim = simulation([gpu_node("n1")], jobs)
    handled: list[tuple[float, str]] = []
    submit, finish = sim._submit, sim._finish

    def submitted(run: JobRun) -> None:
        handled.append((sim.now, f"submit {run.spec.name}"))
        submit(run)

    def finished(unit: Unit) -> None:
        handled.append((sim.now, f"finish {unit.job.spec.name}"))
        finish(unit)

    sim._submit = submitted  # type: ignore[method-assign]
    sim._finish = finished  # type: ignore[method-assign]
    sim.run()
    assert handled == [
        (0.0, "submit first"),
        (100.0, "submit second"),
        (100.0, "finish first"),
        (200.0, "finish second"),
    ]
