"""The planner's picture of a node's pods (docs/backfill.md): a pod bound but not started yet
is expected to end its stated runtime from now, which moves with the clock."""

from __future__ import annotations

from batchsched.commands.schedule import build_state
from batchsched.objects.parse import parse_time
from batchsched.plugins.backfill.picture import Picture
from tests.builders import node, pod
from tests.conftest import objects_of

START = parse_time("2026-11-22T11:00:00Z").timestamp()  # a reservation's expected start
NOW = parse_time("2026-11-22T10:00:00Z").timestamp()


def test_a_pod_not_started_yet_comes_to_stay_as_the_clock_moves_and_is_read_again() -> None:
    state = build_state(
        objects_of(
            node("n0", nvidia_com__gpu="8"),
            pod(
                "p",
                node_name="n0",
                phase="Running",
                annotations={"batchsched.io/max-runtime": "30m"},
                extra_requests={"nvidia.com/gpu": "4"},
            ),
        )
    )
    picture = Picture()
    gpu = state.nodes.resources.get("nvidia.com/gpu")
    staying, changes = picture.staying(state, 0, NOW, START, ())
    # From now it ends by 10:30, before the start; from 10:30 on it would not.
    assert staying[gpu] == 0
    assert changes == START - 1800
    staying, _ = picture.staying(state, 0, NOW + 3600, START, ())
    assert staying[gpu] == 4
    # Its start is set on the same object (as the simulator does), with no row change: read
    # again, it ends at 10:30 whatever the clock.
    state.pods.by_key["default/p"].start_time = parse_time("2026-11-22T10:00:00Z")
    staying, changes = picture.staying(state, 0, NOW + 3600, START, ())
    assert staying[gpu] == 0
    assert changes == float("inf")


def test_most_room_counts_the_pods_expected_to_end_and_follows_the_nodes() -> None:
    state = build_state(
        objects_of(
            node("n0", nvidia_com__gpu="8"),
            node("n1", nvidia_com__gpu="8"),
            pod(
                "stated",
                node_name="n0",
                phase="Running",
                scheduled_at="2026-11-22T09:30:00Z",
                annotations={"batchsched.io/max-runtime": "2h"},
                extra_requests={"nvidia.com/gpu": "4"},
            ),
            pod("forever", node_name="n0", phase="Running", extra_requests={"nvidia.com/gpu": "2"}),
            pod("other", node_name="n1", phase="Running", extra_requests={"nvidia.com/gpu": "8"}),
        )
    )
    picture = Picture()
    gpu = state.nodes.resources.get("nvidia.com/gpu")
    row = state.nodes.row_of
    # n0: 2 free and the 4 of the pod stating a runtime; the one stating none stays for good.
    assert picture.most_room(state)[[row["n0"], row["n1"]], gpu].tolist() == [6, 0]
    # A pod leaving n1 (the change logged) is read again; n0, unchanged, is kept.
    state.remove_pod("default/other")
    assert picture.most_room(state)[[row["n0"], row["n1"]], gpu].tolist() == [6, 8]
    # Told to go, the pod stating no runtime is expected to end after its grace period.
    state.mark_terminating("default/forever", parse_time("2026-11-22T10:00:00Z"))
    assert picture.most_room(state)[row["n0"], gpu] == 8
