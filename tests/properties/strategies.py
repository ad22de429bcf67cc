"""Hypothesis strategies for random but valid clusters (manifests built as dicts)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, priority_class
from tests.conftest import NOW

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Exists"}


@st.composite
def clusters(draw: st.DrawFn, max_nodes: int = 6, max_pods: int = 14) -> list[dict[str, Any]]:
    """Nodes, priority classes, running pods that fit, and pending pods."""
    manifests: list[dict[str, Any]] = [
        priority_class("low", 10),
        priority_class("mid", 100),
        priority_class("high", 1000),
    ]
    room: dict[str, list[int]] = {}
    for i in range(draw(st.integers(1, max_nodes))):
        cpu = draw(st.sampled_from([2, 4, 8]))
        gpus = draw(st.sampled_from([0, 0, 2, 4]))
        name = f"n{i}"
        slots = draw(st.integers(2, 8))
        room[name] = [cpu * 1000, 16, gpus, slots]
        manifests.append(
            node(
                name,
                cpu=str(cpu),
                memory="16Gi",
                pods=str(slots),
                labels={"zone": draw(st.sampled_from(["a", "b"]))},
                taints=[TAINT] if gpus and draw(st.booleans()) else None,
                nvidia_com__gpu=str(gpus),
            )
        )
    for j in range(draw(st.integers(0, max_pods))):
        cpu_m = draw(st.sampled_from([250, 500, 1000, 2000, 3000]))
        mem_gi = draw(st.integers(1, 6))
        gpus = draw(st.sampled_from([0, 0, 0, 1, 2]))
        running_on = draw(st.sampled_from([None, *sorted(room)]))
        fits = (
            running_on is not None
            and room[running_on][0] >= cpu_m
            and room[running_on][1] >= mem_gi
            and room[running_on][2] >= gpus
            and room[running_on][3] >= 1
        )
        extra = {"nvidia.com/gpu": str(gpus)} if gpus else {}
        common: dict[str, Any] = {
            "cpu": f"{cpu_m}m",
            "memory": f"{mem_gi}Gi",
            "priority_class": draw(st.sampled_from(["low", "mid", "high"])),
            "extra_requests": extra,
            "created": f"2026-11-22T0{draw(st.integers(0, 9))}:00:00Z",
        }
        if fits and running_on is not None:
            room[running_on][0] -= cpu_m
            room[running_on][1] -= mem_gi
            room[running_on][2] -= gpus
            room[running_on][3] -= 1
            manifests.append(
                pod(f"run-{j}", node_name=running_on, scheduled_at="2026-11-22T08:00:00Z", **common)
            )
        else:
            manifests.append(
                pod(
                    f"pend-{j}",
                    tolerations=[TOLERATION] if draw(st.booleans()) else None,
                    node_selector={"zone": "a"} if draw(st.integers(0, 4)) == 0 else None,
                    **common,
                )
            )
    return manifests


# A pod's stated runtime in minutes, or none (docs/backfill.md).
BOUNDS = st.one_of(st.none(), st.sampled_from([10, 30, 45, 60, 90, 120, 240]))
GPUS = st.integers(1, 8)
FEW_NODES = st.integers(1, 4)


def stated(minutes: int | None) -> dict[str, str]:
    """The annotations stating `minutes` as a pod's runtime (none for None)."""
    return {} if minutes is None else {"batchsched.io/max-runtime": f"{minutes}m"}


@st.composite
def reserving_clusters(
    draw: st.DrawFn,
    sizes: st.SearchStrategy[int] = GPUS,
    running: int = 2,
    pending: int = 8,
    nodes: st.SearchStrategy[int] = FEW_NODES,
) -> list[dict[str, Any]]:
    """GPU nodes (`nodes` of them) with up to `running` pods each that state runtimes (or
    none), and up to `pending` pending pods of `sizes` GPUs that have waited long enough to
    reserve (or not), stating runtimes (or none): reservations hold room, some pods
    backfill, others are kept off (docs/backfill.md)."""
    manifests: list[dict[str, Any]] = []
    for i in range(draw(nodes)):
        manifests.append(node(f"n{i}", cpu="64", nvidia_com__gpu="8"))
        for j, (gpus, minutes) in enumerate(
            draw(st.lists(st.tuples(st.integers(1, 4), BOUNDS), max_size=running))
        ):
            manifests.append(
                pod(
                    f"r{i}-{j}",
                    node_name=f"n{i}",
                    phase="Running",
                    annotations=stated(minutes),
                    scheduled_at=f"2026-11-22T09:{10 * j:02d}:00Z",
                    extra_requests={"nvidia.com/gpu": str(gpus)},
                )
            )
    for k, (gpus, minutes, old) in enumerate(
        draw(st.lists(st.tuples(sizes, BOUNDS, st.booleans()), max_size=pending))
    ):
        manifests.append(
            pod(
                f"p{k}",
                annotations=stated(minutes),
                created=f"2026-11-22T0{8 if old else 9}:{k:02d}:00Z",
                extra_requests={"nvidia.com/gpu": str(gpus)},
            )
        )
    return manifests


def one_node_reserved() -> list[dict[str, Any]]:
    """n0, half taken until 10:30 by `r0` (4 GPUs, 1 h from 09:30), and `p0` (8 GPUs, old
    enough) that reserves it from then: an example's start."""
    return [
        node("n0", cpu="64", nvidia_com__gpu="8"),
        pod(
            "r0",
            node_name="n0",
            phase="Running",
            annotations=stated(60),
            scheduled_at="2026-11-22T09:30:00Z",
            extra_requests={"nvidia.com/gpu": "4"},
        ),
        pod("p0", created="2026-11-22T08:00:00Z", extra_requests={"nvidia.com/gpu": "8"}),
    ]


def waiting(*pods: tuple[int, int, int | None]) -> list[dict[str, Any]]:
    """Per (k, GPUs, minutes), pod `p{k}` asking so many GPUs and stating that runtime,
    created k minutes past 08:00 (after `one_node_reserved`'s p0): an example's waiting pods."""
    return [
        pod(
            f"p{k}",
            annotations=stated(minutes),
            created=f"2026-11-22T08:0{k}:00Z",
            extra_requests={"nvidia.com/gpu": str(gpus)},
        )
        for k, gpus, minutes in pods
    ]


def run_steps(
    state: ClusterState, scheduler: Scheduler, steps: list[tuple[int, list[int]]]
) -> list[Any]:
    """Each step of the backfill properties: so many minutes later, the pods at those places
    (bound, then pending, by name) gone, then one pass: its decisions and the messages after it."""
    instant = NOW
    decided: list[Any] = []
    for minutes, gone in [(0, []), *steps]:
        instant += timedelta(minutes=minutes)
        present = [*sorted(state.pods.bound), *sorted(state.pods.pending)]
        for i in sorted(set(gone)):
            if i < len(present):
                state.remove_pod(present[i])
        decided.append(scheduler.schedule_pass(instant))
        decided.append([*sorted(scheduler.messages.items())])
    return decided
