"""A scenario's Queues (docs/simulate.md#queues-many-tenants): declared as Queue manifests or
as a compact table, and derived for the queues the jobs name that neither declares, with
quotas shared out in proportion to each queue's work.

```yaml
queues:
  objects: [Queue manifests]         # batchsched's, Volcano's or KAI's, as in a cluster
  table:                             # the same, one line each: name and the spec's fields
  - {name: team-a, parent: org, resources: {nvidia.com/gpu: {nominal: 16}}, weight: 2}
  derive:                            # a leaf for every queue a job names that is not above
    resource: nvidia.com/gpu
    by: gpuHours                     # gpuHours | jobs | equal: how `total` is shared out
    level: nominal                   # nominal | guaranteed (which also sets nominal)
    total: 2400                      # default: the cluster's allocatable of `resource`
    parent: org                      # optional: a declared queue the derived ones hang from
  measureFrom: 1d                    # time averages from this instant on (default: the start)
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchsched.objects.errors import ManifestError
from batchsched.objects.quantity import resource_amount
from batchsched.objects.queues import (
    QUEUE_API,
    Queue,
    QueueQuota,
    check_queue_tree,
    read_queue,
)
from batchsched.objects.records import Node
from batchsched.sim.fields import REQUIRED, Fields, ScenarioError, string
from batchsched.sim.workload import JobSpec, parse_duration

_QUEUES = ("objects", "table", "derive", "measureFrom")
_TABLE = ("name", "parent", "resources", "weight", "priority", "reclaimMinRuntime")
_DERIVE = ("resource", "by", "level", "total", "parent")
DERIVE_BY = ("gpuHours", "jobs", "equal")
LEVELS = ("nominal", "guaranteed")


@dataclass(frozen=True)
class Derive:
    """Leaf queues for the queue names jobs carry that no declaration has."""

    resource: str
    by: str
    level: str
    total: int | None  # None: the cluster's allocatable of `resource`
    parent: str

    def queues(self, names: list[str], jobs: list[JobSpec], nodes: list[Node]) -> list[Queue]:
        total = self.total
        if total is None:
            total = sum(node.allocatable.get(self.resource, 0) for node in nodes)
        weights = [self._weight(name, jobs) for name in names]
        amounts = _shares(total, weights)
        out = []
        for name, amount in zip(names, amounts, strict=True):
            guaranteed = amount if self.level == "guaranteed" else 0
            out.append(
                Queue(
                    name=name,
                    api_version=QUEUE_API,
                    parent=self.parent,
                    resources={self.resource: QueueQuota(guaranteed, amount)},
                )
            )
        return out

    def _weight(self, name: str, jobs: list[JobSpec]) -> float:
        mine = [j for j in jobs if j.queue == name]
        if self.by == "equal":
            return 1.0
        if self.by == "jobs":
            return float(len(mine))
        return sum(j.pods * j.requests.get(self.resource, 0) * j.work for j in mine) / 3600.0


def _shares(total: int, weights: list[float]) -> list[int]:
    """`total` split in proportion to `weights`, in whole units that add up to it (largest
    remainders first, ties by position); equal parts when every weight is 0."""
    if not weights:
        return []
    whole = sum(weights)
    if whole <= 0:
        weights, whole = [1.0] * len(weights), float(len(weights))
    exact = [total * w / whole for w in weights]
    amounts = [int(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - amounts[i]), i))
    for i in order[: total - sum(amounts)]:
        amounts[i] += 1
    return amounts


@dataclass(frozen=True)
class ScenarioQueues:
    """What a scenario's `queues:` says; `tree` makes the Queue objects of one workload."""

    source: Path
    declared: tuple[Queue, ...] = ()
    derive: Derive | None = None
    # Seconds from the start: the per-queue time averages count from there (a warm-up left out).
    measure_from: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.declared) or self.derive is not None

    def leaves(self) -> set[str]:
        parents = {q.parent for q in self.declared}
        return {q.name for q in self.declared if q.name not in parents}

    def problem(self, name: str) -> str:
        """Why a job may not name queue `name` ("" if it may)."""
        if not self:
            return f"names queue {name!r}, but the scenario declares no queues"
        declared = {q.name for q in self.declared}
        if name in declared and name not in self.leaves():
            return f"names queue {name!r}, which has child queues: only leaf queues hold jobs"
        if name in declared or self.derive is not None:
            return ""
        known = ", ".join(sorted(self.leaves())) or "none"
        return f"names queue {name!r}, which queues does not declare (leaves: {known})"

    def tree(self, jobs: list[JobSpec], nodes: list[Node]) -> list[Queue]:
        """The declared queues and a derived leaf for each other queue the jobs name."""
        if self.derive is None:
            return list(self.declared)
        declared = {q.name for q in self.declared}
        named = sorted({j.queue for j in jobs if j.queue and j.queue not in declared})
        queues = [*self.declared, *self.derive.queues(named, jobs, nodes)]
        try:
            check_queue_tree(queues)
        except ManifestError as err:
            raise ScenarioError(f"{self.source}: queues.derive: {err}") from None
        return queues


def read_queues(source: Path, raw: Any) -> ScenarioQueues:
    if raw is None:
        return ScenarioQueues(source)
    q = Fields(source, raw, "queues", _QUEUES)
    declared: list[Queue] = []
    for i, manifest in enumerate(q.items("objects")):
        declared.append(_queue(q, f"objects[{i}]", manifest))
    for i, row in enumerate(q.items("table")):
        line = Fields(source, row, f"queues.table[{i}]", _TABLE)
        spec = {k: v for k, v in line.raw.items() if k != "name"}
        manifest = {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": line.value("name", string, REQUIRED)},
            "spec": spec,
        }
        declared.append(_queue(q, f"table[{i}]", manifest))
    names = [queue.name for queue in declared]
    for name in names:
        if names.count(name) > 1:
            raise q.fail("", f"queue {name!r} is declared more than once")
    try:
        check_queue_tree(declared)
    except ManifestError as err:
        raise q.fail("", str(err)) from None
    derive = _derive(q, declared) if q.has("derive") else None
    if not declared and derive is None:
        raise q.fail("", "declares nothing: give objects, table or derive")
    measure_from = q.value("measureFrom", parse_duration, 0.0)
    return ScenarioQueues(source, tuple(declared), derive, measure_from)


def _queue(q: Fields, where: str, manifest: Any) -> Queue:
    if not isinstance(manifest, Mapping):
        raise q.fail(where, "must be a Queue manifest (a mapping)")
    try:
        return read_queue(manifest)
    except ManifestError as err:
        raise q.fail(where, str(err)) from None


def _derive(q: Fields, declared: list[Queue]) -> Derive:
    d = Fields(q.source, q.raw["derive"], "queues.derive", _DERIVE)
    resource = d.value("resource", string, REQUIRED)
    by = d.value("by", _one_of(DERIVE_BY), "gpuHours")
    level = d.value("level", _one_of(LEVELS), "nominal")
    total = d.value("total", lambda v: resource_amount(resource, v))
    parent = d.value("parent", string, "")
    if parent and parent not in {x.name for x in declared}:
        known = ", ".join(sorted(x.name for x in declared)) or "none"
        raise d.fail("parent", f"{parent!r} is not a declared queue (declared: {known})")
    return Derive(resource, by, level, total, parent)


def _one_of(allowed: tuple[str, ...]) -> Any:
    def convert(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, got {value!r}")
        return str(value)

    return convert
