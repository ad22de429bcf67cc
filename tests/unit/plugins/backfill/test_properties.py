"""Properties of reservations over random GPU clusters (docs/backfill.md): they never hold the
same room at the same time (a node may be reserved by several at different times), and the
pods bound beside them never delay their expected start."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.parse import parse_time
from tests.builders import node, pod
from tests.conftest import NOW, schedule

_RUNTIME = st.one_of(st.none(), st.sampled_from([10, 30, 45, 60, 90, 120, 240]))
_RUNNING = st.lists(st.tuples(st.integers(1, 4), _RUNTIME), max_size=2)  # at most 8 GPUs
_PENDING = st.lists(st.tuples(st.integers(1, 8), _RUNTIME, st.booleans()), min_size=1, max_size=6)


def _notes(minutes: int | None) -> dict[str, str]:
    return {} if minutes is None else {"batchsched.io/max-runtime": f"{minutes}m"}


@settings(max_examples=60, deadline=None)
@given(st.lists(_RUNNING, min_size=1, max_size=4), _PENDING)
def test_reservations_hold(
    layout: list[list[tuple[int, int | None]]], pending: list[tuple[int, int | None, bool]]
) -> None:
    manifests: list[dict[str, Any]] = []
    runtime: dict[str, int | None] = {}
    gpus: dict[str, int] = {}
    started: dict[str, str] = {}
    on_node: dict[str, list[str]] = {}
    for i, running in enumerate(layout):
        manifests.append(node(f"n{i}", nvidia_com__gpu="8"))
        for j, (n, minutes) in enumerate(running):
            name = f"r{i}-{j}"
            runtime[f"default/{name}"], gpus[f"default/{name}"] = minutes, n
            started[f"default/{name}"] = f"2026-11-22T09:{10 * j:02d}:00Z"
            on_node.setdefault(f"n{i}", []).append(f"default/{name}")
            manifests.append(
                pod(
                    name,
                    node_name=f"n{i}",
                    phase="Running",
                    annotations=_notes(minutes),
                    scheduled_at=started[f"default/{name}"],
                    extra_requests={"nvidia.com/gpu": str(n)},
                )
            )
    for k, (n, minutes, old) in enumerate(pending):
        name = f"p{k}"
        runtime[f"default/{name}"], gpus[f"default/{name}"] = minutes, n
        created = f"2026-11-22T0{8 if old else 9}:{59 if not old else k:02d}:00Z"
        manifests.append(
            pod(
                name,
                annotations=_notes(minutes),
                created=created,
                extra_requests={"nvidia.com/gpu": str(n)},
            )
        )
    result = schedule(*manifests)
    output = result.to_json()
    bound = {b["pod"]: b["node"] for b in output["bindings"]}
    for key, where in bound.items():
        on_node.setdefault(where, []).append(key)
    evicted = {e["pod"] for e in output["evictions"]}  # past their runtime (broken promises)
    on_node = {name: [k for k in keys if k not in evicted] for name, keys in on_node.items()}

    # Per node, the reservations holding its room: (start, end, GPUs); a single pod holds
    # one node.
    held_on: dict[str, list[tuple[datetime, datetime | None, int]]] = {}
    for held in [r for r in output["reservations"] if r["kind"] == "Backfill"]:
        holder = held["holder"].removeprefix("Pod ")
        assert holder not in bound
        (name,) = held["nodes"]
        if held["expectedStart"] is None:
            # Once the pods it waits for have gone, the pods bound beside it leave it room.
            staying = sum(gpus[k] for k in on_node.get(name, []) if k not in held["waitsFor"])
            assert staying + gpus[holder] <= 8, f"{held}: bound beside it delay its start"
            continue
        start = parse_time(held["expectedStart"])
        minutes = runtime[holder]
        end = None if minutes is None else start + timedelta(minutes=minutes)
        held_on.setdefault(name, []).append((start, end, gpus[holder]))
    for name, spans in held_on.items():
        # At each reservation's start, the pods still there and every reservation holding
        # room then fit the node: reservations never overlap in time on a node's room, and
        # the pods bound beside them never delay their expected start.
        for moment, _, _ in spans:
            staying = 0
            for key in on_node.get(name, []):
                begun = parse_time(started[key]) if key in started else NOW
                minutes = runtime[key]
                if minutes is None or begun + timedelta(minutes=minutes) > moment:
                    staying += gpus[key]
            holding = sum(n for s, e, n in spans if s <= moment and (e is None or moment < e))
            assert staying + holding <= 8, f"{name} at {moment}: {spans} delayed or overlap"
