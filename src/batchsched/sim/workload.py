"""What the simulator runs: jobs as a controller would create them.

A job is N pods with the same requests and priority class, an amount of work (seconds of run
time) and optionally a checkpoint interval. A gang job (a PodGroup with minMember) makes
progress only while at least minMember of its pods run, and restarts whole when one is
preempted; the pods of any other job are independent workers that restart one by one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from batchsched.objects.errors import shown
from batchsched.objects.records import (
    PodAffinity,
    PodClaim,
    SpreadConstraint,
    Toleration,
    TopologyRequest,
)
from batchsched.objects.volumes import PersistentVolumeClaim

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
JOB_LABEL = "batchsched.sim/job"
GPU = "nvidia.com/gpu"
# Shared GPUs (the Alibaba trace's gpu_milli): thousandths of a GPU as an extended resource.
GPU_MILLI = "alibaba.com/gpu-milli"

_DURATION = re.compile(
    r"^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$"
)


@dataclass(frozen=True, slots=True)
class JobTopology:
    """A gang job's topology (sim/topology.py reads it)."""

    request: TopologyRequest  # what the job's PodGroup asks
    key: str  # the key its span is counted by ("": not counted)
    slowdown: float  # run time factor per extra domain spanned


NO_JOB_TOPOLOGY = JobTopology(TopologyRequest(), "", 1.0)


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    submit: float  # seconds after the simulation start
    pods: int
    requests: dict[str, int]  # per pod, in base units (CPU in millicores), `pods` included
    work: float  # seconds of run time the job needs
    priority_class: str = ""
    namespace: str = "default"
    min_member: int | None = None  # set: a gang job with a PodGroup of this minMember
    checkpoint_interval: float | None = None  # None: no checkpoints, a preemption loses all
    restart_delay: float = 0.0  # from the last pod gone to the new pods created
    grace_seconds: int = 30  # terminationGracePeriodSeconds
    scheduler_name: str = "batchsched"
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    # Pod labels beyond the job label, and inter-pod placement (affinity, spread) of its pods.
    labels: dict[str, str] = field(default_factory=dict)
    pod_affinity: PodAffinity | None = None
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    # Generic ephemeral volumes: (volume name, the claim each pod gets, named `<pod>-<volume>`).
    claim_templates: tuple[tuple[str, PersistentVolumeClaim], ...] = ()
    # DRA: each pod's spec.resourceClaims, from templates (its claims `<pod>-<entry>`).
    device_claims: tuple[PodClaim, ...] = ()
    # The class the workload gave the job, when a scenario variant renamed it: results are
    # compared across variants by this name.
    workload_class: str = ""
    queue: str = ""  # the leaf Queue its pods join (label batchsched.io/queue); "": none
    topology: JobTopology = NO_JOB_TOPOLOGY  # a gang's (sim/topology.py)
    # The maximum runtime its pods state (seconds; None: none), which reservations plan with
    # (docs/backfill.md): the scenario's `work.statedRuntime`.
    stated_runtime: int | None = None

    @property
    def gang(self) -> bool:
        return self.min_member is not None

    @property
    def gpus_per_pod(self) -> float:
        return gpus_of(self.requests)

    def with_class(self, classes: dict[str, str]) -> JobSpec:
        """The same job under a renamed priority class (a scenario variant's class map)."""
        renamed = classes.get(self.priority_class)
        if renamed is None:
            return self
        return replace(
            self, priority_class=renamed, workload_class=self.workload_class or self.priority_class
        )


def gpus_of(requests: dict[str, int]) -> float:
    """GPUs a request holds: whole GPUs, else shared thousandths."""
    whole = requests.get(GPU, 0)
    return float(whole) if whole else requests.get(GPU_MILLI, 0) / 1000.0


# A century: longer than any simulation, short enough that virtual times stay dates.
MAX_DURATION = 100 * 365 * 86400.0


def parse_duration(value: object) -> float:
    """Seconds from a number or a string like `90`, `45s`, `10m`, `1h30m`, `2d`: finite, not
    negative and at most MAX_DURATION."""
    if isinstance(value, bool):
        raise ValueError(f"{shown(value)} is not a duration")
    if isinstance(value, int | float):
        # An int beyond any float is simply too long.
        seconds = float(value) if isinstance(value, float) or value <= MAX_DURATION else math.inf
    elif not isinstance(value, str) or not value.strip():
        raise ValueError(f"{shown(value)} is not a duration (e.g. 90, 45s, 10m, 1h30m, 2d)")
    else:
        seconds = _duration_text(value)
    if math.isnan(seconds):
        raise ValueError(f"{shown(value)} is not a duration")
    if seconds < 0:
        raise ValueError(f"{shown(value)} is negative")
    if seconds > MAX_DURATION:
        raise ValueError(f"{shown(value)} is longer than 100 years")
    return seconds


def _duration_text(value: str) -> float:
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        match = _DURATION.match(text)
        if match is None or not any(match.groups()):
            raise ValueError(
                f"{shown(value)} is not a duration (e.g. 90, 45s, 10m, 1h30m, 2d)"
            ) from None
        d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
        return d * 86400 + h * 3600 + m * 60 + s


def format_duration(seconds: float) -> str:
    """A short human form: 45s, 12m, 3.5h, 2.1d."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
