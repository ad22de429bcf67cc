"""Scenario files: the cluster, the PriorityClasses and the work of one simulation.

```yaml
name: ml-cluster                  # default: the file name
start: "2026-11-22T00:00:00Z"     # the clock's origin (default: a dated trace's first job,
                                  # else this instant); a trace replays from here
until: 2d                         # optional horizon
seed: 1                           # default seed (--seed overrides)
seeds: 5                          # run on seeds seed..seed+4 (default 1; --seeds overrides)
config: scheduler.yaml            # optional KubeSchedulerConfiguration (relative to this file)
queues: {objects, table, derive}  # Queue objects and derived quotas: sim/queues.py
cluster:
  nodes: [Node manifests]
  pools: [{name, count, allocatable, labels, taints, devices, topology}]  # sim/devices.py,
                                  # sim/topology.py
  deviceClasses: [DeviceClass manifests]
  storage: [StorageClass, PersistentVolume, CSINode, ... manifests]
priorityClasses: [PriorityClass manifests]
work:
  jobs: [{name, submit, pods, requests, class, duration, gang | minMember, volumes,
          resourceClaims, queue, topology, ...}]
  generators: [{name, arrivalsPerHour, from, to | count, duration, pods, requests, class, ...}]
  trace: {format: philly | openb, path, ...importer options}
variants: [{name, classes: {old: new}, config, queues}]   # the same work, run several ways
```

Every error names the file and the field (`work.generators[0].duration: ...`).
"""

from __future__ import annotations

import functools
import math
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from batchsched.objects.documents import load_yaml_file
from batchsched.objects.errors import ManifestError, shown
from batchsched.objects.load import Objects
from batchsched.objects.numbers import number
from batchsched.objects.parse import parse_time, read_node, read_pod, read_priority_class
from batchsched.objects.quantity import PODS, resource_amount
from batchsched.objects.queues import Queue
from batchsched.objects.records import (
    Node,
    PodAffinity,
    PodClaim,
    PriorityClass,
    SpreadConstraint,
    Toleration,
)
from batchsched.objects.runtime_bound import MAX_BOUND_SECONDS
from batchsched.objects.schema import unknown_fields
from batchsched.objects.system_classes import SYSTEM_CLASSES
from batchsched.objects.volume_parse import read_pvc
from batchsched.objects.volumes import (
    WAIT_FOR_FIRST_CONSUMER,
    PersistentVolumeClaim,
    StorageClass,
)
from batchsched.sim.devices import (
    ScenarioDevices,
    check_templates,
    device_classes,
    job_claims,
    pool_slices,
)
from batchsched.sim.distributions import Distribution
from batchsched.sim.fields import (
    MAX_COUNT,
    REQUIRED,
    Fields,
    ScenarioError,
    boolean,
    class_name,
    class_table,
    non_negative_int,
    positive_duration,
    positive_int,
    positive_number,
    string,
)
from batchsched.sim.queues import ScenarioQueues, read_queues
from batchsched.sim.topology import job_topology, pool_labels
from batchsched.sim.traces import TRACE_FORMATS
from batchsched.sim.traces.common import PerSeed, Trace
from batchsched.sim.workload import JobSpec, JobTopology, parse_duration
from batchsched.state.volumes import VolumeObject

_CLUSTER = ("nodes", "pools", "storage", "deviceClasses")
# The storage objects a scenario's cluster may carry.
STORAGE_KINDS = ("StorageClass", "PersistentVolume", "CSINode", "CSIDriver", "CSIStorageCapacity")

