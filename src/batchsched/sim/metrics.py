"""What a run measured: per job, per priority class and for the cluster over time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from batchsched.sim.queue_metrics import QueueTimeline, queue_summary
from batchsched.sim.stats import spread, time_average
from batchsched.sim.workload import GPU, GPU_MILLI


@dataclass(slots=True)
class JobRecord:
    name: str
    priority_class: str
    group: str  # the workload's class for this job, the same in every variant of a scenario
    pods: int
    gpus: float  # all pods together
    gang: bool
    submit: float
    start: float | None = None  # first time any of its work ran
    end: float | None = None
    preemptions: int = 0  # interruptions: a gang counts once however many members went
    # Preemptions of a run that had saved no checkpoint yet: that run made no progress at all
    # (the preemption-toleration KEP's "preempted before the first epoch").
    no_progress_preemptions: int = 0
    lost_gpu_seconds: float = 0.0  # GPU time of work lost since the last checkpoint
    evictions_caused: int = 0  # pods evicted to make room for this job's pods
    queue: str = ""  # its leaf queue, "" for none
    reclaims: int = 0  # preemptions for another queue's pod
    # Preemptions for a reservation, past its stated runtime (docs/backfill.md#broken-promises).
    # Not in the repr, which the benchmarks' decision hashes read (a new count is no new
    # decision).
    broken_promises: int = field(default=0, repr=False)
    reclaim_lost_gpu_seconds: float = 0.0  # the part of lost_gpu_seconds those cost
    held_by_toleration: bool = False  # told at least once that victims tolerate it
    first_bind: float | None = None
    gang_start_delay: float | None = None  # first member bound -> minMember bound (first run)
    # claim (namespace/name) -> the PV VolumeBinding bound it to ("" when it asked for
    # provisioning), for every run of the job: the one-shot `volumeBindings`, per job
    volume_bindings: dict[str, str] = field(default_factory=dict)
    # claim (namespace/name) -> the devices DynamicResources allocated it, for every run of
    # the job (the one-shot `claims`, per job)
    device_allocations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # A gang with a topology key (sim/topology.py): the domains of it its pods spanned at
    # each start.
    domains: list[int] = field(default_factory=list)

    @property
    def wait(self) -> float | None:
        return None if self.start is None else self.start - self.submit

    @property
    def completion(self) -> float | None:
        return None if self.end is None else self.end - self.submit


@dataclass
class Timeline:
    """Step functions sampled whenever they changed: resource use and pending pods per class."""

    resources: list[str]
    classes: list[str]
    times: list[float] = field(default_factory=list)
    used: list[list[float]] = field(default_factory=list)
    pending: list[list[int]] = field(default_factory=list)
    fragmented: list[float] = field(default_factory=list)  # GPUs free on partly used nodes

    def record(
        self, t: float, used: list[float], pending: list[int], fragmented: float = 0.0
    ) -> None:
        """Sample the values at `t`; they are copied only when kept (most samples repeat the
        last), so the caller may pass lists it goes on changing."""
        if (
            self.times
            and self.used[-1] == used
            and self.pending[-1] == pending
            and self.fragmented[-1] == fragmented
        ):
            return
        if self.times and self.times[-1] == t:
            self.used[-1] = list(used)
            self.pending[-1] = list(pending)
            self.fragmented[-1] = fragmented
            return
        self.times.append(t)
        self.used.append(list(used))
        self.pending.append(list(pending))
        self.fragmented.append(fragmented)


@dataclass
class BackfillRecord:
    """What reservations did in a run (docs/backfill.md), by job name."""

    # The expected start of each job's first reservation (seconds since the start), by
    # JobRecord.name.
    expected_start: dict[str, float] = field(default_factory=dict)
    # Jobs with a pod bound on a node reserved for another job.
    backfilled: set[str] = field(default_factory=set)


@dataclass
class RunResult:
    name: str
    seed: int
    jobs: list[JobRecord]
    timeline: Timeline
    capacity: dict[str, float]  # allocatable per tracked resource, whole cluster
    end_time: float
    decisions: dict[str, int]
    warnings: list[str]
    wall_seconds: float = 0.0
    node_gpus: float = 0.0  # GPUs of the largest node: a job whose pods each need that many
    # takes whole nodes, which is what GPU fragmentation delays
    queues: QueueTimeline | None = None  # per-queue shares, when the scenario has queues
    backfill: BackfillRecord = field(default_factory=BackfillRecord)


SIZE_CLASSES = ("1 GPU", "partial node", "whole node", "multi-node")
# The largest jobs, also counted as multi-node: at least four nodes' worth of GPUs.
LARGE = "4+ nodes"


def size_class(job: JobRecord, node_gpus: float) -> str | None:
    """A GPU job's size against the largest node: one GPU, part of a node, a whole node, or
    more than one node; None for a job without GPUs."""
    if job.gpus <= 0 or node_gpus <= 0:
        return None
    if job.gpus <= 1:
        return SIZE_CLASSES[0]
    if job.gpus < node_gpus:
        return SIZE_CLASSES[1]
    return SIZE_CLASSES[2] if job.gpus == node_gpus else SIZE_CLASSES[3]


def backfill_summary(result: RunResult) -> dict[str, Any]:
    """Waits per size class, the jobs backfilled, and how far reserved jobs started from
    their first expected start (actual minus expected: positive is late)."""
    by_size: dict[str, list[float]] = {name: [] for name in (*SIZE_CLASSES, LARGE)}
    for job in result.jobs:
        size = size_class(job, result.node_gpus)
        if size is not None and (w := job.wait) is not None:
            by_size[size].append(w)
            if job.gpus >= 4 * result.node_gpus:
                by_size[LARGE].append(w)
    starts = {j.name: j.start for j in result.jobs}
    errors = [
        started - expected
        for name, expected in result.backfill.expected_start.items()
        if (started := starts.get(name)) is not None
    ]
    return {
        "wait_seconds_by_size": {name: spread(waits) for name, waits in by_size.items()},
        "jobs_by_size": {name: len(waits) for name, waits in by_size.items()},
        "backfilled_jobs": len(result.backfill.backfilled),
        "broken_promises_evicted": sum(job.broken_promises for job in result.jobs),
        "reserved_jobs": len(result.backfill.expected_start),
        "start_error_seconds": spread(errors),
        "start_error_abs_seconds": spread([abs(e) for e in errors]),
    }


def tracked_resources(names: list[str]) -> list[str]:
    """The resources worth plotting: cpu, memory, GPUs and any other extended resource."""
    return [n for n in names if n != "pods"]


def class_summary(jobs: list[JobRecord], end: float) -> dict[str, dict[str, Any]]:
    """Per workload class (see JobRecord.group), naming the PriorityClass(es) the jobs had;
    `submitted` counts the jobs whose submit time the run reached (`end`)."""
    by_class: dict[str, list[JobRecord]] = {}
    for job in jobs:
        by_class.setdefault(job.group, []).append(job)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(by_class):
        group = by_class[name]
        waits = [w for j in group if (w := j.wait) is not None]
        completions = [c for j in group if (c := j.completion) is not None]
        out[name] = {
            "priority_classes": sorted({j.priority_class for j in group}),
            "jobs": len(group),
            "submitted": sum(1 for j in group if j.submit <= end),
            "started": len(waits),
            "finished": len(completions),
            "wait_seconds": spread(waits),
            "completion_seconds": spread(completions),
            "preemptions": sum(j.preemptions for j in group),
            "no_progress_preemptions": sum(j.no_progress_preemptions for j in group),
            "lost_gpu_hours": sum(j.lost_gpu_seconds for j in group) / 3600.0,
            "preempting_jobs": sum(1 for j in group if j.evictions_caused),
            "held_by_toleration_jobs": sum(1 for j in group if j.held_by_toleration),
        }
    return out


def preemptor_summary(jobs: list[JobRecord]) -> dict[str, Any]:
    """What preemption policy costs the classes that preempt: the classes with a job that
    evicted a pod or was held back by a toleration, their jobs' waits, and how many of their
    jobs a toleration held back."""
    classes = sorted({j.group for j in jobs if j.evictions_caused or j.held_by_toleration})
    mine = [j for j in jobs if j.group in classes]
    waits = [w for j in mine if (w := j.wait) is not None]
    return {
        "classes": classes,
        "jobs": len(mine),
        "wait_seconds": spread(waits),
        "held_by_toleration_jobs": sum(1 for j in mine if j.held_by_toleration),
    }


def cluster_summary(result: RunResult) -> dict[str, Any]:
    tl = result.timeline
    end = result.end_time
    used = np.asarray(tl.used, dtype=np.float64).reshape(len(tl.times), len(tl.resources))
    pending = np.asarray(tl.pending, dtype=np.float64).reshape(len(tl.times), len(tl.classes))
    avg_used = time_average(tl.times, used, end)
    utilisation = {
        r: (float(avg_used[i]) / result.capacity[r] if result.capacity.get(r) else 0.0)
        for i, r in enumerate(tl.resources)
    }
    delays = [d for j in result.jobs if (d := j.gang_start_delay) is not None]
    fragmented = np.asarray(tl.fragmented, dtype=np.float64).reshape(len(tl.times), 1)
    whole_node = [
        w
        for j in result.jobs
        if result.node_gpus and j.pods and j.gpus / j.pods >= result.node_gpus
        if (w := j.wait) is not None
    ]
    total_pending = pending.sum(axis=1) if pending.size else np.zeros(0)
    return {
        "utilisation": utilisation,
        "pending_pods_mean": float(time_average(tl.times, total_pending[:, None], end)[0])
        if total_pending.size
        else 0.0,
        "pending_pods_max": int(total_pending.max()) if total_pending.size else 0,
        "gpu_fragmentation": {
            "mean": float(time_average(tl.times, fragmented, end)[0]) if tl.times else 0.0,
            "max": float(fragmented.max()) if fragmented.size else 0.0,
        },
        "whole_node_gpu_jobs": len(whole_node),
        "whole_node_gpu_wait_seconds": spread(whole_node),
        "gang_jobs": sum(1 for j in result.jobs if j.gang),
        "gang_start_delay_seconds": spread(delays),
        **topology_summary(result.jobs),
    }


def topology_summary(jobs: list[JobRecord]) -> dict[str, Any]:
    """For runs with topology gangs (sim/topology.py): the domains each spanned when it
    started, how many started inside one, and their waits from submission to start."""
    placed = [j for j in jobs if j.domains]
    if not placed:
        return {}
    spans = [float(d) for j in placed for d in j.domains]
    waits = [w for j in placed if (w := j.wait) is not None]
    return {
        "topology": {
            "gangs_started": len(placed),
            "domains_spanned": {**spread(spans), "max": max(spans)},
            "starts_in_one_domain": sum(1 for s in spans if s == 1),
            "starts": len(spans),
            "wait_seconds": spread(waits),
        }
    }


def run_summary(result: RunResult) -> dict[str, Any]:
    jobs = result.jobs
    finished = [j for j in jobs if j.end is not None]
    return {
        "name": result.name,
        "seed": result.seed,
        "simulated_seconds": result.end_time,
        "wall_seconds": round(result.wall_seconds, 3),
        "jobs": {
            "total": len(jobs),
            # A run stopped by `until` has not reached every job: compare with these.
            "submitted": sum(1 for j in jobs if j.submit <= result.end_time),
            "started": sum(1 for j in jobs if j.start is not None),
            "finished": len(finished),
        },
        "preemptions": sum(j.preemptions for j in jobs),
        "no_progress_preemptions": sum(j.no_progress_preemptions for j in jobs),
        "lost_gpu_hours": sum(j.lost_gpu_seconds for j in jobs) / 3600.0,
        "classes": class_summary(jobs, result.end_time),
        "preemptors": preemptor_summary(jobs),
        "cluster": cluster_summary(result),
        "backfill": backfill_summary(result),
        "decisions": dict(sorted(result.decisions.items())),
        "warnings": result.warnings,
        "queues": None
        if result.queues is None
        else queue_summary(result.queues, jobs, result.end_time),
    }


def gpu_resource(resources: list[str]) -> str | None:
    """The resource that stands for GPUs in this cluster, if any."""
    for name in (GPU, GPU_MILLI):
        if name in resources:
            return name
    return None
