"""The pods Backfill's tests build: GPU pods stating a runtime (docs/backfill.md) or none,
running on a node since they started, or waiting since they were created."""

from __future__ import annotations

from typing import Any

from tests.builders import pod

RUNTIME = "batchsched.io/max-runtime"
OLD = "2026-11-22T09:00:00Z"  # an hour before NOW (tests/conftest.py): past reserveAfterSeconds
STARTED = "2026-11-22T09:30:00Z"  # half an hour before NOW


def gpus(count: int) -> dict[str, str]:
    return {"nvidia.com/gpu": str(count)}


def stating(runtime: str | None) -> dict[str, str]:
    """The annotations of a pod stating `runtime` (None: stating none)."""
    return {RUNTIME: runtime} if runtime else {}


def running(
    name: str,
    count: int,
    runtime: str | None = None,
    *,
    on: str = "n1",
    started: str = STARTED,
    **more: Any,
) -> dict[str, Any]:
    """A pod of `count` GPUs running on `on` since `started`, stating `runtime`."""
    return pod(
        name,
        node_name=on,
        phase="Running",
        annotations=stating(runtime),
        scheduled_at=started,
        extra_requests=gpus(count),
        **more,
    )


def waiting(
    name: str, count: int, runtime: str | None = None, created: str = OLD, **more: Any
) -> dict[str, Any]:
    """A pending pod of `count` GPUs created at `created`, stating `runtime`."""
    return pod(
        name, annotations=stating(runtime), created=created, extra_requests=gpus(count), **more
    )
