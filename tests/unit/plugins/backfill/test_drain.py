"""Backfill's score: where other pods go (docs/backfill.md, "Where other pods go: nodes about
to empty are left to empty")."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from batchsched.commands.explain import explain_pod
from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.decisions import Bind
from batchsched.plugins.backfill.drain import drain_score, free_at
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.reservations import StartReservation
from tests.builders import node, pod
from tests.conftest import NOW, objects_of, schedule
from tests.unit.plugins.backfill.pods import running, waiting

HOUR = 3600.0
T = NOW.timestamp()


def _cluster(*, whole: bool) -> list[dict[str, Any]]:
    """A whole-node pod (only for the `pool: a` nodes) waiting an hour, when `whole`: it
    reserves n1-reserved, free first (10:15). n2-drains, the fullest (6 GPUs in use), frees
    at 10:30; n3-busy at 14:30; n0-empty has no pod (and is not the whole-node pod's)."""
    pool = {"pool": "a"}
    manifests = [
        node("n0-empty", nvidia_com__gpu="8"),
        node("n1-reserved", labels=pool, nvidia_com__gpu="8"),
        node("n2-drains", labels=pool, nvidia_com__gpu="8"),
        node("n3-busy", labels=pool, nvidia_com__gpu="8"),
        running("a", 2, "45m", on="n1-reserved"),
        running("b", 6, "1h", on="n2-drains"),
        running("c", 2, "5h", on="n3-busy"),
        waiting("small", 1, "1h"),
    ]
    if whole:
        big = pod("big", node_selector=pool, extra_requests={"nvidia.com/gpu": "8"})
        manifests.append(big)
    return manifests


def _without_the_score() -> Any:
    return parse_config(
        {"profiles": [{"plugins": {"score": {"disabled": [{"name": "Backfill"}]}}}]}
    )


def _bound(result: Any) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings}


def test_a_pod_stating_no_runtime_is_placed_by_the_other_scores() -> None:
    # It never ends, for planning: the score rates every node alike, and the other scores
    # decide exactly as without it (the default GPU packing: the fullest node).
    manifests = [*_cluster(whole=False)[:-1], waiting("small", 1)]
    result = schedule(*manifests)
    assert _bound(result) == {"default/small": "n2-drains"}
    assert _bound(result) == _bound(schedule(*manifests, config=_without_the_score()))
    out = explain_pod(objects_of(*manifests), default_config(), NOW, "default/small")
    assert {v.scores["Backfill"] for v in out.nodes if v.total is not None} == {0}


def test_a_pod_stating_a_runtime_leaves_a_draining_node_to_drain() -> None:
    # No reservation yet: small (1 h, to 11:00) goes to n3-busy, busy until 14:30 anyway,
    # not to n2-drains (the fullest), which then frees at 10:30 for whoever needs it whole.
    manifests = _cluster(whole=False)
    assert _bound(schedule(*manifests)) == {"default/small": "n3-busy"}
    assert _bound(schedule(*manifests, config=_without_the_score())) == {
        "default/small": "n2-drains"
    }


def _daemon(on: str) -> dict[str, Any]:
    """A DaemonSet's pod on node `on`, stating no runtime (as node agents do)."""
    manifest = pod(
        f"agent-{on}", node_name=on, phase="Running", scheduled_at="2026-11-22T08:00:00Z"
    )
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-1"}
    manifest["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    return manifest


def test_a_daemonset_pod_on_every_node_does_not_make_every_node_busy_for_good() -> None:
    # The same choice as above with a node agent on each node: n2-drains still frees at
    # 10:30 for whoever needs it whole (the agent stays in the room the others leave), so
    # small still goes to n3-busy, and the agent-only n0-empty scores as an empty node.
    manifests = [
        *_cluster(whole=False),
        *(_daemon(n) for n in ("n0-empty", "n1-reserved", "n2-drains", "n3-busy")),
    ]
    assert _bound(schedule(*manifests)) == {"default/small": "n3-busy"}
    out = explain_pod(objects_of(*manifests), default_config(), NOW, "default/small")
    scores = {v.node: v.scores["Backfill"] for v in out.nodes if v.total is not None}
    assert scores["n0-empty"] == 0
    assert scores["n3-busy"] == 100


def test_while_a_reservation_is_held_a_pod_goes_where_the_node_stays_busy() -> None:
    # small (1 h, to 11:00) is kept off n1-reserved (its holder starts at 10:15). Packing
    # alone would put it on n2-drains, the fullest, which frees at 10:30 otherwise; with the
    # score it goes to n3-busy, busy until 14:30 anyway, and n0-empty stays empty.
    manifests = _cluster(whole=True)
    result = schedule(*manifests)
    assert "default/big" in result.unschedulable
    assert _bound(result) == {"default/small": "n3-busy"}
    assert _bound(schedule(*manifests, config=_without_the_score())) == {
        "default/small": "n2-drains"
    }


def test_an_empty_node_is_kept_empty_under_least_allocated_too() -> None:
    # kube-scheduler's LeastAllocated spreads onto the empty node; the score keeps it empty.
    spread = {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "LeastAllocated"}}}
    config = parse_config({"profiles": [{"pluginConfig": [spread]}]})
    manifests = _cluster(whole=True)
    assert _bound(schedule(*manifests, config=config)) == {"default/small": "n3-busy"}
    config = parse_config(
        {
            "profiles": [
                {
                    "pluginConfig": [spread],
                    "plugins": {"score": {"disabled": [{"name": "Backfill"}]}},
                }
            ]
        }
    )
    assert _bound(schedule(*manifests, config=config)) == {"default/small": "n0-empty"}