_TOP = (
    "name",
    "start",
    "until",
    "seed",
    "seeds",
    "config",
    "cluster",
    "priorityClasses",
    "queues",
    "work",
    "variants",
)
_TEMPLATE = (
    "name",
    "pods",
    "requests",
    "class",
    "duration",
    "gang",
    "minMember",
    "checkpointInterval",
    "restartDelay",
    "terminationGracePeriodSeconds",
    "namespace",
    "schedulerName",
    "nodeSelector",
    "tolerations",
    "labels",
    "affinity",
    "topologySpreadConstraints",
    "volumes",
    "resourceClaims",
    "queue",
    "topology",
)
_JOB = (*_TEMPLATE, "submit")
_GENERATOR = (*_TEMPLATE, "arrivalsPerHour", "from", "to", "count")


@dataclass(frozen=True)
class StatedRuntime:
    """What the jobs' pods state as their maximum runtime (docs/backfill.md): the true
    runtime times `factor` (users over-estimate), none for a share `none` of the jobs; for a
    share `under` of the others, times `under_factor` instead (an under-estimate: the job
    breaks its promise, docs/backfill.md#broken-promises)."""

    factor: Distribution[float]
    none: float
    under: float = 0.0
    under_factor: Distribution[float] = field(
        default_factory=lambda: Distribution(lambda _rng: 0.5)
    )

    def apply(self, jobs: list[JobSpec], seed: int) -> list[JobSpec]:
        """The jobs with their stated runtimes, drawn from a stream of their own: the jobs
        a seed gives are the same with or without them."""
        rng = random.Random(f"stated-runtime-{seed}")
        out = []
        for job in jobs:
            states_none = rng.random() < self.none
            factor = self.factor.draw(rng)
            # Drawn only when asked for: a scenario without `under` gives the same bounds.
            if self.under and rng.random() < self.under:
                factor = self.under_factor.draw(rng)
            if states_none:
                out.append(job)
            else:
                bound = min(MAX_BOUND_SECONDS, max(1, math.ceil(job.work * factor)))
                out.append(replace(job, stated_runtime=bound))
        return out


@dataclass(frozen=True)
class Variant:
    name: str
    classes: dict[str, str] = field(default_factory=dict)
    config: Path | None = None
    # False: the scenario's queues are not in this run's cluster (jobs are still measured per
    # queue, against the same queues' fair shares), to compare a cluster with and without them.
    queues: bool = True


@dataclass
class Scenario:
    name: str
    path: Path
    start: datetime
    until: float | None
    seed: int
    config: Path | None
    nodes: list[Node]
    priority_classes: list[PriorityClass]
    storage: list[VolumeObject]
    devices: ScenarioDevices
    sources: list[Callable[[random.Random], list[JobSpec]]]
    variants: list[Variant]
    # Unknown fields in the Node and PriorityClass manifests, `FILE: path: unknown field "x"`.
    warnings: list[str] = field(default_factory=list)
    seeds: int = 1
    queues: ScenarioQueues | None = None
    stated_runtime: StatedRuntime | None = None
    same_work: bool = False  # every seed gives the same jobs (a trace, nothing drawn)

    def queue_tree(self, jobs: list[JobSpec]) -> list[Queue]:
        """The Queue objects of a workload: the declared ones and those derived from it."""
        return self.queues.tree(jobs, self.nodes) if self.queues is not None else []

    def jobs(self, seed: int) -> list[JobSpec]:
        """The workload for a seed: generated, listed and imported jobs in submit order."""
        rng = random.Random(seed)
        jobs: list[JobSpec] = []
        for source in self.sources:
            try:
                jobs.extend(source(rng))
            except ValueError as err:  # a draw outside its field's range
                raise ScenarioError(f"{self.path}: work: a drawn value {err}") from None
        seen: set[str] = set()
        for job in jobs:
            key = f"{job.namespace}/{job.name}"
            if key in seen:
                raise ScenarioError(f"{self.path}: work: job {key} is defined more than once")
            seen.add(key)
        classes = {pc.name for pc in self.priority_classes}
        known = classes | SYSTEM_CLASSES.keys()  # the API server's own exist everywhere
        for job in jobs:
            if job.priority_class and job.priority_class not in known:
                raise ScenarioError(
                    f"{self.path}: work: job {job.name}: priority class {job.priority_class!r} "
                    f"is not among priorityClasses ({', '.join(sorted(classes)) or 'none'}) "
                    "nor a built-in class"
                )
        jobs.sort(key=lambda j: (j.submit, j.namespace, j.name))
        if self.stated_runtime is not None:
            jobs = self.stated_runtime.apply(jobs, seed)
        return jobs


