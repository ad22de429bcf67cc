"""Alibaba GPU cluster trace v2023 ("openb", the FGD paper's default trace).

Pods: name, cpu_milli, memory_mib, num_gpu, gpu_milli (share of each GPU), qos, pod_phase,
creation_time, deletion_time, scheduled_time (seconds). Each pod is a one-pod job submitted at
creation_time whose work is deletion_time - scheduled_time; pods that never ran (no
scheduled_time) have no known work and are left out. qos maps to a PriorityClass through
`qosClasses`.

GPUs: a whole-GPU pod requests `nvidia.com/gpu`; every GPU pod also requests its share in
thousandths (`alibaba.com/gpu-milli`), so shared-GPU pods pack by share. Nodes (`nodes`, the
node CSV: sn, cpu_milli, memory_mib, gpu, model) offer both, and a `gpu-model` label.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from batchsched.objects.quantity import CPU, MEMORY, PODS
from batchsched.objects.records import Node
from batchsched.sim.fields import Fields, ScenarioError, class_table
from batchsched.sim.traces.common import (
    COMMON_OPTIONS,
    CsvRows,
    JobBehaviour,
    Trace,
    TraceFormat,
)
from batchsched.sim.workload import GPU, GPU_MILLI, JobSpec

POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "qos",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu")
DEFAULT_QOS_CLASSES = {"LS": "high", "Guaranteed": "high", "Burstable": "medium", "BE": "low"}
MIB = 2**20
PODS_PER_NODE = 110


def load(options: Fields) -> Trace:
    path = options.file("path")
    qos_classes = options.value("qosClasses", class_table, DEFAULT_QOS_CLASSES)
    behaviour = JobBehaviour.read(options)
    nodes = read_nodes(options.file("nodes")) if options.has("nodes") else []
    jobs = read_pods(path, qos_classes, behaviour)
    # Its times are seconds from an undisclosed origin: the clock starts at the first pod.
    first = min(job.submit for job in jobs)
    return Trace([replace(job, submit=job.submit - first) for job in jobs], nodes)


def read_pods(path: Path, qos_classes: dict[str, str], behaviour: JobBehaviour) -> list[JobSpec]:
    rows = CsvRows(path, POD_COLUMNS, behaviour.queues)
    jobs: list[JobSpec] = []
    for row in rows:
        if not row["scheduled_time"]:
            continue  # never ran: its work is unknown
        qos = row["qos"]
        if qos not in qos_classes:
            raise rows.fail("qos", f"{qos!r} has no class in qosClasses ({', '.join(qos_classes)})")
        created = rows.number(row, "creation_time")
        started = rows.number(row, "scheduled_time")
        deleted = rows.number(row, "deletion_time")
        gpus = rows.number(row, "num_gpu", int)
        share = rows.number(row, "gpu_milli", int) if gpus else 0
        requests = {
            CPU: rows.number(row, "cpu_milli", int),
            MEMORY: rows.number(row, "memory_mib", int) * MIB,
            PODS: 1,
        }
        if gpus:
            requests[GPU_MILLI] = gpus * share
            if share >= 1000:
                requests[GPU] = gpus
        jobs.append(
            JobSpec(
                name=row["name"],
                submit=created,
                pods=1,
                requests=requests,
                work=max(0.0, deleted - started),
                priority_class=qos_classes[qos],
                namespace=behaviour.namespace,
                checkpoint_interval=behaviour.checkpoint_interval,
                restart_delay=behaviour.restart_delay,
                queue=behaviour.queues.queue(rows, row),
            )
        )
        if behaviour.limit is not None and len(jobs) >= behaviour.limit:
            break
    if not jobs:
        raise ScenarioError(f"{path}: no pod that ran (all lack scheduled_time)")
    return jobs


def read_nodes(path: Path) -> list[Node]:
    rows = CsvRows(path, NODE_COLUMNS)
    nodes = []
    for row in rows:
        gpus = rows.number(row, "gpu", int)
        allocatable = {
            CPU: rows.number(row, "cpu_milli", int),
            MEMORY: rows.number(row, "memory_mib", int) * MIB,
            PODS: PODS_PER_NODE,
        }
        if gpus:
            allocatable[GPU] = gpus
            allocatable[GPU_MILLI] = gpus * 1000
        model = row.get("model") or ""
        nodes.append(
            Node(
                name=row["sn"],
                allocatable=allocatable,
                labels={"gpu-model": model} if model else {},
            )
        )
    return nodes


OPENB = TraceFormat("openb", (*COMMON_OPTIONS, "nodes", "qosClasses"), load)
