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