def trace_search(traces: Path | None) -> tuple[tuple[str, Path], ...]:
    """Where trace paths are looked for after the scenario's folder: $BATCHSCHED_TRACES, then
    --traces DIR."""
    found: list[tuple[str, Path]] = []
    env = os.environ.get("BATCHSCHED_TRACES")
    if env:
        found.append(("BATCHSCHED_TRACES", Path(env)))
    if traces is not None:
        found.append(("--traces", traces))
    return tuple(found)


def load_scenario(path: Path, traces: Path | None = None) -> Scenario:
    raw = load_yaml_file(path)
    top = Fields(path, raw, "", _TOP)
    base = path.parent
    name = top.value("name", string, path.stem)
    start = top.value("start", _time)
    until = top.value("until", positive_duration)
    seed = top.value("seed", non_negative_int, 0)
    seeds = top.value("seeds", positive_int, 1)
    config = top.value("config", lambda v: base / string(v))
    nodes, devices = _cluster(path, raw.get("cluster"))
    storage = _storage(path, raw.get("cluster"))
    classes = _priority_classes(path, top.items("priorityClasses"))
    queues = read_queues(path, raw.get("queues"))
    work = raw.get("work")
    if work is None:
        raise top.fail("work", "is required (jobs, generators or a trace)")
    w = Fields(path, work, "work", ("jobs", "generators", "trace", "statedRuntime"))
    sources: list[Callable[[random.Random], list[JobSpec]]] = []
    for i, job in enumerate(w.items("jobs")):
        job_fields = Fields(path, job, f"work.jobs[{i}]", _JOB)
        sources.append(_explicit_job(job_fields, storage, devices, queues))
    for i, gen in enumerate(w.items("generators")):
        gen_fields = Fields(path, gen, f"work.generators[{i}]", _GENERATOR)
        sources.append(_generator(gen_fields, storage, devices, queues))
    check_templates(path, devices.templates)
    # Nothing drawn per seed: a trace replayed as it is, alone (listed jobs may draw fields).
    same_work = False
    if w.has("trace"):
        trace = _trace(path, w.raw["trace"], trace_search(traces))
        _check_trace_queues(path, trace, queues)
        nodes.extend(trace.nodes)
        trace_jobs = trace.jobs
        if start is None:
            start = trace.origin  # the clock starts at the trace's first job
        else:
            trace_jobs = trace.jobs_from(start)
        same_work = not sources and trace.per_seed is None and not w.has("statedRuntime")
        sources.append(_trace_source(trace_jobs, trace.per_seed))
    if not sources:
        raise w.fail("", "needs jobs, generators or a trace")
    stated = _stated_runtime(path, w.raw["statedRuntime"]) if w.has("statedRuntime") else None
    if not nodes:
        raise top.fail("cluster", "has no nodes (give nodes or pools, or a trace with nodes)")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise top.fail("cluster", f"node {dup} is defined more than once")
    variants = _variants(path, top.items("variants"), base)
    _check_variant_classes(path, variants, classes)
    warnings = [
        f"{path}: {where}: unknown field {field_path!r}"
        for key, kind in (("cluster.nodes", "Node"), ("priorityClasses", "PriorityClass"))
        for where, manifest in _manifests(raw, key)
        for field_path in unknown_fields(kind, manifest)
    ]
    if start is None:
        start = datetime.now(UTC).replace(microsecond=0)
    return Scenario(
        name,
        path,
        start,
        until,
        seed,
        config,
        nodes,
        classes,
        storage,
        devices,
        sources,
        variants,
        warnings=warnings,
        seeds=seeds,
        queues=queues,
        stated_runtime=stated,
        same_work=same_work,
    )


