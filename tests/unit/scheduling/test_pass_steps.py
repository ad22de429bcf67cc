"""A pass yields each pod's decisions as they are made (live mode writes them at once)."""

from datetime import UTC, datetime

from batchsched.config import parse_config
from batchsched.decisions import Bind, Unschedulable
from batchsched.objects.parse import read_node, read_pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_each_pod_is_decided_and_assumed_before_the_next_is_tried() -> None:
    state = ClusterState()
    state.upsert_node(read_node(node("n1", cpu="2")))
    for name in ("a", "b", "c"):
        state.upsert_pod(read_pod(pod(name, cpu="1")))
    scheduler = Scheduler(state, parse_config({}))
    steps = scheduler.pass_steps(NOW)
    first = next(steps)
    assert first == [Bind("default/a", "n1")]
    # Already assumed: the room is taken while b and c are still undecided.
    assert state.pods.by_key["default/a"].node_name == "n1"
    assert "default/b" in state.pods.pending
    rest = [d for step in steps for d in step]
    assert rest[0] == Bind("default/b", "n1")
    assert isinstance(rest[1], Unschedulable) and rest[1].pod == "default/c"


def test_a_pod_whose_binding_failed_waits_out_a_backoff() -> None:
    state = ClusterState()
    state.upsert_node(read_node(node("n1", cpu="2")))
    state.upsert_pod(read_pod(pod("a", cpu="1")))
    scheduler = Scheduler(state, parse_config({}))
    assert scheduler.schedule_pass(NOW) == [Bind("default/a", "n1")]
    state.forget("default/a")  # the world reports the PreBind or Binding refused
    scheduler.bind_failed("default/a", NOW)
    assert scheduler.schedule_pass(NOW) == []
    assert scheduler.queue.next_wakeup() == NOW.timestamp() + 1.0
    later = NOW.replace(second=1)
    assert scheduler.schedule_pass(later) == [Bind("default/a", "n1")]
