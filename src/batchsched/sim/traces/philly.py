"""Microsoft Philly job trace (2017, as processed for the Pollux paper).

Columns: timestamp, duration (s), num_gpus, gpu_time, cluster (a hashed tenant: `queueColumn:
cluster` puts each tenant's jobs in a queue of that name). Each job becomes alike pods of
at most `gpusPerNode` GPUs each; a job larger than one node is a gang of those pods (a 32-GPU
job on 8-GPU nodes: 4 pods of 8 GPUs, minMember 4). The trace has no CPU, memory or priority: pods
request GPUs only and all get `priorityClass`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from batchsched.objects.quantity import PODS
from batchsched.sim.fields import Fields, class_name, positive_int
from batchsched.sim.traces.common import (
    COMMON_OPTIONS,
    CsvRows,
    JobBehaviour,
    Trace,
    TraceFormat,
)
from batchsched.sim.workload import GPU, JobSpec

COLUMNS = ("timestamp", "duration", "num_gpus")


def load(options: Fields) -> Trace:
    path = options.file("path")
    per_node = options.value("gpusPerNode", positive_int, 8)
    priority_class = options.value("priorityClass", class_name, "")
    behaviour = JobBehaviour.read(options)
    rows = CsvRows(path, COLUMNS, behaviour.queues)
    raw: list[tuple[float, int, float, int, str]] = []  # submit, line order, duration, gpus, queue
    for row in rows:
        try:
            stamp = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=UTC).timestamp()
        except ValueError:
            raise rows.fail("timestamp", f"{row['timestamp']!r} is not a time") from None
        gpus = rows.number(row, "num_gpus", int)
        if gpus < 1:
            raise rows.fail("num_gpus", "must be at least 1")
        queue = behaviour.queues.queue(rows, row)
        raw.append((stamp, len(raw), rows.number(row, "duration"), gpus, queue))
    raw.sort()
    if behaviour.limit is not None:
        raw = raw[: behaviour.limit]
    origin = raw[0][0] if raw else 0.0
    jobs = []
    for i, (stamp, _, duration, gpus, queue) in enumerate(raw):
        pods = _pods_for(gpus, per_node)
        jobs.append(
            JobSpec(
                name=f"philly-{i:05d}",
                submit=stamp - origin,
                pods=pods,
                requests={GPU: gpus // pods, PODS: 1},
                work=duration,
                priority_class=priority_class,
                namespace=behaviour.namespace,
                min_member=pods if pods > 1 else None,
                checkpoint_interval=behaviour.checkpoint_interval,
                restart_delay=behaviour.restart_delay,
                queue=queue,
            )
        )
    return Trace(jobs, [], datetime.fromtimestamp(origin, UTC) if raw else None)


def _pods_for(gpus: int, per_node: int) -> int:
    """The fewest equal pods of at most `per_node` GPUs that hold the job (12 -> 2 x 6)."""
    pods = -(-gpus // per_node)
    while gpus % pods:
        pods += 1
    return pods


PHILLY = TraceFormat("philly", (*COMMON_OPTIONS, "gpusPerNode", "priorityClass"), load)