def _trace_source(
    jobs: list[JobSpec], per_seed: PerSeed | None
) -> Callable[[random.Random], list[JobSpec]]:
    if per_seed is None:
        return lambda _rng: list(jobs)
    return lambda rng: per_seed.draw(jobs, rng)


def _check_trace_queues(path: Path, trace: Trace, queues: ScenarioQueues) -> None:
    """Every queue the trace's queue column names must be one the scenario has."""
    for name in sorted({job.queue for job in trace.jobs if job.queue}):
        problem = queues.problem(name)
        if problem:
            raise ScenarioError(f"{path}: work.trace.queueColumn: a value {problem}")


def _stated_runtime(path: Path, raw: Any) -> StatedRuntime:
    """`work.statedRuntime: {factor: 2, none: 0.1, under: 0.1, underFactor: 0.5}`: `factor`
    a distribution of positive numbers (default 2), `underFactor` one of numbers between 0 and
    1, both excluded (default 0.5: a factor of 1 or more is no under-estimate), `none` and
    `under` shares of the jobs from 0 to 1 (default 0)."""
    f = Fields(path, raw, "work.statedRuntime", ("factor", "none", "under", "underFactor"))
    factor = f.dist("factor", positive_number, 2.0)
    share = f.value("none", _share, 0.0)
    under = f.value("under", _share, 0.0)
    under_factor = f.raw.get("underFactor")
    if isinstance(under_factor, Mapping) and set(under_factor) & {"exponential", "lognormal"}:
        # Their draws have no upper bound, so some would be 1 or more in the middle of a run.
        raise f.fail("underFactor", "must be a value, uniform or choice: its draws stay below 1")
    return StatedRuntime(factor, share, under, f.dist("underFactor", _under_factor, 0.5))


def _under_factor(value: Any) -> float:
    factor = number(value)
    if not 0 < factor < 1:
        raise ValueError(f"must be greater than 0 and less than 1, got {shown(value)}")
    return factor


def _share(value: Any) -> float:
    return number(value, 0.0, 1.0)


