"""Broken promises over random GPU clusters (docs/backfill.md#broken-promises): a pod is
evicted for a reservation only if it runs past a runtime it stated by label or annotation,
and never one of the holder's own; every such victim sat on a node of the holder's plan."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.parse import parse_time
from tests.builders import node, pod, pod_group
from tests.conftest import NOW, schedule

# How a running pod states its runtime (minutes): none, the annotation, the Kueue label, or
# activeDeadlineSeconds (which the kubelet enforces).
_STATED = st.sampled_from(["none", "annotation", "label", "deadline"])
_RUNNING = st.tuples(st.integers(1, 8), _STATED, st.sampled_from([10, 30, 60, 90, 120]))
_NODE = st.lists(_RUNNING, max_size=3)
_PENDING = st.lists(st.tuples(st.integers(1, 8), st.integers(1, 2)), min_size=1, max_size=4)


def _running(name: str, on: str, gpus: int, stated: str, minutes: int, started: str) -> Any:
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    extra: dict[str, Any] = {}
    if stated == "annotation":
        annotations["batchsched.io/max-runtime"] = f"{minutes}m"
    elif stated == "label":
        labels["kueue.x-k8s.io/max-exec-time-seconds"] = str(60 * minutes)
    elif stated == "deadline":
        extra["activeDeadlineSeconds"] = 60 * minutes
    return pod(
        name,
        node_name=on,
        phase="Running",
        labels=labels,
        annotations=annotations,
        scheduled_at=started,
        extra_requests={"nvidia.com/gpu": str(gpus)},
        **extra,
    )


@settings(max_examples=80, deadline=None)
@given(
    st.lists(_NODE, min_size=1, max_size=4),
    _PENDING,
    st.lists(st.integers(0, 170), min_size=12, max_size=12),
)
def test_only_broken_promises_are_evicted(
    layout: list[list[tuple[int, str, int]]],
    pending: list[tuple[int, int]],
    ages: list[int],
) -> None:
    manifests: list[dict[str, Any]] = []
    promised: dict[str, tuple[str, int, str]] = {}  # pod key -> how stated, minutes, started
    ages_left = iter(ages)
    for i, running in enumerate(layout):
        manifests.append(node(f"n{i}", nvidia_com__gpu="8"))
        room = 8
        for j, (gpus, stated, minutes) in enumerate(running):
            gpus = min(gpus, room)
            if gpus == 0:
                break
            room -= gpus
            started = (NOW - timedelta(minutes=next(ages_left, 0))).strftime("%Y-%m-%dT%H:%M:%SZ")
            name = f"r{i}-{j}"
            promised[f"default/{name}"] = (stated, minutes, started)
            manifests.append(_running(name, f"n{i}", gpus, stated, minutes, started))
    own: set[str] = set()
    for k, (gpus, members) in enumerate(pending):
        created = f"2026-11-22T08:{k:02d}:00Z"
        if members > 1:
            group = pod_group(f"g{k}", members, namespace="default")
            group["metadata"]["creationTimestamp"] = created
            manifests.append(group)
        for m in range(members):
            name = f"p{k}-{m}"
            own.add(f"default/{name}")
            labels = {"scheduling.x-k8s.io/pod-group": f"g{k}"} if members > 1 else {}
            manifests.append(
                pod(
                    name,
                    labels=labels,
                    created=created,
                    extra_requests={"nvidia.com/gpu": str(gpus)},
                )
            )
    output = schedule(*manifests).to_json()
    for eviction in output["evictions"]:
        if not eviction["reason"].startswith("Backfill: broken promise"):
            continue
        victim = eviction["pod"]
        assert victim not in own
        stated, minutes, started = promised[victim]
        assert stated in ("annotation", "label"), f"{victim} stated {stated}"
        assert NOW - parse_time(started) >= timedelta(minutes=minutes), f"{victim} within bound"
