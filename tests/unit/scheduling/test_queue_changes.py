"""What decides a pod's queue moves between passes (docs/queues.md#which-queue-a-pod-is-in):
a Namespace's queue label, a Queue's parent, a Queue deleted. Applied as the live loop
applies a watch event (ClusterState.apply / remove), the next pass decides as a scheduler
built afresh on the cluster as it is now."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchsched.config import default_config, parse_config
from batchsched.decisions import Bind, Decision
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Namespace, Node, Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.conftest import NOW

GPU = "nvidia.com/gpu"
LATER = NOW + timedelta(minutes=10)  # every backoff and unschedulable wait is over


def queue(name: str, parent: str = "") -> Queue:
    return Queue(name, QUEUE_API, parent, {GPU: QueueQuota()})


def gpu_pod(namespace: str, name: str, queue_label: str = "", node: str = "", gpus: int = 1) -> Pod:
    labels = {QUEUE_LABEL: queue_label} if queue_label else {}
    return Pod(namespace, name, labels=labels, requests={GPU: gpus}, node_name=node)


def state_of(objects: list[tuple[str, object]]) -> ClusterState:
    state = ClusterState()
    for kind, record in objects:
        state.apply(kind, record)
    return state


def bound(decisions: list[Decision]) -> list[str]:
    return [d.pod for d in decisions if isinstance(d, Bind)]


def test_pods_moved_by_their_namespaces_label_are_ordered_as_in_a_fresh_scheduler() -> None:
    # a runs two GPUs through Namespace ml's label; ml's label moves to b: a holds nothing
    # now and b two, so a's own pending pod goes before b's (one GPU is free).
    objects: list[tuple[str, object]] = [
        ("Node", Node("n1", {GPU: 3})),
        ("Queue", queue("a")),
        ("Queue", queue("b")),
        ("Namespace", Namespace("ml", {QUEUE_LABEL: "a"})),
        ("Pod", gpu_pod("ml", "run-0", node="n1")),
        ("Pod", gpu_pod("ml", "run-1", node="n1")),
        ("Pod", gpu_pod("team", "a-0", "a")),
        ("Pod", gpu_pod("team", "b-0", "b")),
    ]
    state = state_of(objects[:4])
    scheduler = Scheduler(state, default_config())
    scheduler.schedule_pass(NOW)  # a pass with nothing to do: the queues are followed
    for kind, record in objects[4:]:
        state.apply(kind, record)
    moved = Namespace("ml", {QUEUE_LABEL: "b"})
    state.apply("Namespace", moved)
    fresh = Scheduler(state_of([*objects, ("Namespace", moved)]), default_config())
    assert bound(fresh.schedule_pass(LATER)) == ["team/a-0"]
    assert bound(scheduler.schedule_pass(LATER)) == ["team/a-0"]


def test_pods_queued_before_their_namespaces_label_moved_wait_in_their_new_queue() -> None:
    # A failed binding brings the pods reported since into the scheduling queue between
    # passes (Scheduler.bind_failed); Namespace ml's label then moves m-0 from b to a, which
    # runs two GPUs already: b's pod goes first, as in a scheduler built afresh.
    objects: list[tuple[str, object]] = [
        ("Node", Node("n0", {GPU: 2, "cpu": 4000})),
        ("Node", Node("n1", {GPU: 1, "cpu": 4000})),
        ("Queue", queue("a")),
        ("Queue", queue("b")),
        ("Namespace", Namespace("ml", {QUEUE_LABEL: "b"})),
        ("Pod", gpu_pod("team", "a-run-0", "a", node="n0")),
        ("Pod", gpu_pod("team", "a-run-1", "a", node="n0")),
        ("Pod", Pod("team", "f", requests={"cpu": 100})),  # in no queue
    ]
    arrivals: list[tuple[str, object]] = [
        ("Pod", gpu_pod("ml", "m-0")),
        ("Pod", gpu_pod("team", "b-0", "b")),
    ]
    state = state_of(objects)
    scheduler = Scheduler(state, default_config())
    assert bound(scheduler.schedule_pass(NOW)) == ["team/f"]
    for kind, record in arrivals:
        state.apply(kind, record)
    state.forget("team/f")  # its binding failed
    scheduler.bind_failed("team/f", NOW)
    moved = Namespace("ml", {QUEUE_LABEL: "a"})
    state.apply("Namespace", moved)
    fresh = Scheduler(state_of([*objects, *arrivals, ("Namespace", moved)]), default_config())
    expected = bound(fresh.schedule_pass(LATER))
    assert expected == ["team/f", "team/b-0"]
    assert bound(scheduler.schedule_pass(LATER)) == expected


def test_a_leaf_that_lost_all_its_pods_to_a_label_change_is_not_chosen() -> None:
    # Namespace ml's pods wait in a; its label moves them to b, and a has no pod left. The
    # next pass takes them from b, in b's turn against c.
    objects: list[tuple[str, object]] = [
        ("Node", Node("n1", {GPU: 2})),
        ("Queue", queue("a")),
        ("Queue", queue("b")),
        ("Queue", queue("c")),
        ("Namespace", Namespace("ml", {QUEUE_LABEL: "a"})),
        ("Pod", gpu_pod("ml", "m-0")),
        ("Pod", gpu_pod("ml", "m-1")),
        ("Pod", gpu_pod("team", "c-0", "c")),
        ("Pod", gpu_pod("team", "c-1", "c")),
    ]
    state = state_of(objects[1:])  # no node yet: everything waits
    scheduler = Scheduler(state, default_config())
    assert bound(scheduler.schedule_pass(NOW)) == []
    moved = Namespace("ml", {QUEUE_LABEL: "b"})
    state.apply("Namespace", moved)
    state.apply("Node", objects[0][1])
    fresh = Scheduler(state_of([*objects, ("Namespace", moved)]), default_config())
    expected = bound(fresh.schedule_pass(LATER))
    assert expected == ["ml/m-0", "team/c-0"]
    assert bound(scheduler.schedule_pass(LATER)) == expected


def test_a_queue_moved_under_another_parent_is_chosen_among_its_new_siblings() -> None:
    # x under p1 and y under p2 each have a pod waiting; x moves under p2, where y already
    # runs a GPU: x goes first (1 of its share against y's 2).
    objects: list[tuple[str, object]] = [
        ("Node", Node("n1", {GPU: 1})),
        ("Queue", queue("p1")),
        ("Queue", queue("p2")),
        ("Queue", queue("x", "p1")),
        ("Queue", queue("y", "p2")),
        ("Pod", gpu_pod("team", "y-run", "y", node="n1")),
        ("Pod", gpu_pod("team", "x-0", "x")),
        ("Pod", gpu_pod("team", "y-0", "y")),
    ]
    state = state_of(objects)
    scheduler = Scheduler(state, default_config())
    assert bound(scheduler.schedule_pass(NOW)) == []  # the node is full
    moves = [("Queue", queue("x", "p2")), ("Node", Node("n1", {GPU: 2}))]
    for kind, record in moves:
        state.apply(kind, record)
    state.remove("Queue", "p1")
    fresh = Scheduler(state_of([*objects[:1], *objects[2:], *moves]), default_config())
    expected = bound(fresh.schedule_pass(LATER))
    assert expected == ["team/x-0"]
    assert bound(scheduler.schedule_pass(LATER)) == expected


def test_a_pod_whose_queue_is_deleted_stays_pending_with_a_message_naming_it() -> None:
    # (b stays: without any Queue object nothing is held back, docs/queues.md)
    state = state_of(
        [
            ("Node", Node("n1", {GPU: 1})),
            ("Queue", queue("a")),
            ("Queue", queue("b")),
            ("Pod", gpu_pod("team", "big", "a", gpus=2)),  # more than the node has: it waits
        ]
    )
    scheduler = Scheduler(state, default_config())
    assert bound(scheduler.schedule_pass(NOW)) == []
    assert "queue" not in scheduler.messages["team/big"]
    state.remove("Queue", "a")
    assert bound(scheduler.schedule_pass(NOW + timedelta(seconds=1))) == []  # its backoff
    assert "team/big" in state.pods.pending
    message = scheduler.messages["team/big"]
    assert message.startswith("queue 'a' (label batchsched.io/queue of the pod) does not exist")


BAD_LIMIT = "spec.resources.nvidia.com/gpu.limit: -1 is negative (a quantity such as 8)"


def messages_after(scheduler: Scheduler, at: timedelta) -> tuple[list[str], dict[str, str]]:
    decisions = scheduler.schedule_pass(NOW + at)
    return bound(decisions), scheduler.messages


def test_pods_of_a_queue_that_cannot_be_read_wait_naming_its_field_until_it_is_fixed() -> None:
    """The only Queue object cannot be read (live mode: docs/queues.md#a-queue-that-cannot-be-
    read): queues stay on, so its pods wait naming it rather than run with no quota; a pod in no
    queue is not held back; a version that can be read brings its limit back."""
    state = state_of(
        [
            ("Node", Node("n1", {GPU: 8})),
            ("Pod", gpu_pod("team", "p1", "a", gpus=2)),
            ("Pod", gpu_pod("team", "p2", "a", gpus=2)),
            ("Pod", gpu_pod("other", "free", gpus=1)),
        ]
    )
    state.queue_unreadable("a", BAD_LIMIT)
    assert state.queues  # queues on
    scheduler = Scheduler(state, default_config())
    binds, messages = messages_after(scheduler, timedelta(0))
    assert binds == ["other/free"]
    assert messages["team/p1"] == (
        f"queue 'a' (label batchsched.io/queue of the pod) cannot be read: {BAD_LIMIT}; "
        "waiting for it to be fixed"
    )
    state.apply("Queue", Queue("a", QUEUE_API, "", {GPU: QueueQuota(limit=2)}))
    binds, messages = messages_after(scheduler, LATER - NOW)
    assert binds == ["team/p1"]  # its limit holds: never over-committed
    assert messages["team/p2"] == "queue a: nvidia.com/gpu limit 2, in use 2, asks 2"


def test_a_default_queue_or_a_parent_that_cannot_be_read_holds_its_pods_until_it_goes() -> None:
    state = state_of(
        [
            ("Node", Node("n1", {GPU: 8})),
            ("Queue", queue("child", "org")),
            ("Pod", gpu_pod("team", "anywhere")),  # in `default`, if it exists
            ("Pod", gpu_pod("team", "below", "child")),
        ]
    )
    state.queue_unreadable("default", BAD_LIMIT)
    state.queue_unreadable("org", BAD_LIMIT)
    scheduler = Scheduler(state, default_config())
    binds, messages = messages_after(scheduler, timedelta(0))
    assert binds == []
    assert messages["team/anywhere"] == (
        f"queue 'default' (the default queue) cannot be read: {BAD_LIMIT}; "
        "waiting for it to be fixed"
    )
    assert messages["team/below"].endswith(
        f"is ignored while its tree breaks the rules: Queue child: spec.parent: "
        f"Queue 'org' cannot be read: {BAD_LIMIT}"
    )
    state.remove("Queue", "default")  # deleted: its pods are in no queue
    state.apply("Queue", queue("org"))  # fixed: the tree holds
    binds, _ = messages_after(scheduler, LATER - NOW)
    assert sorted(binds) == ["team/anywhere", "team/below"]
    assert not state.queues.unreadable


# Random label changes among passes, arrivals, failed and confirmed bindings and departures,
# applied as the live loop applies them: the pass after them decides as a scheduler built
# afresh on the same objects. (Without preemption or reclaim, and without Backfill, whose
# answers a fresh scheduler makes alike but which would blur what this compares.)
CONFIG = parse_config(
    {
        "profiles": [
            {
                "plugins": {
                    "multiPoint": {"disabled": [{"name": "Backfill"}]},
                    "postFilter": {"disabled": [{"name": "*"}]},
                }
            }
        ]
    }
)
TEAMS = ("ml", "ops")
LEAVES = ("a1", "a2", "b", "")
steps = st.lists(
    st.tuples(
        st.sampled_from(["arrive", "label", "pass", "fail", "confirm", "finish"]),
        st.integers(0, 7),  # which pod (its namespace: TEAMS[i % 2])
        st.sampled_from(LEAVES),
        st.integers(1, 2),  # GPUs
    ),
    max_size=24,
)


@settings(max_examples=150, deadline=None)
@given(steps)
# ops/p1 and ml/p6 arrive while ml/p0's binding is in flight; it fails, which queues them,
# ops/p1 in b; ops's label then moves it to a1.
@example(
    [
        ("arrive", 0, "a1", 2),
        ("pass", 0, "", 1),
        ("label", 1, "b", 1),
        ("arrive", 1, "", 1),
        ("arrive", 6, "a2", 1),
        ("fail", 0, "", 1),
        ("label", 1, "a1", 1),
    ]
)
def test_after_any_label_changes_the_next_pass_decides_as_a_fresh_scheduler(
    ops: list[tuple[str, int, str, int]],
) -> None:
    world: dict[tuple[str, str], object] = {}  # (kind, key) -> the object as last reported
    for kind, record in [
        ("Node", Node("n1", {GPU: 4, "cpu": 64_000})),
        ("Queue", queue("a")),
        ("Queue", queue("a1", "a")),
        ("Queue", queue("a2", "a")),
        ("Queue", queue("b")),
        *[("Namespace", Namespace(team, {QUEUE_LABEL: "a1"})) for team in TEAMS],
    ]:
        world[kind, getattr(record, "key", getattr(record, "name", ""))] = record
    state = state_of(list((kind, record) for (kind, _), record in world.items()))
    scheduler = Scheduler(state, CONFIG)
    in_flight: list[str] = []  # bindings decided, not yet reported back

    def report(kind: str, key: str, record: object | None) -> None:
        if record is None:
            world.pop((kind, key), None)
            state.remove(kind, key)
        else:
            world[kind, key] = record
            state.apply(kind, record)

    now = NOW
    for op, i, leaf, gpus in ops:
        now += timedelta(seconds=30)
        team = TEAMS[i % 2]
        key = f"{team}/p{i}"
        if op == "arrive" and ("Pod", key) not in world:
            created = NOW + timedelta(seconds=i)
            labels = {QUEUE_LABEL: leaf} if leaf and i % 3 == 0 else {}
            made = Pod(
                team, f"p{i}", labels=labels, requests={GPU: gpus}, creation_timestamp=created
            )
            report("Pod", key, made)
        elif op == "label":
            report("Namespace", team, Namespace(team, {QUEUE_LABEL: leaf} if leaf else {}))
        elif op == "pass":
            in_flight += bound(scheduler.schedule_pass(now))
        elif op == "fail" and in_flight:
            failed = in_flight.pop(i % len(in_flight))
            state.forget(failed)
            scheduler.bind_failed(failed, now)
        elif op == "confirm" and in_flight:
            done = in_flight.pop(i % len(in_flight))
            pod = world["Pod", done]
            assert isinstance(pod, Pod)
            report("Pod", done, replace(pod, node_name="n1", phase="Running"))
        elif op == "finish" and ("Pod", key) in world and key not in in_flight:
            report("Pod", key, None)
    for done in in_flight:  # every binding in flight is reported
        pod = world["Pod", done]
        assert isinstance(pod, Pod)
        report("Pod", done, replace(pod, node_name="n1", phase="Running"))
    later = now + timedelta(minutes=10)
    fresh = Scheduler(state_of([(kind, record) for (kind, _), record in world.items()]), CONFIG)
    assert bound(scheduler.schedule_pass(later)) == bound(fresh.schedule_pass(later))