def _manifests(raw: Any, key: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The manifests under a dotted key of the scenario, each with its position."""
    value = raw
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    items = value if isinstance(value, list) else []
    return [(f"{key}[{i}]", m) for i, m in enumerate(items) if isinstance(m, Mapping)]


def _check_variant_classes(
    path: Path, variants: list[Variant], classes: list[PriorityClass]
) -> None:
    """A variant maps classes to classes: both must exist, or the run would quietly differ."""
    known = {pc.name for pc in classes}
    for i, variant in enumerate(variants):
        for old, new in variant.classes.items():
            for name in (old, new):
                if name not in known:
                    raise ScenarioError(
                        f"{path}: variants[{i}].classes: PriorityClass {name!r} is not among "
                        f"priorityClasses ({', '.join(sorted(known)) or 'none'})"
                    )


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"must be an RFC 3339 time, got {shown(value)}")
    return parse_time(value)


def _cluster(path: Path, raw: Any) -> tuple[list[Node], ScenarioDevices]:
    devices = ScenarioDevices()
    if raw is None:
        return [], devices
    c = Fields(path, raw, "cluster", _CLUSTER)
    devices.classes = device_classes(c)
    nodes: list[Node] = []
    for i, manifest in enumerate(c.items("nodes")):
        try:
            nodes.append(read_node(manifest if isinstance(manifest, Mapping) else {}))
        except ManifestError as err:
            raise c.fail(f"nodes[{i}]", str(err)) from None
    for i, pool_raw in enumerate(c.items("pools")):
        pool = Fields(
            path,
            pool_raw,
            f"cluster.pools[{i}]",
            ("name", "count", "allocatable", "labels", "taints", "devices", "topology"),
        )
        name = pool.value("name", string, REQUIRED)
        count = pool.value("count", positive_int, REQUIRED)
        if not isinstance(pool.raw.get("allocatable"), Mapping):
            raise pool.fail("allocatable", "is required: a mapping of resource to quantity")
        width = max(3, len(str(count - 1)))
        names = [f"{name}-{n:0{width}d}" for n in range(count)]
        devices.slices.extend(pool_slices(pool, names))
        labels = pool.raw.get("labels") or {}
        if not isinstance(labels, Mapping):
            raise pool.fail("labels", "must be a mapping of label keys to values")
        levels = pool_labels(pool, name, count)
        for n in range(count):
            manifest = {
                "metadata": {
                    "name": f"{name}-{n:0{width}d}",
                    "labels": {**labels, **levels[n]},
                },
                "spec": {"taints": pool.raw.get("taints") or []},
                "status": {"allocatable": {"pods": 110, **pool.raw["allocatable"]}},
            }
            try:
                nodes.append(read_node(manifest))
            except ManifestError as err:
                raise pool.fail(err.field, err.what) from None
    return nodes, devices


def _storage(path: Path, raw: Any) -> list[VolumeObject]:
    """`cluster.storage`: StorageClasses, PersistentVolumes, CSINodes, CSIDrivers and
    CSIStorageCapacities, as manifests (the jobs' claims come from their `volumes`)."""
    if raw is None:
        return []
    c = Fields(path, raw, "cluster", _CLUSTER)
    objects = Objects()
    for i, manifest in enumerate(c.items("storage")):
        kind = manifest.get("kind") if isinstance(manifest, Mapping) else None
        if kind not in STORAGE_KINDS:
            raise c.fail(f"storage[{i}].kind", f"must be one of {', '.join(STORAGE_KINDS)}")
        try:
            objects.add(str(kind), manifest)
        except ManifestError as err:
            raise c.fail(f"storage[{i}]", str(err)) from None
    try:
        objects.check_unique("")
    except ManifestError as err:
        raise c.fail("storage", str(err)) from None
    return [
        *objects.storage_classes,
        *objects.volumes,
        *objects.csi_nodes,
        *objects.csi_drivers,
        *objects.capacities,
    ]


def _claim_templates(
    f: Fields, namespace: str, storage: list[VolumeObject]
) -> tuple[tuple[str, PersistentVolumeClaim], ...]:
    """A job's generic ephemeral volumes: each pod gets its own claim from the template, of a
    WaitForFirstConsumer class of `cluster.storage` (the scheduler binds those; nothing in
    the simulator binds Immediate claims)."""
    delayed = {
        obj.name
        for obj in storage
        if isinstance(obj, StorageClass) and obj.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER
    }
    out = []
    for i, volume in enumerate(f.items("volumes")):
        v = Fields(f.source, volume, f.path(f"volumes[{i}]"), ("name", "ephemeral"))
        name = v.value("name", string, REQUIRED)
        template = (v.raw.get("ephemeral") or {}).get("volumeClaimTemplate")
        if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
            raise v.fail("ephemeral.volumeClaimTemplate.spec", "is required: a claim's spec")
        manifest = {"metadata": {"name": name, "namespace": namespace}, "spec": template["spec"]}
        try:
            claim = read_pvc(manifest)
        except ManifestError as err:
            raise v.fail(f"ephemeral.volumeClaimTemplate.{err.field}", err.what) from None
        if claim.storage_class not in delayed:
            raise v.fail(
                "ephemeral.volumeClaimTemplate.spec.storageClassName",
                f"{claim.storage_class or 'none'}: must name a WaitForFirstConsumer "
                "StorageClass of cluster.storage",
            )
        out.append((name, claim))
    return tuple(out)


def _priority_classes(path: Path, raw: list[Any]) -> list[PriorityClass]:
    out = []
    for i, manifest in enumerate(raw):
        try:
            out.append(read_priority_class(manifest if isinstance(manifest, Mapping) else {}))
        except ManifestError as err:
            raise ScenarioError(f"{path}: priorityClasses[{i}]: {err}") from None
    return out


@dataclass(frozen=True)
class _Template:
    """A job's fields, each a distribution (a constant is a distribution too)."""

    pods: Distribution[int]
    requests: dict[str, Distribution[int]]
    priority_class: Distribution[str]
    duration: Distribution[float]
    gang: bool
    min_member: int | None
    checkpoint_interval: float | None
    restart_delay: float
    grace: int
    namespace: str
    scheduler_name: str
    node_selector: dict[str, str]
    tolerations: tuple[Toleration, ...]
    labels: dict[str, str]
    pod_affinity: PodAffinity | None
    spread_constraints: tuple[SpreadConstraint, ...]
    claim_templates: tuple[tuple[str, PersistentVolumeClaim], ...]
    device_claims: tuple[PodClaim, ...]
    queue: Distribution[str]
    fields: Fields  # where the template was written, for errors about a drawn queue
    queues: ScenarioQueues
    topology: JobTopology

    def make(self, rng: random.Random, name: str, submit: float) -> JobSpec:
        pods = self.pods.draw(rng)
        queue = self.queue.draw(rng)
        problem = self.queues.problem(queue) if queue else ""
        if problem:
            raise self.fields.fail("queue", problem)
        requests = {r: d.draw(rng) for r, d in self.requests.items()}
        requests[PODS] = 1
        min_member = (
            self.min_member if self.min_member is not None else (pods if self.gang else None)
        )
        if min_member is not None:
            min_member = min(min_member, pods)
        return JobSpec(
            name=name,
            submit=submit,
            pods=pods,
            requests=requests,
            work=self.duration.draw(rng),
            priority_class=self.priority_class.draw(rng),
            namespace=self.namespace,
            min_member=min_member,
            checkpoint_interval=self.checkpoint_interval,
            restart_delay=self.restart_delay,
            grace_seconds=self.grace,
            scheduler_name=self.scheduler_name,
            node_selector=self.node_selector,
            tolerations=self.tolerations,
            labels=self.labels,
            pod_affinity=self.pod_affinity,
            spread_constraints=self.spread_constraints,
            claim_templates=self.claim_templates,
            device_claims=self.device_claims,
            queue=queue,
            topology=self.topology,
        )


def _template(
    f: Fields, storage: list[VolumeObject], devices: ScenarioDevices, queues: ScenarioQueues
) -> _Template:
    requests_raw = f.raw.get("requests")
    if not isinstance(requests_raw, Mapping) or not requests_raw:
        raise f.fail("requests", "is required: a mapping of resource to quantity (or distribution)")
    requests: dict[str, Distribution[int]] = {}
    for resource, raw in requests_raw.items():
        res = str(resource)
        sub = Fields(f.source, {res: raw}, f.path("requests"), (res,))
        requests[res] = sub.dist(res, functools.partial(resource_amount, res))
    pod_spec: dict[str, Any] = {"containers": [{"name": "main"}]}
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints"):
        if f.has(key):
            pod_spec[key] = f.raw[key]
    metadata = {"name": "job", "labels": f.raw["labels"] if f.has("labels") else {}}
    try:
        shape = read_pod({"metadata": metadata, "spec": pod_spec})
    except ManifestError as err:
        field_name = err.field.removeprefix("spec.").removeprefix("metadata.")
        raise f.fail(field_name, err.what) from None
    min_member = f.value("minMember", positive_int)
    namespace = f.value("namespace", string, "default")
    name = f.value("name", string, REQUIRED)
    device_claims, templates = job_claims(f, name, namespace, devices.classes)
    devices.templates.extend(templates)
    gang = f.value("gang", boolean, False) or min_member is not None
    return _Template(
        pods=f.dist("pods", positive_int, 1),
        requests=requests,
        priority_class=f.dist("class", class_name, "", numeric=False),
        duration=f.dist("duration", parse_duration),
        gang=gang,
        min_member=min_member,
        checkpoint_interval=f.value("checkpointInterval", positive_duration),
        restart_delay=f.value("restartDelay", parse_duration, 0.0),
        grace=f.value("terminationGracePeriodSeconds", non_negative_int, 30),
        namespace=namespace,
        scheduler_name=f.value("schedulerName", string, "batchsched"),
        node_selector=shape.node_selector,
        tolerations=shape.tolerations,
        labels=shape.labels,
        pod_affinity=shape.pod_affinity,
        spread_constraints=shape.spread_constraints,
        claim_templates=_claim_templates(f, namespace, storage),
        device_claims=device_claims,
        queue=f.dist("queue", string, "", numeric=False),
        fields=f,
        queues=queues,
        topology=job_topology(f, gang),
    )


def _explicit_job(
    f: Fields, storage: list[VolumeObject], devices: ScenarioDevices, queues: ScenarioQueues
) -> Callable[[random.Random], list[JobSpec]]:
    name = f.value("name", string, REQUIRED)
    template = _template(f, storage, devices, queues)
    submit = f.dist("submit", parse_duration, 0.0)
    return lambda rng: [template.make(rng, name, submit.draw(rng))]


def _generator(
    f: Fields, storage: list[VolumeObject], devices: ScenarioDevices, queues: ScenarioQueues
) -> Callable[[random.Random], list[JobSpec]]:
    prefix = f.value("name", string, REQUIRED)
    template = _template(f, storage, devices, queues)
    rate = f.value("arrivalsPerHour", positive_number, REQUIRED) / 3600.0
    begin = f.value("from", parse_duration, 0.0)
    end = f.value("to", parse_duration, math.inf)
    count = f.value("count", positive_int, None)
    if count is None and math.isinf(end):
        raise f.fail("to", "give `to` (a duration) or `count` so that arrivals stop")
    if end <= begin:
        raise f.fail("to", "must be after `from`")
    if count is None and rate * (end - begin) > MAX_COUNT / 2:
        raise f.fail(
            "arrivalsPerHour",
            f"would submit about {rate * (end - begin):.3g} jobs between `from` and `to`; "
            f"give `count` (at most {MAX_COUNT}) or a lower rate",
        )

    def generate(rng: random.Random) -> list[JobSpec]:
        jobs: list[JobSpec] = []
        t = begin
        while len(jobs) < (count or MAX_COUNT):
            t += rng.expovariate(rate)
            if t >= end:
                return jobs
            jobs.append(template.make(rng, f"{prefix}-{len(jobs):05d}", t))
        if count is None:
            raise ValueError(f"of {prefix}: more than {MAX_COUNT} arrivals before `to`")
        return jobs

    return generate


def _trace(path: Path, raw: Any, search: tuple[tuple[str, Path], ...]) -> Trace:
    fmt = raw.get("format") if isinstance(raw, Mapping) else None
    trace_format = TRACE_FORMATS.get(fmt) if isinstance(fmt, str) else None
    if trace_format is None:
        known = ", ".join(sorted(TRACE_FORMATS))
        raise ScenarioError(f"{path}: work.trace.format: {fmt!r} is not one of {known}")
    options = Fields(path, raw, "work.trace", ("format", *trace_format.options), search)
    return replace(trace_format.load(options), per_seed=PerSeed.read(options))


def _variants(path: Path, raw: list[Any], base: Path) -> list[Variant]:
    out = []
    for i, item in enumerate(raw):
        v = Fields(path, item, f"variants[{i}]", ("name", "classes", "config", "queues"))
        name = v.value("name", string, REQUIRED)
        classes = v.value("classes", class_table, {})
        config = v.value("config", lambda c: base / string(c))
        out.append(Variant(name, classes, config, v.value("queues", boolean, True)))
    names = [v.name for v in out]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{path}: variants: names must be unique, got {names}")
    return out or [Variant("")]