def test_explain_shows_the_score_beside_the_others() -> None:
    objects = objects_of(*_cluster(whole=True))
    out = explain_pod(objects, default_config(), NOW, "default/small")
    scores = {v.node: v.scores for v in out.nodes if v.total is not None}
    assert {n: s["Backfill"] for n, s in scores.items()} == {
        "n0-empty": 0,
        "n2-drains": 50,  # busy 30 of its 60 minutes
        "n3-busy": 100,
    }
    assert "NodeResourcesFit" in scores["n3-busy"]
    assert out.chosen == "n3-busy"


def test_tenths_of_the_stay_the_node_is_busy_anyway() -> None:
    after = math.nextafter  # the score holds up to that instant, included
    assert drain_score(T + 2 * HOUR, T, HOUR) == (100, after(T + HOUR, math.inf))
    assert drain_score(T + HOUR, T, HOUR) == (100, after(T, math.inf))  # ends as it frees
    # Busy 35 of the 60 minutes: 5 tenths, until 30 minutes are left.
    assert drain_score(T + 35 * 60, T, HOUR) == (50, after(T + 5 * 60, math.inf))
    assert drain_score(T + 5 * 60, T, HOUR) == (0, math.inf)  # less than a tenth
    assert drain_score(-math.inf, T, HOUR) == (0, math.inf)  # empty
    assert drain_score(T - 60, T, HOUR) == (0, math.inf)  # its pods ran past their runtime


def test_a_pod_stating_no_runtime_scores_only_nodes_busy_for_good() -> None:
    assert drain_score(math.inf, T, math.inf) == (100, math.inf)
    assert drain_score(T + 100 * HOUR, T, math.inf) == (0, math.inf)
    assert drain_score(math.inf, T, HOUR) == (100, math.inf)


def test_a_node_is_busy_until_its_reservations_end_too() -> None:
    at = datetime.fromtimestamp(T + HOUR, UTC)
    until = datetime.fromtimestamp(T + 3 * HOUR, UTC)
    held = StartReservation("Pod default/big", ("n1",), {0: {"nvidia.com/gpu": 8}}, at, (), until)
    assert free_at(T + HOUR, [held], T) == T + 3 * HOUR
    # A start that has come counts from now: 10 minutes late, it ends 10 minutes later.
    assert free_at(-math.inf, [held], T + HOUR + 600) == T + 3 * HOUR + 600
    open_ended = StartReservation("Pod default/big", ("n1",), {0: {}}, at, (), None)
    assert free_at(T, [open_ended], T) == math.inf
    assert free_at(-math.inf, [], T) == -math.inf


def test_a_kept_score_is_made_again_once_the_clock_has_moved_it() -> None:
    # At 10:00 a 1-GPU pod stating 1 h scores n-b (6 GPUs in use, free at 10:50) 80 and
    # n-d (1 in use, busy until 12:00) 100, and goes to n-x (7 in use, busy until 12:00).
    # At 10:40 another of the same shape comes; only n-x changed since. n-b is then busy
    # for only 10 of its 60 minutes (10): the packing alone (n-b, fuller) must not win on
    # the score kept from 10:00.
    manifests = [node(f"n-full-{i}", nvidia_com__gpu="8") for i in range(5)]
    manifests += [running(f"full-{i}", 8, None, on=f"n-full-{i}") for i in range(5)]
    manifests += [
        node("n-b", nvidia_com__gpu="8"),
        node("n-d", nvidia_com__gpu="8"),
        node("n-x", nvidia_com__gpu="8"),
        running("b", 6, "80m", on="n-b"),  # from 09:30: free at 10:50
        running("d", 1, "150m", on="n-d"),  # free at 12:00
        running("x", 7, "150m", on="n-x"),
    ]
    state = build_state(objects_of(*manifests, waiting("small", 1, "1h")))
    scheduler = Scheduler(state, default_config())
    first = scheduler.schedule_pass(NOW)
    assert [(d.pod, d.node) for d in first if isinstance(d, Bind)] == [("default/small", "n-x")]
    again = pod(
        "again",
        annotations={"batchsched.io/max-runtime": "1h"},
        created="2026-11-22T10:40:00Z",
        extra_requests={"nvidia.com/gpu": "1"},
    )
    state.upsert_pod(objects_of(again).pods[0])
    later = scheduler.schedule_pass(NOW + timedelta(minutes=40))
    assert [(d.pod, d.node) for d in later if isinstance(d, Bind)] == [("default/again", "n-d")]


def test_backfill_enabled_only_as_a_score_makes_no_reservation() -> None:
    config = parse_config(
        {"profiles": [{"plugins": {"filter": {"disabled": [{"name": "Backfill"}]}}}]}
    )
    result = schedule(*_cluster(whole=True), config=config)
    assert not result.to_json()["reservations"]
    # small takes the node that stays busy: the score still counts.
    assert _bound(result)["default/small"] == "n3-busy"
