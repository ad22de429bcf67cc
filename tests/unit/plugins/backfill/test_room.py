"""What Backfill keeps for the pass (plugins/backfill/room.py) answers per request: a pod is
never told another's answer because a reserved node's room was judged for another size
(docs/backfill.md#cost)."""

from __future__ import annotations

import numpy as np

from batchsched.commands.schedule import build_state
from batchsched.config import parse_config
from batchsched.decisions import Unschedulable
from batchsched.framework.interface import ClusterChange, ClusterEvent, PodsHint
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node
from tests.conftest import NOW, objects_of, schedule
from tests.unit.plugins.backfill.pods import running, waiting


def test_the_room_a_reservation_keeps_is_judged_per_request() -> None:
    # n1: `a` (3 GPUs) ends at 10:30, `c` (1 GPU) states no runtime: 4 GPUs free now. `big`
    # (6 GPUs) reserves n1 from 10:30. `narrow` (1 GPU, selecting a zone no node is in)
    # fails first; with it placed n1 would keep big's 6 GPUs. `long` (4 GPUs, 2 h) would not,
    # so it is kept off n1 and fails; `short` (4 GPUs, ends by 10:30) backfills. Had the
    # reserved node been judged once for narrow's request, long's failure would be
    # remembered as if n1 let it in, and short, alike but for its runtime, told it.
    result = schedule(
        node("n1", cpu="64", nvidia_com__gpu="8"),
        running("a", 3, "1h"),
        running("c", 1, None),
        waiting("big", 6, None, "2026-11-22T09:00:00Z"),
        waiting("narrow", 1, "2h", "2026-11-22T09:05:00Z", node_selector={"zone": "none"}),
        waiting("long", 4, "2h", "2026-11-22T09:10:00Z"),
        waiting("short", 4, "20m", "2026-11-22T09:20:00Z"),
    )
    assert {b["pod"]: b["node"] for b in result.to_json()["bindings"]} == {"default/short": "n1"}
    assert "would run past that start" in result.unschedulable["default/long"]


def test_the_hint_wakes_a_pod_by_its_own_runtime_when_a_reserved_node_frees() -> None:
    # n1: `a` (4 GPUs) ends at 10:30 and `b` (2 GPUs) at 10:05: 2 GPUs free. `big` (8 GPUs)
    # reserves n1 from 10:30; `long` (4 GPUs, 2 h) and `short` (4 GPUs, 10 min) fail for
    # room (one reservation at most: only big holds one). Once b leaves, short may pass (it
    # ends before big's start) and long may not: the hint reads the verdicts kept per
    # request, which must still go by each one's runtime.
    state = build_state(
        objects_of(
            node("n1", cpu="64", nvidia_com__gpu="8"),
            running("a", 4, "1h"),
            running("b", 2, "35m"),
            waiting("big", 8, None, "2026-11-22T09:00:00Z"),
            waiting("long", 4, "2h", "2026-11-22T09:10:00Z"),
            waiting("short", 4, "10m", "2026-11-22T09:20:00Z"),
        )
    )
    one = {"name": "Backfill", "args": {"maxReservations": 1}}
    scheduler = Scheduler(state, parse_config({"profiles": [{"pluginConfig": [one]}]}))
    assert scheduler.schedule_pass(NOW) == [
        Unschedulable(f"default/{name}", scheduler.messages[f"default/{name}"])
        for name in ("big", "long", "short")
    ]
    assert set(state.start_reservations.by_holder) == {"Pod default/big"}
    mark = state.nodes.change_mark()
    state.remove_pod("default/b")
    backfill = scheduler.default_framework.plugins["Backfill"]
    backfill.before_pass(state, NOW)  # the pass's instant, as the queue asks before a pass
    hint = backfill.events_to_register()[ClusterEvent.NODE_ROOM]
    assert isinstance(hint, PodsHint)
    rows = np.asarray(state.nodes.rows_changed_since(mark), dtype=np.intp)
    change = ClusterChange(state, frozenset({ClusterEvent.NODE_ROOM}), rows, mark)
    asked = [state.pods.pending[f"default/{name}"] for name in ("long", "short")]
    assert list(hint.ask(change, asked)) == [False, True]
