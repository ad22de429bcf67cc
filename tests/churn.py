"""A cluster where pods of every kind come and go, for the tests that check what a scheduler
keeps of pods once they are gone (issue 32, point 14).

Pods, their PodGroups and claims are named with `MARKER`. The world applies each pass's
decisions as a cluster would (binds reported back, victims deleted), through the readers and
the state changes the live loop uses.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from batchsched.config import default_config
from batchsched.decisions import Bind, Evict
from batchsched.live.kinds import KINDS
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, pod_group, priority_class

KIND = {kind.name: kind for kind in KINDS}
MARKER = "gone"
T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
DRIVER = "gpu.example.com"


def cluster() -> list[tuple[str, dict[str, Any]]]:
    slice_ = {
        "metadata": {"name": "node-0-devices"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "node-0",
            "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "dev-0"}, {"name": "dev-1"}],
        },
    }
    device_class = {
        "metadata": {"name": "dev"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    return [
        ("PriorityClass", priority_class("low", 10)),
        ("PriorityClass", priority_class("high", 1000)),
        ("DeviceClass", device_class),
        ("Node", node("node-0", cpu="4")),
        ("Node", node("node-1", cpu="4")),
        ("ResourceSlice", slice_),
    ]


@dataclass
class Job:
    """Objects created together and deleted together."""

    objects: list[tuple[str, dict[str, Any]]]
    start: int  # the pass before which it is created
    end: int  # the pass before which it is deleted


@dataclass
class World:
    scheduler: Scheduler
    manifests: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    most_pods: int = 0  # the most pods the cluster held at once
    created: set[tuple[str, str]] = field(default_factory=set)  # (kind, key) ever created

    @property
    def state(self) -> ClusterState:
        return self.scheduler.state

    def create(self, kind: str, manifest: dict[str, Any]) -> None:
        record = KIND[kind].read(manifest)
        key = getattr(record, "key", record.name)
        self.manifests[(kind, key)] = manifest
        self.created.add((kind, key))
        KIND[kind].upsert(self.state, record)
        self.most_pods = max(self.most_pods, len(self.state.pods.by_key))

    def delete(self, kind: str, manifest: dict[str, Any]) -> None:
        meta = manifest["metadata"]
        key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        if self.manifests.pop((kind, key), None) is not None:
            KIND[kind].remove(self.state, key)

    def run_pass(self, at: int) -> None:
        """One scheduling pass; binds are reported back bound, victims are deleted."""
        for decision in self.scheduler.schedule_pass(T0 + timedelta(seconds=10 * at)):
            if isinstance(decision, Bind):
                bound = copy.deepcopy(self.manifests[("Pod", decision.pod)])
                bound["spec"]["nodeName"] = decision.node
                self.create("Pod", bound)
            elif isinstance(decision, Evict):
                self.delete("Pod", self.manifests[("Pod", decision.pod)])


def _pod(name: str, cpu: str, priority_class: str = "low", **extra: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, memory="1Gi", priority_class=priority_class, **extra)


def job(kind: str, n: int, start: int, lasts: int) -> Job:
    name = f"{MARKER}-{kind}-{n}"
    objects: list[tuple[str, dict[str, Any]]]
    if kind == "gang":
        group = pod_group(name, 2, namespace="default")
        label = {"scheduling.x-k8s.io/pod-group": name}
        members = [_pod(f"{name}-{m}", "1", labels=label) for m in range(2)]
        objects = [("PodGroup", group), *(("Pod", member) for member in members)]
    elif kind == "claimed":
        request = {"name": "dev", "exactly": {"deviceClassName": "dev", "count": 1}}
        claim = {
            "metadata": {"name": f"{name}-claim", "namespace": "default"},
            "spec": {"devices": {"requests": [request]}},
        }
        manifest = _pod(name, "1")
        manifest["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": f"{name}-claim"}]
        manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "dev"}]
        objects = [("ResourceClaim", claim), ("Pod", manifest)]
    elif kind == "urgent":  # preempts low pods once the nodes are full
        objects = [("Pod", _pod(name, "3", priority_class="high"))]
    elif kind == "huge":  # never fits: unschedulable until deleted
        objects = [("Pod", _pod(name, "64"))]
    else:
        objects = [("Pod", _pod(name, "1"))]
    return Job(objects, start, start + lasts)


def world() -> World:
    state = ClusterState()
    state.devices.live = True  # as the live loop has it: claims are written by the world
    built = World(Scheduler(state, default_config()))
    for kind, manifest in cluster():
        built.create(kind, manifest)
    return built


def play(world: World, plan: list[Job]) -> None:
    """Create and delete the jobs at their passes, a pass after each step, then delete
    whatever is left and run one more pass."""
    last = max(j.end for j in plan) + 1
    for at in range(last + 1):
        for each in plan:
            if each.end == at or at == last:
                for kind, manifest in reversed(each.objects):
                    world.delete(kind, manifest)
            if each.start == at and at < last:
                for kind, manifest in each.objects:
                    world.create(kind, manifest)
        world.run_pass(at)
