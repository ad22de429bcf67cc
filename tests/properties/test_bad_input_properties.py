"""Bad input loses nothing (issue 28's audit of the bar): one field of one object broken.

A small valid cluster (nodes, PriorityClasses, a PodGroup of the scheduler-plugins CRD, one of
the Workload API with its Workload, a Queue, a PDB, pods: a gang of each API, one stating a
runtime, one in the queue, one with node affinity, one running) has ONE field of ONE object
replaced by a hostile value (wrong type, null, negative, huge, unknown enum, bad quantity,
duration or selector operator) or removed. Then, through both ways objects come in:

- `batchsched schedule FILE` either accepts the file or exits 2 with an error naming the
  object (kind, namespace/name) and the field;
- the live loop's way (live/informer.py: each object read alone, a malformed one reported
  and left out) decides every pod that does not depend on the broken object exactly as the
  unbroken cluster does; a pod depending on a refused PodGroup, Workload, Queue or
  PriorityClass stays pending with a message naming it. No node is over-committed.

Each unit of pods is pinned to its own node (label `unit`) with room to spare, so that one
pod's or group's fate does not move another's.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from unittest.mock import patch

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchsched.commands import schedule as schedule_command
from batchsched.commands.cli import main
from batchsched.commands.schedule import build_state, settle
from batchsched.config import default_config
from batchsched.objects.errors import ManifestError
from batchsched.objects.load import Objects
from batchsched.objects.records import Node, Pod
from batchsched.state.cluster import ClusterState

NOW = datetime(2026, 11, 23, tzinfo=UTC)
NOW_ARG = "2026-11-23T00:00:00Z"
CRD = "scheduling.x-k8s.io/v1alpha1"
UPSTREAM = "scheduling.k8s.io/v1beta1"
UNITS = ("crd", "wl", "queue", "runtime", "affinity", "plain")


def _node(unit: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"n-{unit}", "labels": {"unit": unit, "zone": "z1"}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "20"}},
    }


def _pod(name: str, unit: str, **extra: Any) -> dict[str, Any]:
    labels = extra.pop("labels", {})
    annotations = extra.pop("annotations", {})
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "labels": {"app": unit, **labels}}
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {
        "nodeSelector": {"unit": unit},
        "priorityClassName": "batch",
        "containers": [
            {
                "name": "main",
                "image": "img",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            }
        ],
        **extra,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def cluster() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "ml", "labels": {"team": "ml"}},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "batch"},
            "value": 100,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "serving"},
            "value": 1000,
        },
        *[_node(unit) for unit in UNITS],
        {
            "apiVersion": CRD,
            "kind": "PodGroup",
            "metadata": {"name": "crd-job", "namespace": "ml"},
            "spec": {"minMember": 2, "scheduleTimeoutSeconds": 60},
        },
        {
            "apiVersion": UPSTREAM,
            "kind": "Workload",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {
                "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
                "podGroupTemplates": [
                    {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
                ],
            },
        },
        {
            "apiVersion": UPSTREAM,
            "kind": "PodGroup",
            "metadata": {"name": "train-workers", "namespace": "ml"},
            "spec": {
                "workloadRef": {"workloadName": "train", "templateName": "workers"},
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "disruptionMode": {"all": {}},
            },
        },
        {
            "apiVersion": "batchsched.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "team"},
            "spec": {
                "resources": {"cpu": {"guaranteed": "4", "nominal": "4", "limit": "8"}},
                "weight": 2,
                "reclaimMinRuntime": "10m",
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "serve", "namespace": "ml"},
            "spec": {
                "minAvailable": 1,
                "selector": {
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["plain"]}]
                },
            },
        },
        *[
            _pod(f"crd-{i}", "crd", labels={"scheduling.x-k8s.io/pod-group": "crd-job"})
            for i in range(2)
        ],
        *[
            _pod(f"wl-{i}", "wl", schedulingGroup={"podGroupName": "train-workers"})
            for i in range(2)
        ],
        _pod("queued", "queue", labels={"batchsched.io/queue": "team"}),
        _pod("timed", "runtime", annotations={"batchsched.io/max-runtime": "1h30m"}),
        _pod(
            "picky",
            "affinity",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z1"]}
                                ]
                            }
                        ]
                    }
                }
            },
            tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        {
            **_pod("serving", "plain", priorityClassName="serving", nodeName="n-plain"),
            "status": {"phase": "Running", "startTime": "2026-11-22T23:00:00Z"},
        },
        _pod("plain", "plain", activeDeadlineSeconds=7200),
    ]


# What each pod depends on besides its own manifest and its unit's node: a change to one of
# these may change its decision.
DEPENDS: dict[str, set[str]] = {
    "crd-0": {"PodGroup ml/crd-job", "PriorityClass batch", "Pod ml/crd-1"},
    "crd-1": {"PodGroup ml/crd-job", "PriorityClass batch", "Pod ml/crd-0"},
    "wl-0": {
        "PodGroup ml/train-workers",
        "Workload ml/train",
        "PriorityClass batch",
        "Pod ml/wl-1",
    },
    "wl-1": {
        "PodGroup ml/train-workers",
        "Workload ml/train",
        "PriorityClass batch",
        "Pod ml/wl-0",
    },
    "queued": {"Queue team", "PriorityClass batch", "Namespace ml"},
    "timed": {"PriorityClass batch"},
    "picky": {"PriorityClass batch"},
    "plain": {"PriorityClass batch", "Pod ml/serving", "PodDisruptionBudget ml/serve"},
}
# The node each pod is pinned to (by its unit's label).
NODE_OF = {
    "crd-0": "Node n-crd",
    "crd-1": "Node n-crd",
    "wl-0": "Node n-wl",
    "wl-1": "Node n-wl",
    "queued": "Node n-queue",
    "timed": "Node n-runtime",
    "picky": "Node n-affinity",
    "plain": "Node n-plain",
}

# Kinds a pod waits for when they are left out. Not a Workload: the PodGroup carries what
# scheduling needs (docs/gang.md); nor a PriorityClass (see below).
WAITED = ("PodGroup ", "Queue ")
HOSTILE: list[Any] = [
    None,
    "",
    "x",
    "Bogus",
    "1.5.3Gi",
    "-1",
    "soon",
    "1h30",
    -1,
    0,
    2**63,
    10**30,
    1.5,
    True,
    [],
    ["a"],
    {},
    {"a": "b"},
    {"key": "zone", "operator": "Near", "values": ["z1"]},
    "Bad_Name!",
]


def label(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    if "namespace" in meta:
        return f"{obj['kind']} {meta['namespace']}/{meta['name']}"
    return f"{obj['kind']} {meta['name']}"


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field path below `value`, interior ones included."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            out += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            out += paths(inner, (*prefix, i))
    return out


def dotted(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


REMOVED = object()  # the field taken out


@st.composite
def broken(draw: st.DrawFn) -> tuple[int, tuple[Any, ...], Any]:
    """One field of one object of the cluster, and its new value (REMOVED: taken out).
    `kind`, `apiVersion` and names are left alone: another kind or name is another object,
    not a broken one."""
    objects = cluster()
    index = draw(st.integers(0, len(objects) - 1))
    candidates = [
        p
        for p in paths(objects[index])
        if p[0] not in ("kind", "apiVersion")
        and p != ("metadata",)
        and p[:2] not in (("metadata", "name"), ("metadata", "namespace"))
    ]
    path = draw(st.sampled_from(candidates))
    value = REMOVED if draw(st.integers(0, 5)) == 0 else draw(st.sampled_from(HOSTILE))
    return index, path, value


def apply(case: tuple[int, tuple[Any, ...], Any]) -> list[dict[str, Any]]:
    index, path, value = case
    objects = cluster()
    holder: Any = objects[index]
    for key in path[:-1]:
        holder = holder[key]
    if value is REMOVED:
        holder.pop(path[-1])
    else:
        holder[path[-1]] = copy.deepcopy(value)
    return objects


def read_live(objects: list[dict[str, Any]]) -> tuple[Objects, dict[str, ManifestError]]:
    """The objects as the live loop holds them: each read alone; a malformed one left out
    (and known as unreadable, `decide`)."""
    held = Objects()
    refused: dict[str, ManifestError] = {}
    for obj in objects:
        try:
            held.add(obj["kind"], obj)
        except ManifestError as err:
            refused[label(obj)] = err
    return held, refused


def decide(
    objects: Objects, refused: Mapping[str, ManifestError] | None = None
) -> tuple[dict[str, str], dict[str, str], list[Node], list[Pod]]:
    """Each of our pods' node ("" pending), the pending pods' messages, and the nodes and pods
    as they stand after the plan. A `refused` PodGroup or Queue is known as unreadable, as the
    live loop knows it from the informer's report (live/facts.py)."""

    def with_unreadable(objects: Objects) -> ClusterState:
        state = build_state(objects)
        for what, err in (refused or {}).items():
            kind, _, key = what.partition(" ")
            why = f"{err.field}: {err.what}"
            if kind == "PodGroup":
                state.pod_group_unreadable(key, why)
            elif kind == "Queue":
                state.queue_unreadable(key, why)
        return state

    with patch.object(schedule_command, "build_state", with_unreadable):
        result, scheduler = settle(objects, default_config(), NOW)
    state = scheduler.state
    placed = {key: pod.node_name for key, pod in state.pods.by_key.items()}
    for bind in result.bindings:
        placed[bind.pod] = bind.node
    return placed, result.unschedulable, objects.nodes, list(state.pods.by_key.values())


