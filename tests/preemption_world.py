"""Small clusters built in code for the preemption tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from batchsched.commands.schedule import OneShotResult, build_state, run
from batchsched.config import default_config
from batchsched.objects.load import Objects
from batchsched.objects.records import (
    LabelSelector,
    Node,
    Pod,
    PodCondition,
    PodDisruptionBudget,
    PreemptionPolicy,
    PriorityClass,
)
from batchsched.preemption.toleration_policy import PREFIXES
from batchsched.state.cluster import ClusterState

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
X_K8S, SIGS = PREFIXES


def node(name: str, cpu: int = 4000, pods: int = 110) -> Node:
    return Node(name=name, allocatable={"cpu": cpu, "memory": 64 * 2**30, "pods": pods})


def priority_class(
    name: str,
    value: int,
    minimum: str | None = None,
    seconds: str | None = None,
    prefix: str = X_K8S,
    policy: PreemptionPolicy = "PreemptLowerPriority",
) -> PriorityClass:
    annotations = {}
    if minimum is not None:
        annotations[prefix + "minimum-preemptable-priority"] = minimum
    if seconds is not None:
        annotations[prefix + "toleration-seconds"] = seconds
    return PriorityClass(name, value, annotations=annotations, preemption_policy=policy)


def pod(
    name: str,
    cpu: int,
    on: str = "",
    klass: str = "",
    priority: int | None = None,
    started: timedelta | None = timedelta(hours=1),
    scheduled: timedelta | None = None,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    policy: PreemptionPolicy | None = None,
    terminating: bool = False,
) -> Pod:
    """A pod; bound to `on` if given, started and scheduled that long before NOW."""
    conditions: tuple[PodCondition, ...] = ()
    if on:
        since = NOW - (scheduled if scheduled is not None else started or timedelta(hours=1))
        conditions = (PodCondition("PodScheduled", "True", since),)
    return Pod(
        namespace=namespace,
        name=name,
        requests={"cpu": cpu, "pods": 1},
        scheduler_name="batchsched",
        node_name=on,
        phase="Running" if on else "Pending",
        priority=priority,
        priority_class_name=klass,
        preemption_policy=policy,
        labels=labels or {},
        conditions=conditions,
        start_time=NOW - started if on and started is not None else None,
        deletion_timestamp=NOW - timedelta(seconds=5) if terminating else None,
    )


def pdb(
    name: str, labels: dict[str, str], allowed: int, namespace: str = "default"
) -> PodDisruptionBudget:
    return PodDisruptionBudget(namespace, name, LabelSelector(labels, ()), allowed)


Item = Node | Pod | PriorityClass | PodDisruptionBudget


def schedule(*items: Item, now: datetime = NOW) -> OneShotResult:
    return run(objects_of(*items), default_config(), now)


def state_of(*items: Item) -> ClusterState:
    """A ClusterState holding the items (classes first, as the one-shot world loads them)."""
    return build_state(objects_of(*items))


def objects_of(*items: Item) -> Objects:
    objects = Objects()
    for item in items:
        if isinstance(item, Node):
            objects.nodes.append(item)
        elif isinstance(item, Pod):
            objects.pods.append(item)
        elif isinstance(item, PriorityClass):
            objects.priority_classes.append(item)
        else:
            objects.pdbs.append(item)
    return objects


# The steps of a random walk over the nominations of pods p0..p5 ("default") on nodes n0..n2.
NOMINATION_STEPS = ("nominate", "clear", "remove", "bind", "add")


def nomination_step(
    state: ClusterState, step: str, i: int, n: int, add: Callable[[int], None]
) -> None:
    """Take `step` with pod p`i` and node n`n` where it applies: a pending pod is nominated
    to the node or bound there, a known one has its nomination cleared, any is removed, and a
    pod not known is made again by `add(i)`."""
    key = f"default/p{i}"
    if step == "nominate" and key in state.pods.pending:
        state.nominate(key, f"n{n}")
    elif step == "clear" and key in state.pods.by_key:
        state.nominate(key, None)
    elif step == "remove":
        state.remove_pod(key)
    elif step == "bind" and key in state.pods.pending:
        state.assume(key, f"n{n}")
    elif step == "add" and key not in state.pods.by_key:
        add(i)


def evicted(result: OneShotResult) -> dict[str, str]:
    return {e.pod: e.node for e in result.evictions}


def bound(result: OneShotResult) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings}
