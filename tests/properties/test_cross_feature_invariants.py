"""Every promise the docs make, over small random clusters mixing every feature at once.

A world has nodes with labels (a topology key), taints, GPUs and cordons; PriorityClasses with
preemption-toleration policies or `preemptionPolicy: Never`; running pods stating runtimes (or
not) in Queues (quotas, borrowing, a parent, two roots) and under PDBs; DaemonSet pods rolled
out; pending pods and gangs (the scheduler-plugins CRD and the Workload API, either
disruptionMode, some requiring one topology domain) that may reserve (docs/backfill.md). It is
run through `schedule` and through the simulator (jobs arriving and finishing over a few
hours), and after every pass these hold:

- no node holds more than its allocatable of any resource, pods count included;
- no queue's usage plus the room reserved for its pods exceeds a limit, as planned at the
  start of a pass (docs/backfill.md#queue-limits);
- no gang is bound without minMember members running (docs/gang.md);
- no pod is evicted inside its toleration window by a preemptor its class does not allow,
  nor reclaimed or evicted for a reservation inside it (docs/preemption-toleration.md,
  docs/queues.md#reclaim, docs/backfill.md#broken-promises);
- a pod is evicted for a reservation only past a runtime it stated by label or annotation;
- priority preemption takes only pods of lower priority, of the preemptor's own leaf queue
  (docs/queues.md#priority-preemption-and-queues), and never for a `preemptionPolicy: Never`
  pod;
- reservations on a node never hold more room at one time than it has, nor a node a
  DaemonSet pod holds, as planned at the start of a pass (docs/backfill.md#rules);
- a gang requiring a topology key runs within one domain of it (docs/topology.md);
- DaemonSet preemption evicts only on the DaemonSet pod's node, but for whole gangs
  (docs/daemonset.md);
- the same input and seed make the same decisions and messages (for `schedule`, whatever the
  order of the objects).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state, settle
from batchsched.config import default_config
from batchsched.decisions import Bind, Decision, Evict
from batchsched.objects.load import Objects
from batchsched.objects.records import Toleration, TopologyRequest
from batchsched.plugins.backfill.plugin import Backfill
from batchsched.preemption.toleration_policy import parse_policy, scheduled_since
from batchsched.sim.engine import Simulation
from batchsched.sim.workload import GPU, JobSpec, JobTopology
from batchsched.state.cluster import ClusterState
from batchsched.state.reservations import holder_pods
from tests.builders import Manifest, node, pod, pod_group, priority_class, upstream_group
from tests.conftest import NOW, objects_of

QUEUE_API = "batchsched.io/v1alpha1"
QUEUE_LABEL = "batchsched.io/queue"
ZONE = "zone"
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Exists"}
TOLERANT = "preemption-toleration.scheduling.x-k8s.io/"
CLASSES = [
    priority_class("low", 10),
    priority_class("mid", 100),
    priority_class("high", 1000),
    # Preempted by pods of at least 1000 at once, by others only after 10 minutes.
    priority_class(
        "guarded",
        50,
        annotations={
            TOLERANT + "minimum-preemptable-priority": "1000",
            TOLERANT + "toleration-seconds": "600",
        },
    ),
    # Preempted only by pods of at least 500, ever.
    priority_class(
        "forever",
        50,
        annotations={
            TOLERANT + "minimum-preemptable-priority": "500",
            TOLERANT + "toleration-seconds": "-1",
        },
    ),
    priority_class("agent", 5000),
    priority_class("never", 1000, preemption_policy="Never"),
]
RUNNING_CLASSES = ["low", "mid", "guarded", "forever", "high"]
PENDING_CLASSES = ["low", "mid", "high", "never"]
STATED = ["none", "annotation", "label", "deadline"]


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _states(how: str, minutes: int) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """Labels, annotations and spec fields stating `minutes` of runtime `how`."""
    if how == "annotation":
        return {}, {"batchsched.io/max-runtime": f"{minutes}m"}, {}
    if how == "label":
        return {"kueue.x-k8s.io/max-exec-time-seconds": str(60 * minutes)}, {}, {}
    if how == "deadline":
        return {}, {}, {"activeDeadlineSeconds": 60 * minutes}
    return {}, {}, {}


def _queue(name: str, resources: dict[str, dict[str, int]], parent: str = "") -> Manifest:
    spec: dict[str, Any] = {"resources": resources}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


@dataclass
class World:
    """The manifests, and what the checks need to know of them."""

    manifests: list[Manifest] = field(default_factory=list)
    # (queue, resource) -> its limit (CPU in millicores)
    limits: dict[tuple[str, str], int] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)  # leaf queue -> its parent
    pinned: dict[str, str] = field(default_factory=dict)  # DaemonSet pod -> its node
    jobs: list[JobSpec] = field(default_factory=list)  # what arrives in the simulator


@st.composite
def _queues(draw: st.DrawFn, world: World) -> list[str]:
    """A parent `org` with leaves `a` and `b` (GPU guarantees, borrowing, limits; a CPU limit)
    and a root `c`, or none."""
    if not draw(st.booleans()):
        return [""]
    org_limit = draw(st.one_of(st.none(), st.integers(8, 24)))
    org: dict[str, int] = {"guaranteed": 8}
    if org_limit is not None:
        org["limit"] = world.limits["org", GPU] = org_limit
    world.manifests.append(_queue("org", {GPU: org}))
    for leaf in ("a", "b"):
        guaranteed = draw(st.sampled_from([0, 2, 4]))
        nominal = guaranteed + draw(st.sampled_from([0, 2, 4]))
        gpu = {"guaranteed": guaranteed, "nominal": nominal}
        limit = draw(st.one_of(st.none(), st.integers(nominal, nominal + 8)))
        if limit is not None:
            gpu["limit"] = world.limits[leaf, GPU] = max(limit, 1)
        resources = {GPU: gpu}
        cores = draw(st.one_of(st.none(), st.integers(2, 12)))
        if cores is not None:
            resources["cpu"] = {"limit": cores}
            world.limits[leaf, "cpu"] = 1000 * cores
        world.parent[leaf] = "org"
        world.manifests.append(_queue(leaf, resources, "org"))
    # A second root, whose fair share is taken from org's: reclaim between roots.
    world.manifests.append(_queue("c", {GPU: {"nominal": draw(st.sampled_from([0, 4, 8]))}}))
    return ["", "a", "b", "c"]


def _path(world: World, queue: str) -> list[str]:
    """The queue and its ancestors."""
    return [queue, world.parent[queue]] if queue in world.parent else [queue] if queue else []


@st.composite
def worlds(draw: st.DrawFn, jobs: int = 6) -> World:
    """A world with up to `jobs` jobs arriving in the simulator."""
    world = World(manifests=list(CLASSES))
    queues = draw(_queues(world))
    used = dict.fromkeys(world.limits, 0)

    def admits(queue: str, asks: dict[str, int]) -> bool:
        return all(
            used.get((q, r), 0) + n <= world.limits.get((q, r), n)
            for q in _path(world, queue)
            for r, n in asks.items()
        )

    nodes = [f"n{i}" for i in range(draw(st.integers(2, 5)))]
    room: dict[str, list[int]] = {}
    for name in nodes:
        gpus = draw(st.sampled_from([0, 4, 8, 8]))
        slots = draw(st.integers(3, 8))
        room[name] = [8000, 32, gpus, slots]
        world.manifests.append(
            node(
                name,
                cpu="8",
                memory="32Gi",
                pods=str(slots),
                labels={ZONE: draw(st.sampled_from(["a", "b"]))},
                taints=[TAINT] if gpus and draw(st.integers(0, 3)) == 0 else None,
                unschedulable=draw(st.integers(0, 5)) == 0,
                nvidia_com__gpu=str(gpus),
            )
        )
    for name in nodes:  # running pods (some in a gang running whole)
        for j in range(draw(st.integers(0, 4))):
            cpu = draw(st.sampled_from([500, 1000, 2000]))
            gpus = draw(st.sampled_from([0, 1, 2, 4]))
            free = room[name]
            queue = draw(st.sampled_from(queues))
            if cpu > free[0] or free[1] < 4 or gpus > free[2] or free[3] < 1:
                continue
            asks = {GPU: gpus, "cpu": cpu}
            if not admits(queue, asks):
                queue = ""
            for q in _path(world, queue):
                for r, n in asks.items():
                    used[q, r] = used.get((q, r), 0) + n
            free[0] -= cpu
            free[1] -= 4
            free[2] -= gpus
            free[3] -= 1
            labels, notes, spec = _states(
                draw(st.sampled_from(STATED)), draw(st.sampled_from([10, 30, 60, 120]))
            )
            if queue:
                labels[QUEUE_LABEL] = queue
            app = draw(st.sampled_from(["a", "b", ""]))
            if app:
                labels["app"] = app
            age = draw(st.sampled_from([5, 20, 60, 150]))
            world.manifests.append(
                pod(
                    f"{name}-r{j}",
                    cpu=f"{cpu}m",
                    memory="4Gi",
                    node_name=name,
                    phase="Running",
                    priority_class=draw(st.sampled_from(RUNNING_CLASSES)),
                    labels=labels,
                    annotations=notes,
                    tolerations=[TOLERATION],
                    created=_stamp(NOW - timedelta(minutes=age + 1)),
                    scheduled_at=_stamp(NOW - timedelta(minutes=age)),
                    extra_requests={GPU: str(gpus)} if gpus else None,
                    **spec,
                )
            )
    # A running gang whose two members sit wherever there is room.
    if draw(st.booleans()):
        spots = [n for n in nodes if room[n][0] >= 1000 and room[n][1] >= 4 and room[n][3] >= 1]
        if len(spots) >= 2:
            world.manifests.append(pod_group("rg", 2, namespace="default"))
            how, minutes = draw(st.sampled_from(STATED[:3])), draw(st.sampled_from([30, 120]))
            for m, on in enumerate(spots[:2]):
                room[on][0] -= 1000
                room[on][1] -= 4
                room[on][3] -= 1
                labels, notes, _ = _states(how, minutes)
                world.manifests.append(
                    pod(
                        f"rg-{m}",
                        cpu="1",
                        memory="4Gi",
                        node_name=on,
                        phase="Running",
                        priority_class=draw(st.sampled_from(RUNNING_CLASSES)),
                        labels={**labels, "scheduling.x-k8s.io/pod-group": "rg"},
                        annotations=notes,
                        tolerations=[TOLERATION],
                        scheduled_at=_stamp(NOW - timedelta(minutes=40)),
                    )
                )
    for app in draw(st.sets(st.sampled_from(["a", "b"]), max_size=2)):
        world.manifests.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"pdb-{app}", "namespace": "default"},
                "spec": {
                    "minAvailable": draw(st.integers(0, 2)),
                    "selector": {"matchLabels": {"app": app}},
                },
            }
        )
    for name in draw(st.sets(st.sampled_from(nodes), max_size=2)):  # a DaemonSet rolled out
        key = f"default/agent-{name}"
        world.pinned[key] = name
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
        manifest = pod(
            f"agent-{name}",
            cpu=f"{draw(st.sampled_from([500, 2000, 4000]))}m",
            memory="2Gi",
            priority_class="agent",
            tolerations=[TOLERATION],
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            },
        )
        manifest["metadata"]["ownerReferences"] = [
            {"kind": "DaemonSet", "name": "agent", "uid": "agent"}
        ]
        world.manifests.append(manifest)
    for k in range(draw(st.integers(0, 5))):  # pending pods, some old enough to reserve
        labels, notes, spec = _states(
            draw(st.sampled_from(STATED[:3])), draw(st.sampled_from([20, 60, 180]))
        )
        queue = draw(st.sampled_from(queues))
        if queue:
            labels[QUEUE_LABEL] = queue
        if draw(st.booleans()):
            labels["app"] = draw(st.sampled_from(["a", "b"]))
        gpus = draw(st.sampled_from([0, 1, 2, 4, 8]))
        world.manifests.append(
            pod(
                f"p{k}",
                cpu=f"{draw(st.sampled_from([500, 1000, 4000]))}m",
                memory="4Gi",
                priority_class=draw(st.sampled_from(PENDING_CLASSES)),
                labels=labels,
                annotations=notes,
                tolerations=[TOLERATION] if draw(st.booleans()) else None,
                created=_stamp(NOW - timedelta(minutes=draw(st.sampled_from([1, 30, 90])))),
                extra_requests={GPU: str(gpus)} if gpus else None,
            )
        )
    for g in range(draw(st.integers(0, 3))):  # pending gangs of either API
        members = draw(st.integers(2, 4))
        least = draw(st.integers(1, members))
        name = f"g{g}"
        crd = draw(st.booleans())
        mode = {"disruptionMode": draw(st.sampled_from([{"all": {}}, {"single": {}}]))}
        group = (
            pod_group(name, least, namespace="default")
            if crd
            else upstream_group(name, least, namespace="default", **mode)
        )
        notes = {}
        if draw(st.booleans()):
            notes["batchsched.io/topology-required"] = ZONE
        if draw(st.booleans()):
            notes["batchsched.io/max-runtime"] = f"{draw(st.sampled_from([30, 90]))}m"
        group["metadata"]["annotations"] = notes
        group["metadata"]["creationTimestamp"] = _stamp(NOW - timedelta(minutes=30))
        world.manifests.append(group)
        queue = draw(st.sampled_from(queues))
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        klass = draw(st.sampled_from(PENDING_CLASSES))
        for m in range(members):
            labels = {QUEUE_LABEL: queue} if queue else {}
            extra: dict[str, Any] = {"schedulingGroup": {"podGroupName": name}}
            if crd:
                labels["scheduling.x-k8s.io/pod-group"] = name
                extra = {}
            world.manifests.append(
                pod(
                    f"{name}-{m}",
                    cpu="1",
                    memory="4Gi",
                    priority_class=klass,
                    labels=labels,
                    tolerations=[TOLERATION],
                    created=_stamp(NOW - timedelta(minutes=30)),
                    extra_requests={GPU: str(gpus)},
                    **extra,
                )
            )
    for j in range(draw(st.integers(0, jobs))):  # jobs arriving in the simulator
        size = draw(st.integers(1, 3))
        gang = size > 1 and draw(st.booleans())
        stated = draw(st.sampled_from([None, 600, 3600]))
        world.jobs.append(
            JobSpec(
                name=f"job{j}",
                submit=float(draw(st.integers(0, 7200))),
                pods=size,
                requests={
                    "cpu": 1000,
                    "memory": 4 << 30,
                    "pods": 1,
                    GPU: draw(st.sampled_from([1, 2, 4, 8])),
                },
                work=float(draw(st.sampled_from([300, 1800, 5400]))),
                priority_class=draw(st.sampled_from([*PENDING_CLASSES, "guarded", "forever"])),
                min_member=size if gang else None,
                tolerations=(Toleration(key="dedicated", operator="Exists", value="", effect=""),),
                queue=draw(st.sampled_from(queues)),
                topology=(
                    JobTopology(TopologyRequest(required=ZONE), ZONE, 1.0)
                    if gang and draw(st.booleans())
                    else JobTopology(TopologyRequest(), "", 1.0)
                ),
                # A job overrunning what it states, sometimes (a broken promise).
                stated_runtime=stated,
            )
        )
    return world


# ---- the checks ---------------------------------------------------------------------------


class Checks:
    """The promises, checked against a cluster state after each instant's passes."""

    def __init__(self, world: World, objects: Objects) -> None:
        self.world = world
        self.allocatable = {n.name: n.allocatable for n in objects.nodes}
        self.zone = {n.name: n.labels.get(ZONE) for n in objects.nodes}

    def decided(self, state: ClusterState, decisions: list[Decision], now: datetime) -> None:
        """A pass's decisions, before the world carries them out: each victim could be taken, and
        each gang had minMember members running once its members were bound (members of a
        group of disruptionMode Pod may be evicted one by one afterwards: docs/gang.md)."""
        self._evictions(state, decisions, now)
        # The scheduler's state already holds the pass's binds and evictions: as it was before.
        bound_now = {d.pod for d in decisions if isinstance(d, Bind)}
        evicted = {d.pod for d in decisions if isinstance(d, Evict)}
        running = {
            key: {
                m
                for m in members - bound_now
                if m in state.pods.bound and (m not in state.pods.terminating or m in evicted)
            }
            for key, members in state.groups.members.items()
        }
        group_of = {m: key for key, members in state.groups.members.items() for m in members}
        for i, decision in enumerate(decisions):
            key = group_of.get(getattr(decision, "pod", ""), "")
            if not key:
                continue
            if isinstance(decision, Evict):
                running[key].discard(decision.pod)
            elif isinstance(decision, Bind):
                running[key].add(decision.pod)
                after = decisions[i + 1] if i + 1 < len(decisions) else None
                if not isinstance(after, Bind) or group_of.get(after.pod) != key:
                    group = state.groups.by_key[key]
                    bound = len(running[key])
                    assert not group.gang or bound >= group.min_member, f"{key}: {bound} bound"

    def _evictions(self, state: ClusterState, decisions: list[Decision], now: datetime) -> None:
        for decision in decisions:
            if not isinstance(decision, Evict):
                continue
            victim = state.pods.by_key[decision.pod]
            preemptor = state.pods.by_key[decision.preemptor]
            pc = state.policy.priority_classes.get(victim.priority_class_name)
            policy = parse_policy(pc) if pc is not None else None
            since = scheduled_since(victim)
            inside = (
                policy is not None
                and since is not None
                and (
                    policy.toleration_seconds < 0
                    or (
                        policy.toleration_seconds > 0
                        and now < since + timedelta(seconds=policy.toleration_seconds)
                    )
                )
            )
            what = f"{decision.pod} evicted at {now} by {decision.preemptor}: {decision.reason}"
            if decision.broken_promise is not None or decision.reclaim is not None:
                assert not inside, f"inside its toleration window: {what}"
            else:
                allowed = policy is None or (preemptor.priority or 0) >= (
                    policy.minimum_preemptable_priority
                )
                assert allowed or not inside, f"protected by its class: {what}"
            if decision.broken_promise is not None:
                bound = victim.max_runtime_seconds
                group = state.groups.by_key.get(_group_of(state, victim.key) or "")
                if bound is None and group is not None:
                    bound = group.max_runtime_seconds
                assert bound is not None and not victim.runtime_enforced, f"no promise: {what}"
                assert victim.start_time is not None
                assert now >= victim.start_time + timedelta(seconds=bound), f"kept it: {what}"
            if decision.reason.startswith("DaemonSetPreemption") and not _group_of(
                state, victim.key
            ):
                assert victim.node_name == self.world.pinned[decision.preemptor], what
            if decision.reason.startswith(("PreemptionToleration", "DefaultPreemption")):
                # docs/preemption-toleration.md, docs/queues.md#priority-preemption-and-queues
                assert (victim.priority or 0) < (preemptor.priority or 0), f"not lower: {what}"
                if self.world.parent:
                    same = victim.labels.get(QUEUE_LABEL) == preemptor.labels.get(QUEUE_LABEL)
                    assert same, f"across queues: {what}"
            if decision.reclaim is None and not decision.reason.startswith("DaemonSet"):
                assert preemptor.priority_class_name != "never", f"preemptionPolicy Never: {what}"

    def passed(self, state: ClusterState) -> None:
        """After a pass's decisions are carried out."""
        used: dict[str, dict[str, int]] = {}
        for key in state.pods.bound:
            pod_ = state.pods.by_key[key]
            per_node = used.setdefault(pod_.node_name, {})
            for resource, amount in pod_.requests.items():
                per_node[resource] = per_node.get(resource, 0) + amount
        for name, per_node in used.items():
            for resource, amount in per_node.items():
                limit = self.allocatable[name].get(resource, 0)
                assert amount <= limit, f"{name} over-committed: {resource} {amount} > {limit}"
        self._domains(state)

    def planned(self, state: ClusterState, now: datetime) -> None:
        """Once the reservations are planned at the start of a pass. (Within a pass, and so
        until the next, a holder keeps what it holds, the room its members were placed in
        included: docs/backfill.md#rules. A pass after a pod came to a node plans again.)"""
        self._queues(state)
        self._reservations(state, now)

    def _queues(self, state: ClusterState) -> None:
        usage = dict.fromkeys(self.world.limits, 0)
        reserved = dict.fromkeys(self.world.limits, 0)
        for key in state.pods.bound:
            pod_ = state.pods.by_key[key]
            for q in _path(self.world, pod_.labels.get(QUEUE_LABEL, "")):
                for q_r in usage.keys() & {(q, r) for r in pod_.requests}:
                    usage[q_r] += pod_.requests[q_r[1]]
        for held in state.start_reservations.by_holder.values():
            keys = holder_pods(held.holder, state.groups.members)
            queue = next(
                (q for k in keys if (q := state.pods.by_key[k].labels.get(QUEUE_LABEL))), ""
            )
            for q in _path(self.world, queue):
                for share in held.shares.values():
                    for q_r in reserved.keys() & {(q, r) for r in share}:
                        reserved[q_r] += share[q_r[1]]
        for q_r, limit in self.world.limits.items():
            assert usage[q_r] + reserved[q_r] <= limit, f"{q_r}: {usage} + {reserved} > {limit}"

    def _domains(self, state: ClusterState) -> None:
        for key, group in state.groups.by_key.items():
            if not group.topology.required:
                continue
            zones = {
                self.zone[state.pods.by_key[m].node_name]
                for m in state.groups.members.get(key, ())
                if m in state.pods.bound and m not in state.pods.terminating
            }
            assert len(zones) <= 1 and None not in zones, f"{key} spans {zones}"

    def _reservations(self, state: ClusterState, now: datetime) -> None:
        held = list(state.start_reservations.by_holder.values())
        daemon_rows = set(state.reservations.by_row)
        for row in {r for h in held for r in h.shares}:
            assert row not in daemon_rows, f"{state.nodes.name(row)} held for a DaemonSet pod"
            spans = [
                (h.start or now, h.until or datetime.max.replace(tzinfo=now.tzinfo), h.shares[row])
                for h in held
                if row in h.shares
            ]
            allocatable = self.allocatable[state.nodes.name(row)]
            for at, _, _ in spans:
                total: dict[str, int] = {}
                for start, until, share in spans:
                    if start <= at < until:
                        for resource, amount in share.items():
                            total[resource] = total.get(resource, 0) + amount
                for resource, amount in total.items():
                    assert amount <= allocatable.get(resource, 0), (
                        f"{state.nodes.name(row)} reserved {resource} {amount} at {at}"
                    )