BASELINE = decide(read_live(cluster())[0])


def test_the_unbroken_cluster_binds_every_pod() -> None:
    placed, pending, _, _ = BASELINE
    assert pending == {}
    assert placed == {
        "ml/crd-0": "n-crd",
        "ml/crd-1": "n-crd",
        "ml/wl-0": "n-wl",
        "ml/wl-1": "n-wl",
        "ml/queued": "n-queue",
        "ml/timed": "n-runtime",
        "ml/picky": "n-affinity",
        "ml/serving": "n-plain",
        "ml/plain": "n-plain",
    }


def assert_not_overcommitted(
    placed: dict[str, str], running: set[str], nodes: list[Node], pods: list[Pod]
) -> None:
    """No node the run bound a pod to holds more than it has (a node the input itself fills
    beyond its allocatable is the input's, and gets no new pod)."""
    by_key = {p.key: p for p in pods}
    for node in nodes:
        here = [key for key, where in placed.items() if where == node.name]
        if not set(here) - running:
            continue
        used: dict[str, int] = {}
        for key in here:
            for name, amount in by_key[key].requests.items():
                used[name] = used.get(name, 0) + amount
        for name, amount in used.items():
            assert amount <= node.allocatable.get(name, 0), (node.name, name, used)


SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(case=broken())
def test_one_broken_field_loses_nothing_else(
    case: tuple[int, tuple[Any, ...], Any],
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    objects = apply(case)
    index, path, _ = case
    broken_label = label(objects[index])
    # The file: accepted, or refused naming the object and the field.
    file = tmp_path_factory.mktemp("bad") / "cluster.yaml"
    file.write_text(yaml.safe_dump_all(objects))
    code = main(["schedule", str(file), "--now", NOW_ARG, "-o", "json"])
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    if code == 2:
        error = err.rpartition("batchsched: error: ")[2]
        # `FILE: Kind namespace/name: field: what is wrong`, of the object or of a pod that
        # names it (a pod naming a PriorityClass that is refused, say).
        named = [
            d
            for d in (broken_label, *_dependents(broken_label))
            if re.search(rf"{re.escape(d)}: [\w.\[\]/-]+: ", error)
        ]
        assert named, (broken_label, dotted(path), error)

    # The live loop's way: the broken object read or left out, everything else flows.
    held, refused = read_live(objects)
    assert set(refused) <= {broken_label}, refused
    for what, error_ in refused.items():
        assert error_.field, (what, str(error_))
        assert error_.obj == what, (what, str(error_))
    running = {p.key for p in held.pods if p.node_name}
    placed, pending, nodes, pods = decide(held, refused)
    assert_not_overcommitted(placed, running, nodes, pods)
    base_placed = BASELINE[0]
    for name, depends in DEPENDS.items():
        key = f"ml/{name}"
        if f"Pod {key}" == broken_label:
            continue
        if broken_label in refused and broken_label in depends and broken_label.startswith(WAITED):
            # Left out by the live loop: the pod waits for it, naming it and its field, also
            # when it is the only Queue (docs/queues.md#a-queue-that-cannot-be-read). (A
            # PriorityClass is not waited for: admission resolved the pod's priority when it
            # was created.)
            assert placed.get(key, "") == "", (key, broken_label)
            assert broken_label.split(" ")[1].split("/")[-1] in pending[key], (key, pending[key])
            said = f"cannot be read: {refused[broken_label].field}: "
            assert said in pending[key], (key, pending[key])
            continue
        if broken_label in depends or broken_label == NODE_OF[name]:
            continue
        assert placed.get(key, "") == base_placed[key], (key, pending.get(key), broken_label)
    if code == 0:
        # The file's plan is the same as the live loop's when nothing was refused.
        plan = json.loads(out)
        bound = {b["pod"]: b["node"] for b in plan["bindings"]}
        if not refused:
            assert bound == {k: v for k, v in placed.items() if v and k not in running}


def _dependents(what: str) -> list[str]:
    return [f"Pod ml/{name}" for name, depends in DEPENDS.items() if what in depends]
