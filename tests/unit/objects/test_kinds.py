"""The kind registry: every list of kinds is derived from it, and every kind it applies to the
state can be applied and removed there."""

from __future__ import annotations

from dataclasses import fields

from batchsched.commands.schedule import build_state
from batchsched.live.kinds import KINDS as COLLECTIONS
from batchsched.live.snapshot import merge_objects
from batchsched.objects.kinds import BY_NAME, KINDS, NAMESPACED
from batchsched.objects.load import Objects
from batchsched.objects.system_classes import SYSTEM_CLASSES
from tests.builders import node, pod, pod_group, priority_class
from tests.conftest import objects_of


def _objects() -> Objects:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": "ml"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}
    return objects_of(
        priority_class("high", 1000),
        node("n1"),
        namespace,
        pdb,
        pod_group("g", 1),
        pod("p", namespace="ml", labels={"app": "a"}, priorityClassName="high"),
    )


def test_objects_keep_one_list_per_kind() -> None:
    notes = {"warnings", "unread", "empty_sources"}  # what reading found besides objects
    lists = {f.name for f in fields(Objects)} - notes
    assert lists == {kind.field for kind in KINDS}


def test_namespaced_kinds_key_by_namespace() -> None:
    objects = _objects()
    assert BY_NAME["Pod"].key(objects.pods[0]) == "ml/p"
    assert BY_NAME["Node"].key(objects.nodes[0]) == "n1"
    assert {"Pod", "PodDisruptionBudget", "PodGroup"} <= NAMESPACED
    assert not {"Node", "PriorityClass", "Namespace"} & NAMESPACED


def test_a_kind_applied_to_the_state_is_removed_by_its_key() -> None:
    objects = _objects()
    state = build_state(objects)
    assert (
        "ml/p" in state.pods.by_key and "n1" in state.nodes.row_of and "ml/g" in state.groups.by_key
    )
    for kind in reversed(KINDS):
        for record in getattr(objects, kind.field):
            state.remove(kind.name, kind.key(record))
    assert not state.pods.by_key and not state.nodes.row_of and not state.groups.by_key
    assert set(state.policy.priority_classes) == set(SYSTEM_CLASSES)  # the API server's own
    assert not state.policy.pdbs


def test_watched_collections_follow_the_registry_order() -> None:
    order = [kind.name for kind in KINDS if kind.in_state]
    watched = [c.manifest_kind for c in COLLECTIONS]
    assert sorted(set(watched), key=watched.index) == order
    assert watched[-1] == "Pod" and watched[0] == "PriorityClass"


def test_a_file_object_replaces_the_cluster_s_object_of_its_kind_and_key() -> None:
    cluster, files = _objects(), objects_of(node("n1", cpu="64"), node("n2"))
    merged = merge_objects(cluster, files)
    assert [n.name for n in merged.nodes] == ["n1", "n2"]
    assert merged.nodes[0] is files.nodes[0]
    assert merged.pods == cluster.pods
