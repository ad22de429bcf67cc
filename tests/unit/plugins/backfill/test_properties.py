"""Properties of reservations over random GPU clusters (docs/backfill.md): they never overlap,
and the pods bound beside them never delay their expected start."""

from __future__ import annotations

from datetime import timedelta
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

    taken: set[str] = set()
    for held in [r for r in output["reservations"] if r["kind"] == "Backfill"]:
        nodes = set(held["nodes"])
        assert not nodes & taken, "reservations overlap"
        taken |= nodes
        holder = held["holder"].removeprefix("Pod ")
        assert holder not in bound
        if held["expectedStart"] is None:
            continue
        start = parse_time(held["expectedStart"])
        (name,) = held["nodes"]  # a single pod holds one node
        staying = 0
        for key in on_node.get(name, []):
            begun = parse_time(started[key]) if key in started else NOW
            minutes = runtime[key]
            if minutes is None or begun + timedelta(minutes=minutes) > start:
                staying += gpus[key]
        assert staying + gpus[holder] <= 8, f"{held}: bound beside it delay its start"