def _group_of(state: ClusterState, key: str) -> str | None:
    for group, members in state.groups.members.items():
        if key in members:
            return group
    return None


# ---- the runs -----------------------------------------------------------------------------


def _scheduled(world: World) -> tuple[list[Any], dict[str, str]]:
    """`schedule`'s decisions (as JSON) and messages, checked at the end of its passes."""
    objects = objects_of(*world.manifests)
    checks = Checks(world, objects)
    result, scheduler = settle(objects, default_config(), NOW)
    # The victims were running from the start (one bound in the run is withdrawn instead).
    checks.decided(build_state(objects), [*result.evictions, *result.bindings], NOW)
    checks.passed(scheduler.state)
    checks.planned(scheduler.state, NOW)  # by the last pass, which changed nothing
    return [result.to_json()], dict(scheduler.messages)


def _simulated(world: World, seed: int) -> tuple[list[Any], dict[str, str]]:
    """The simulator's decisions at each instant and the final messages, checked as it goes."""
    objects = objects_of(*world.manifests)
    checks = Checks(world, objects)
    sim = Simulation(
        "fuzz",
        objects.nodes,
        objects.priority_classes,
        world.jobs,
        default_config(),
        NOW,
        seed=seed,
        queues=objects.queues,
    )
    for pdb in objects.pdbs:
        sim.state.upsert_pdb(pdb)
    for group in objects.pod_groups:
        sim.state.upsert_pod_group(group)
    for pod_ in objects.pods:
        sim.add_pod(pod_)
    decided: list[Any] = []
    carry_out = sim.apply

    def apply(decisions: list[Decision]) -> None:
        now = sim._clock(sim.now)
        checks.decided(sim.state, decisions, now)
        carry_out(decisions)
        decided.append((sim.now, [repr(d) for d in decisions]))
        checks.passed(sim.state)

    sim.apply = apply  # type: ignore[method-assign]
    for plugins in sim.scheduler.wait_plugins.values():
        for plugin in plugins:
            if isinstance(plugin, Backfill):
                planning = plugin.before_pass
                plugin.before_pass = _then(planning, checks.planned)  # type: ignore[method-assign]
    sim.advance(4 * 3600.0)
    return decided, dict(sim.scheduler.messages)


def _then(
    planning: Callable[[ClusterState, datetime], None],
    check: Callable[[ClusterState, datetime], None],
) -> Callable[[ClusterState, datetime], None]:
    def planned(state: ClusterState, now: datetime) -> None:
        planning(state, now)
        check(state, now)

    return planned


@settings(max_examples=25, deadline=None)
@given(worlds(), st.randoms(use_true_random=False))
def test_schedule_keeps_every_promise(world: World, order: random.Random) -> None:
    first = _scheduled(world)
    assert _scheduled(world) == first
    order.shuffle(world.manifests)  # the same objects in another order: the same decisions
    assert _scheduled(world) == first


@settings(max_examples=20, deadline=None)
@given(worlds(), st.integers(0, 2**16))
def test_the_simulator_keeps_every_promise(world: World, seed: int) -> None:
    assert _simulated(world, seed) == _simulated(world, seed)
