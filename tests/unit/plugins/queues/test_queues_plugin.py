"""The Queues plugin: which queue a pod is in (one rule per test) and admission against
each level's limit, for pods and whole gangs."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.config import parse_config
from batchsched.objects.queue_membership import (
    KAI_QUEUE_LABEL,
    KUEUE_WORKLOAD_ANNOTATION,
    QUEUE_LABEL,
    VOLCANO_QUEUE_ANNOTATION,
)
from batchsched.objects.queues import QUEUE_API
from tests.builders import node, pod, pod_group
from tests.conftest import schedule
from tests.paths import ROOT
from tests.unit.commands.test_cli_errors import run

GPU = "nvidia.com/gpu"


def queue(name: str, parent: str = "", limit: int | None = None, **spec: Any) -> dict[str, Any]:
    resources = {GPU: {} if limit is None else {"limit": limit}}
    body: dict[str, Any] = {"resources": resources, **spec}
    if parent:
        body["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": body}


def gpu_pod(name: str, gpus: int, queue_name: str = "", **kw: Any) -> dict[str, Any]:
    labels = dict(kw.pop("labels", None) or {})
    if queue_name:
        labels[QUEUE_LABEL] = queue_name
    return pod(name, labels=labels, extra_requests={GPU: str(gpus)}, **kw)


NODES = [node("n1", cpu="32", nvidia_com__gpu="8"), node("n2", cpu="32", nvidia_com__gpu="8")]
TREE = [queue("org", limit=12), queue("a", "org", limit=8), queue("b", "org")]


def outcome(*manifests: dict[str, Any]) -> tuple[set[str], dict[str, str]]:
    result = schedule(*NODES, *manifests)
    return {b.pod for b in result.bindings}, result.unschedulable


def test_a_pod_over_its_leaf_limit_stays_pending_naming_the_level() -> None:
    bound, pending = outcome(
        *TREE, gpu_pod("p1", 4, "a"), gpu_pod("p2", 4, "a"), gpu_pod("p3", 2, "a")
    )
    assert bound == {"default/p1", "default/p2"}
    assert pending["default/p3"] == "queue a: nvidia.com/gpu limit 8, in use 8, asks 2"


def test_an_ancestor_limit_holds_back_a_leaf_without_one() -> None:
    running = gpu_pod("a1", 8, "a", node_name="n1", phase="Running")
    bound, pending = outcome(*TREE, running, gpu_pod("b1", 4, "b"), gpu_pod("b2", 2, "b"))
    assert bound == {"default/b1"}
    assert pending["default/b2"] == "queue org: nvidia.com/gpu limit 12, in use 12, asks 2"


def test_bound_pods_count_as_usage_and_a_pod_asking_none_of_a_resource_passes() -> None:
    running = gpu_pod("old", 8, "a", node_name="n1", phase="Running")
    bound, pending = outcome(*TREE, running, gpu_pod("more", 1, "a"), gpu_pod("cpu-only", 0, "a"))
    assert "default/cpu-only" in bound
    assert pending["default/more"] == "queue a: nvidia.com/gpu limit 8, in use 8, asks 1"


def test_a_gang_is_admitted_whole_or_not_at_all() -> None:
    members = [
        gpu_pod(f"g-{i}", 4, namespace="ml", labels={"scheduling.x-k8s.io/pod-group": "g"})
        for i in range(3)
    ]
    group = pod_group("g", 3)
    group["metadata"]["labels"] = {QUEUE_LABEL: "a"}  # the group's label holds for members
    bound, pending = outcome(*TREE, group, *members)
    assert bound == set()
    # The members placed before it count as in use: the third goes over the limit.
    said = "2/3 members can run (0 bound or succeeded, 2 fit); ml/g-2: queue a: nvidia.com/gpu "
    assert said + "limit 8, in use 8, asks 4" in pending["ml/g-0"]
    group["spec"]["minMember"] = 2
    members.pop()
    bound, _ = outcome(*TREE, group, *members)
    assert bound == {"ml/g-0", "ml/g-1"}


def test_the_namespace_label_then_the_default_queue() -> None:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team", "labels": {QUEUE_LABEL: "a"}},
    }
    bound, pending = outcome(*TREE, namespace, gpu_pod("p", 9, namespace="team"))
    assert pending["team/p"].startswith("queue a: nvidia.com/gpu limit 8")
    # Without a label anywhere the pod is in `default` if it exists, else in no queue.
    bound, _ = outcome(*TREE, gpu_pod("free", 8), gpu_pod("free-too", 8))  # 16 > org's 12
    assert bound == {"default/free", "default/free-too"}
    bound, pending = outcome(*TREE, queue("default", limit=2), gpu_pod("capped", 4))
    assert pending["default/capped"] == "queue default: nvidia.com/gpu limit 2, in use 0, asks 4"


def test_unknown_inner_and_disagreeing_queues_keep_the_pod_pending() -> None:
    _, pending = outcome(*TREE, gpu_pod("x", 1, "nowhere"), gpu_pod("y", 1, "org"))
    assert pending["default/x"] == (
        f"queue 'nowhere' (label {QUEUE_LABEL} of the pod) does not exist"
    )
    assert pending["default/y"] == (
        f"queue 'org' (label {QUEUE_LABEL} of the pod) has child queues (a, b): "
        "only leaf queues hold pods"
    )
    both = gpu_pod("z", 1, "a", labels={KAI_QUEUE_LABEL: "b"})
    _, pending = outcome(*TREE, both)
    assert pending["default/z"] == (
        f"queue: label {QUEUE_LABEL} of the pod says 'a' but label {KAI_QUEUE_LABEL} of the "
        "pod says 'b'"
    )


def test_kai_and_volcano_pod_markers_join_a_queue() -> None:
    kai = gpu_pod("kai", 9, labels={KAI_QUEUE_LABEL: "a"})
    volcano = gpu_pod("volcano", 9, annotations={VOLCANO_QUEUE_ANNOTATION: "a"})
    _, pending = outcome(*TREE, kai, volcano)
    assert set(pending) == {"default/kai", "default/volcano"}


def test_exempt_pods_are_never_queued() -> None:
    kueue = gpu_pod("kueue", 6, "a", annotations={KUEUE_WORKLOAD_ANNOTATION: "job-x"})
    critical = gpu_pod("critical", 7, "a", priority_class="system-node-critical")
    daemon = gpu_pod("daemon", 1, "a")
    daemon["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": True}
    ]
    bound, _ = outcome(*TREE, kueue, critical, daemon)
    assert bound == {"default/kueue", "default/critical", "default/daemon"}


def test_a_profile_without_queues_ignores_quotas() -> None:
    config = parse_config(
        {
            "profiles": [
                {
                    "schedulerName": "batchsched",
                    "plugins": {"preFilter": {"disabled": [{"name": "Queues"}]}},
                }
            ]
        }
    )
    result = schedule(*NODES, *TREE, gpu_pod("big", 8, "a"), gpu_pod("more", 8, "a"), config=config)
    assert len(result.bindings) == 2


def test_the_three_teams_example_holds_back_at_each_teams_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["schedule", str(ROOT / "examples" / "queues" / "three-teams.yaml")], capsys)
    assert code == 0
    # In fair-share order (docs/queues.md#queue-order): vision gets its nominal 16, nlp its
    # 8, ops 4 (then its limit holds eval-1 back); what is left fits no 8-GPU pod.
    assert "ops/eval-1      queue ops: nvidia.com/gpu limit 8, in use 4, asks 8" in out
    bound = out.split("EVICTIONS")[0]
    for placed in ("vision/train-0", "vision/train-1", "nlp/finetune-0", "ops/eval-0"):
        assert placed in bound


def test_a_gang_is_held_to_its_limit_by_the_members_it_places_now() -> None:
    # minMember 2 of 3 members of 4 GPUs, a limit of 8: two are placed now (upstream places
    # minMember first), the third waits for room under the limit and joins later alone.
    members = [
        gpu_pod(f"g-{i}", 4, namespace="ml", labels={"scheduling.x-k8s.io/pod-group": "g"})
        for i in range(3)
    ]
    group = pod_group("g", 2)
    group["metadata"]["labels"] = {QUEUE_LABEL: "a"}
    bound, pending = outcome(*TREE, group, *members)
    assert bound == {"ml/g-0", "ml/g-1"}
    assert pending == {"ml/g-2": "queue a: nvidia.com/gpu limit 8, in use 8, asks 4"}
    # Two running already: the third, alone, is held by the limit as a pod is.
    running = [{**m, "spec": {**m["spec"], "nodeName": "n1"}} for m in members[:2]]
    for m in running:
        m["status"] = {"phase": "Running"}
    bound, pending = outcome(*TREE, group, *running, members[2])
    assert bound == set()
    assert pending == {"ml/g-2": "queue a: nvidia.com/gpu limit 8, in use 8, asks 4"}
    # Room for one more under the limit: it joins.
    group_b = [queue("org", limit=16), queue("a", "org", limit=12), queue("b", "org")]
    bound, pending = outcome(*group_b, group, *running, members[2])
    assert bound == {"ml/g-2"}
