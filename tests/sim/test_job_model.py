"""The job model: preemption loses work since the last checkpoint, pods come back after the
grace period and restart delay, and a gang restarts whole."""

from __future__ import annotations

import pytest

from batchsched.config import parse_config
from batchsched.decisions import Evict
from batchsched.sim.engine import Simulation
from tests.sim.simkit import gpu_node, job, simulation

MIN = 60.0


def evict(sim: Simulation, pod: str) -> None:
    """What a preemption decision does to the world, injected at the current time."""
    sim.apply(
        [Evict(pod=pod, node=sim.state.pods.by_key[pod].node_name, preemptor="x/y", reason="test")]
    )


def test_checkpointed_job_loses_only_work_since_the_last_checkpoint() -> None:
    spec = job("train", gpus=8, work=60 * MIN, checkpoint_interval=10 * MIN, restart_delay=MIN)
    sim = simulation([gpu_node("n1")], [spec])
    sim.advance(25 * MIN)
    evict(sim, "default/train-0")
    result = sim.run()
    (train,) = result.jobs
    assert (train.preemptions, train.no_progress_preemptions) == (1, 0)
    assert train.lost_gpu_seconds == pytest.approx(5 * MIN * 8)
    # gone after 30 s grace, recreated 1 min later, then 40 min of work remain
    assert train.end == pytest.approx(25 * MIN + 30 + MIN + 40 * MIN)
    assert "default/train-0-r1" not in sim.state.pods.by_key  # finished and removed


def test_job_without_checkpoints_loses_all_its_work() -> None:
    spec = job("train", gpus=4, work=60 * MIN, restart_delay=0)
    sim = simulation([gpu_node("n1")], [spec])
    sim.advance(25 * MIN)
    evict(sim, "default/train-0")
    (train,) = sim.run().jobs
    assert train.lost_gpu_seconds == pytest.approx(25 * MIN * 4)
    assert train.no_progress_preemptions == 1
    assert train.end == pytest.approx(25 * MIN + 30 + 60 * MIN)


def test_preemption_before_the_first_checkpoint_of_a_run_makes_no_progress() -> None:
    spec = job("train", work=60 * MIN, checkpoint_interval=10 * MIN, restart_delay=0)
    sim = simulation([gpu_node("n1")], [spec])
    sim.advance(12 * MIN)
    evict(sim, "default/train-0")  # saved one checkpoint in this run: it made progress
    sim.advance(12 * MIN + 30 + 9 * MIN)
    evict(sim, "default/train-0-r1")  # 9 minutes into the new run: nothing saved
    (train,) = sim.run().jobs
    assert (train.preemptions, train.no_progress_preemptions) == (2, 1)
    assert train.lost_gpu_seconds == pytest.approx((2 + 9) * MIN * 8)


def test_victim_holds_its_room_for_the_grace_period() -> None:
    spec = job("train", gpus=8, work=60 * MIN, grace_seconds=120)
    sim = simulation([gpu_node("n1")], [spec, job("other", gpus=8, work=10, submit=25 * MIN)])
    sim.advance(25 * MIN)
    evict(sim, "default/train-0")
    sim.advance(25 * MIN + 119)
    assert sim.state.pods.by_key["default/train-0"].deletion_timestamp is not None
    assert not sim.state.pods.by_key["default/other-0"].node_name
    sim.advance(25 * MIN + 120)
    assert sim.state.pods.by_key["default/other-0"].node_name == "n1"


def test_restarted_pod_is_a_new_pod_with_a_new_name() -> None:
    sim = simulation([gpu_node("n1")], [job("train", work=60 * MIN, restart_delay=MIN)])
    sim.advance(10 * MIN)
    evict(sim, "default/train-0")
    sim.advance(10 * MIN + 30 + MIN)
    assert "default/train-0" not in sim.state.pods.by_key
    assert sim.state.pods.by_key["default/train-0-r1"].node_name == "n1"


def test_gang_job_restarts_whole_when_one_member_is_preempted() -> None:
    spec = job("gang", gpus=8, pods=2, min_member=2, work=60 * MIN, checkpoint_interval=10 * MIN)
    sim = simulation([gpu_node("n1"), gpu_node("n2")], [spec])
    sim.advance(1)
    group = sim.state.groups.by_key["default/gang"]
    assert group.min_member == 2
    for key in ("default/gang-0", "default/gang-1"):
        assert sim.state.pods.by_key[key].annotations["scheduling.k8s.io/group-name"] == "gang"
    sim.advance(15 * MIN)
    evict(sim, "default/gang-0")
    evict(sim, "default/gang-1")  # a second eviction of the same restart counts once
    assert sim.state.pods.by_key["default/gang-1"].deletion_timestamp is not None
    sim.advance(15 * MIN + 30)
    assert {k for k in sim.state.pods.by_key if k.startswith("default/gang")} == {
        "default/gang-0-r1",
        "default/gang-1-r1",
    }
    result = sim.run()
    (gang,) = result.jobs
    assert gang.preemptions == 1
    assert gang.lost_gpu_seconds == pytest.approx(5 * MIN * 16)
    assert gang.end == pytest.approx(15 * MIN + 30 + 50 * MIN)
    assert "default/gang" not in sim.state.groups.by_key  # the finished job's group is gone


def test_gang_makes_no_progress_below_min_member() -> None:
    # Room for one of two members only: all or nothing, so nothing binds and nothing idles.
    spec = job("gang", gpus=8, pods=2, min_member=2, work=10 * MIN)
    result = simulation([gpu_node("n1")], [spec, job("tail", gpus=1, work=5, submit=MIN)]).run()
    gang = result.jobs[0]
    assert gang.start is None and gang.end is None
    assert gang.first_bind is None


def test_gang_start_delay_runs_from_first_bind_to_min_member() -> None:
    blocker = job("blocker", gpus=8, work=10 * MIN)
    spec = job("gang", gpus=8, pods=2, min_member=2, work=MIN, submit=1)
    result = simulation([gpu_node("n1"), gpu_node("n2")], [blocker, spec]).run()
    gang = result.jobs[1]
    assert gang.start == 10 * MIN
    # All or nothing binds both members together, so none waits idle for the other.
    assert gang.first_bind == 10 * MIN and gang.gang_start_delay == 0


def test_without_gang_scheduling_a_bound_member_idles_until_the_rest_fit() -> None:
    config = parse_config(
        {
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "plugins": {
                        "multiPoint": {"disabled": [{"name": "Coscheduling"}]},
                        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                    },
                }
            ]
        }
    )
    blocker = job("blocker", gpus=8, work=10 * MIN)
    spec = job("gang", gpus=8, pods=2, min_member=2, work=MIN, submit=1)
    result = simulation([gpu_node("n1"), gpu_node("n2")], [blocker, spec], config=config).run()
    gang = result.jobs[1]
    assert (gang.first_bind, gang.start, gang.gang_start_delay) == (1, 10 * MIN, 10 * MIN - 1)
