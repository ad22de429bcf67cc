"""Small builders for simulator tests: nodes, classes and jobs made in code."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from batchsched.config import SchedulerConfig, default_config
from batchsched.objects.records import Node, PriorityClass
from batchsched.sim.engine import Simulation
from batchsched.sim.workload import GPU, JobSpec

START = datetime(2026, 11, 22, tzinfo=UTC)


def gpu_node(name: str, gpus: int = 8) -> Node:
    return Node(
        name=name, allocatable={"cpu": 64_000, "memory": 512 * 2**30, "pods": 110, GPU: gpus}
    )


def job(
    name: str, gpus: int = 8, work: float = 100.0, submit: float = 0.0, **extra: Any
) -> JobSpec:
    return JobSpec(
        name=name,
        submit=submit,
        pods=extra.pop("pods", 1),
        requests={GPU: gpus, "pods": 1},
        work=work,
        **extra,
    )


TOLERATION = "preemption-toleration.scheduling.x-k8s.io"


def classes() -> list[PriorityClass]:
    tolerant = {
        f"{TOLERATION}/minimum-preemptable-priority": "10000",
        f"{TOLERATION}/toleration-seconds": "600",
    }
    return [
        PriorityClass("high", 9000),
        PriorityClass("low", 8000),
        PriorityClass("low-non-preempted-10min", 8000, annotations=tolerant),
    ]


def simulation(
    nodes: list[Node],
    jobs: list[JobSpec],
    until: float | None = None,
    config: SchedulerConfig | None = None,
) -> Simulation:
    return Simulation(
        "test", nodes, classes(), jobs, config or default_config(), START, until=until
    )
