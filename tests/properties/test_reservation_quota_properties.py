"""Reservations count against queue limits (docs/backfill.md#queue-limits): over random
queue trees and GPU clusters, the room reserved for a queue's pods plus its usage never
exceeds its limit, at the leaf or at its parent."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.builders import node, pod
from tests.conftest import schedule

QUEUE_API = "batchsched.io/v1alpha1"
GPU = "nvidia.com/gpu"
LEAVES = ("a", "b")
_LIMIT = st.one_of(st.none(), st.integers(4, 24))
_RUNNING = st.lists(
    st.tuples(st.sampled_from(["a", "b", ""]), st.integers(1, 8), st.sampled_from([None, 30, 90])),
    max_size=3,
)
_PENDING = st.lists(
    st.tuples(st.sampled_from(LEAVES), st.integers(1, 8), st.sampled_from([None, 20, 120])),
    min_size=1,
    max_size=6,
)


def _queue(name: str, limit: int | None, parent: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {GPU: {} if limit is None else {"limit": limit}}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _notes(minutes: int | None) -> dict[str, str]:
    return {} if minutes is None else {"batchsched.io/max-runtime": f"{minutes}m"}


@settings(max_examples=60, deadline=None)
@given(_LIMIT, _LIMIT, _LIMIT, st.lists(_RUNNING, min_size=1, max_size=4), _PENDING)
def test_reserved_room_and_usage_stay_within_every_limit(
    org: int | None,
    a: int | None,
    b: int | None,
    layout: list[list[tuple[str, int, int | None]]],
    pending: list[tuple[str, int, int | None]],
) -> None:
    limits = {"org": org, "a": a, "b": b}
    manifests: list[dict[str, Any]] = [
        _queue("org", org),
        _queue("a", a, "org"),
        _queue("b", b, "org"),
    ]
    queue_of: dict[str, str] = {}
    gpus: dict[str, int] = {}
    used = dict.fromkeys(limits, 0)
    for i, running in enumerate(layout):
        manifests.append(node(f"n{i}", nvidia_com__gpu="8"))
        room = 8
        for j, (leaf, n, minutes) in enumerate(running):
            n = min(n, room)
            if n == 0:
                break
            room -= n
            name = f"r{i}-{j}"
            labels = {"batchsched.io/queue": leaf} if leaf else {}
            if leaf:
                used[leaf] += n
                used["org"] += n
            queue_of[f"default/{name}"], gpus[f"default/{name}"] = leaf, n
            manifests.append(
                pod(
                    name,
                    node_name=f"n{i}",
                    phase="Running",
                    labels=labels,
                    annotations=_notes(minutes),
                    scheduled_at=f"2026-11-22T09:{10 * j:02d}:00Z",
                    extra_requests={GPU: str(n)},
                )
            )
    assume(all(limit is None or used[q] <= limit for q, limit in limits.items()))
    for k, (leaf, n, minutes) in enumerate(pending):
        name = f"p{k}"
        queue_of[f"default/{name}"], gpus[f"default/{name}"] = leaf, n
        manifests.append(
            pod(
                name,
                labels={"batchsched.io/queue": leaf},
                annotations=_notes(minutes),
                created=f"2026-11-22T08:{k:02d}:00Z",
                extra_requests={GPU: str(n)},
            )
        )
    output = schedule(*manifests).to_json()
    # The plan's bindings come, its evictions (pods past their stated runtime) go.
    moves = [(b["pod"], 1) for b in output["bindings"]]
    moves += [(e["pod"], -1) for e in output["evictions"]]
    for key, sign in moves:
        if queue_of[key]:
            used[queue_of[key]] += sign * gpus[key]
            used["org"] += sign * gpus[key]
    reserved = dict.fromkeys(limits, 0)
    for held in output["reservations"]:
        if held["kind"] != "Backfill":
            continue
        key = held["holder"].removeprefix("Pod ")
        reserved[queue_of[key]] += gpus[key]
        reserved["org"] += gpus[key]
    for queue, limit in limits.items():
        if limit is not None:
            assert used[queue] + reserved[queue] <= limit, (queue, used, reserved, limits)
