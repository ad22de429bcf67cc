"""Storage objects read from files, and the volume plugins' rules that scenarios do not show."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Bind, BindVolumes
from batchsched.framework.runtime import Framework
from batchsched.objects.errors import ManifestError
from batchsched.objects.records import Node, NodeSelectorTerm, Requirement
from batchsched.plugins.nodeaffinity.plugin import terms_mask
from batchsched.plugins.volumebinding.affinity import AffinityIndex
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.volumes import ClaimBinding
from tests.builders import node, pod
from tests.conftest import objects_of, schedule

BOUND = {"pv.kubernetes.io/bind-completed": "yes"}


def pv(name: str, hostname: str = "", **spec: Any) -> dict[str, Any]:
    if hostname:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": [hostname],
                            }
                        ]
                    }
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
    }


def pvc(name: str, volume: str = "", **spec: Any) -> dict[str, Any]:
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "annotations": BOUND if volume else {}},
        "spec": {"storageClassName": "", **spec},
    }


def wffc_class(name: str, provisioner: str) -> dict[str, Any]:
    return {
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def claim_pod(name: str, *claims: str, **kwargs: Any) -> dict[str, Any]:
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return pod(name, volumes=volumes, **kwargs)


@pytest.mark.parametrize(
    ("manifest", "where"),
    [
        (pv("v", nodeAffinity={"required": {"nodeSelectorTerms": []}}), "nodeSelectorTerms"),
        (
            pv(
                "v",
                nodeAffinity={
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "k", "operator": "Near"}]}
                        ]
                    }
                },
            ),
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator",
        ),
        (pvc("c", accessModes=[3]), "spec.accessModes[0]"),
        # A volume's modes as a claim's: strings the API knows (a number or an unknown mode
        # used to be read as its text, and matched no claim).
        (pv("v", accessModes=[3]), "spec.accessModes[0]: must be a string"),
        (pv("v", accessModes=["ReadWriteSometimes"]), "spec.accessModes[0]: 'ReadWrite"),
        (pvc("c", accessModes=["RWO"]), "spec.accessModes[0]: 'RWO' is not one of ReadWriteOnce"),
        (
            {
                "kind": "StorageClass",
                "metadata": {"name": "s"},
                "provisioner": "p",
                "volumeBindingMode": "Later",
            },
            "volumeBindingMode",
        ),
        ({"kind": "StorageClass", "metadata": {"name": "s"}}, "provisioner"),
        (
            {
                "kind": "CSINode",
                "metadata": {"name": "n"},
                "spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]},
            },
            "spec.drivers[0].allocatable.count",
        ),
        (pod("p", volumes=[{"name": "v", "persistentVolumeClaim": {}}]), "claimName"),
        (
            {"kind": "CSIStorageCapacity", "metadata": {"name": "c", "namespace": "ns"}},
            "CSIStorageCapacity ns/c: storageClassName: is required",
        ),
        (
            {
                "kind": "CSIStorageCapacity",
                "metadata": {"name": "c", "namespace": "ns"},
                "storageClassName": "s",
                "capacity": "lots",
            },
            "CSIStorageCapacity ns/c: capacity",
        ),
        (
            {"kind": "CSIDriver", "metadata": {"name": "d"}, "spec": {"storageCapacity": "yes"}},
            "CSIDriver d: spec.storageCapacity",
        ),
        (pod("p", volumes=[{"name": "v", "iscsi": {"lun": 0}}]), "spec.volumes[0].iscsi.iqn"),
        (
            pod("p", volumes=[{"name": "v", "rbd": {"image": "i"}}]),
            "spec.volumes[0].rbd.monitors",
        ),
    ],
)
def test_malformed_storage_objects_name_object_and_field(
    manifest: dict[str, Any], where: str
) -> None:
    with pytest.raises(ManifestError) as err:
        objects_of(manifest)
    assert where in str(err.value)


def test_a_storage_object_defined_twice_is_an_error() -> None:
    objects = objects_of(pv("v"), pv("v"))
    with pytest.raises(ManifestError, match="PersistentVolume v: defined more than once"):
        objects.check_unique("f.yaml")


def test_unknown_claim_fields_are_warned_about() -> None:
    objects = objects_of(pvc("c", storageClasName="x"))
    assert any("spec.storageClasName" in w for w in objects.warnings)


def test_the_beta_class_annotation_wins_over_the_field() -> None:
    manifest = pvc("c", storageClassName="fast")
    manifest["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "slow"}
    assert objects_of(manifest).claims[0].storage_class == "slow"


def test_a_claim_without_class_binds_immediately_so_an_unbound_one_waits() -> None:
    # Upstream does not apply the default class in the scheduler: "" means Immediate.
    result = schedule(node("n1"), pvc("c"), claim_pod("p", "c"))
    assert result.unschedulable["default/p"] == "pod has unbound immediate PersistentVolumeClaims"


def test_pods_placed_earlier_in_the_pass_count_against_the_attach_limit() -> None:
    csi_node = {
        "kind": "CSINode",
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "d", "allocatable": {"count": 1}}]},
    }
    volumes = [pv(f"v{i}", csi={"driver": "d", "volumeHandle": f"h{i}"}) for i in range(2)]
    claims = [pvc(f"c{i}", f"v{i}") for i in range(2)]
    pods = [claim_pod(f"p{i}", f"c{i}") for i in range(2)]
    result = schedule(node("n1"), csi_node, *volumes, *claims, *pods)
    assert [b.pod for b in result.bindings] == ["default/p0"]
    assert "1 node(s) exceed max volume count" in result.unschedulable["default/p1"]


def test_a_volume_shared_with_a_pod_on_the_node_is_not_counted_twice() -> None:
    csi_node = {
        "kind": "CSINode",
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "d", "allocatable": {"count": 1}}]},
    }
    volume = pv("v0", csi={"driver": "d", "volumeHandle": "h0"})
    result = schedule(
        node("n1"), csi_node, volume, pvc("c0", "v0"), claim_pod("p0", "c0"), claim_pod("p1", "c0")
    )
    assert sorted(b.pod for b in result.bindings) == ["default/p0", "default/p1"]


def test_pods_with_other_claims_are_never_twins() -> None:
    """Two pods of one shape but different volumes get their own answers."""
    result = schedule(
        node("n1", labels={"kubernetes.io/hostname": "n1"}),
        node("n2", labels={"kubernetes.io/hostname": "n2"}),
        pv("v1", hostname="n1"),
        pv("v2", hostname="n2"),
        pvc("c1", "v1"),
        pvc("c2", "v2"),
        claim_pod("a", "c2", cpu="1"),
        claim_pod("b", "c1", cpu="1"),
        claim_pod("c", "c2", cpu="1"),
    )
    assert {b.pod: b.node for b in result.bindings} == {
        "default/a": "n2",
        "default/b": "n1",
        "default/c": "n2",
    }
    state = build_state(objects_of(claim_pod("x", "c1"), claim_pod("y", "c2"), pod("z")))
    framework = Framework(default_config().profiles[0])
    keys = [
        framework.shapes.key(state, record, state.pods.demand(record))
        for record in (state.pods.by_key[f"default/{name}"] for name in "xyz")
    ]
    assert len(set(keys)) == 3


LABEL_VALUES = st.sampled_from(["a", "b", "c"])


@settings(max_examples=40, deadline=None)
@given(
    labels=st.lists(st.dictionaries(st.sampled_from(["k1", "k2"]), LABEL_VALUES), max_size=6),
    terms=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["k1", "k2"]),
                st.sampled_from(["In", "NotIn", "Exists"]),
                st.lists(LABEL_VALUES, min_size=1, max_size=2),
            ),
            max_size=2,
        ),
        min_size=1,
        max_size=2,
    ),
)
def test_the_affinity_index_agrees_with_node_affinity(
    labels: list[dict[str, str]], terms: list[list[tuple[str, str, list[str]]]]
) -> None:
    state = ClusterState()
    for i, node_labels in enumerate(labels):
        state.upsert_node(Node(f"n{i}", {"cpu": 1}, labels=node_labels))
    selector = tuple(
        NodeSelectorTerm(
            tuple(
                Requirement(k, op, tuple(v) if op != "Exists" else ())  # type: ignore[arg-type]
                for k, op, v in term
            ),
            (),
        )
        for term in terms
    )
    index = AffinityIndex()
    assert np.array_equal(index.mask(state, selector), terms_mask(state, selector))


def test_a_pod_leaving_frees_its_attach_slot() -> None:
    state = build_state(
        objects_of(
            node("n1"),
            {
                "kind": "CSINode",
                "metadata": {"name": "n1"},
                "spec": {"drivers": [{"name": "d", "allocatable": {"count": 1}}]},
            },
            pv("v0", csi={"driver": "d", "volumeHandle": "h0"}),
            pvc("c0", "v0"),
            claim_pod("p0", "c0", node_name="n1"),
        )
    )
    assert state.volumes.attach_counts["d"][0] == 1
    state.remove_pod("default/p0")
    assert state.volumes.attach_counts["d"][0] == 0
    assert state.volumes.volume_rows == {}
    assert state.volumes.users == {}


def test_a_claim_provisioned_for_one_pod_keeps_its_node_for_the_next() -> None:
    wffc = wffc_class("fast", "ebs.csi.aws.com")
    claim = pvc("shared", storageClassName="fast", accessModes=["ReadWriteMany"])
    result = schedule(
        node("n1"),
        node("n2"),
        wffc,
        claim,
        claim_pod("first", "shared"),
        claim_pod("second", "shared"),
        node("n3"),
    )
    placed = {b.pod: b.node for b in result.bindings}
    assert placed["default/second"] == placed["default/first"]
    assert [(b.claim, b.volume) for b in result.volume_bindings] == [("default/shared", "")]


def test_a_deleting_or_released_volume_is_not_matched() -> None:
    wffc = wffc_class("local", "kubernetes.io/no-provisioner")
    deleting = pv("a", storageClassName="local", capacity={"storage": "1Gi"})
    deleting["metadata"]["deletionTimestamp"] = "2026-11-22T09:00:00Z"
    released = pv("b", storageClassName="local", capacity={"storage": "1Gi"})
    released["status"] = {"phase": "Released"}
    claim = pvc("c", storageClassName="local", resources={"requests": {"storage": "1Gi"}})
    result = schedule(node("n1"), wffc, deleting, released, claim, claim_pod("p", "c"))
    assert "didn't find available persistent volumes to bind" in result.unschedulable["default/p"]


@pytest.mark.parametrize(
    ("claim_class", "volume_class", "matches"),
    [
        (None, None, True),
        (None, "", True),  # unset and "" both mean no VolumeAttributesClass, as upstream
        ("", None, True),
        ("fast", "fast", True),
        ("fast", None, False),
        (None, "fast", False),
        ("", "fast", False),
        ("fast", "slow", False),
    ],
)
@pytest.mark.parametrize("pre_bound", [False, True])
def test_a_volume_serves_a_claim_only_of_the_same_attributes_class(
    claim_class: str | None, volume_class: str | None, matches: bool, pre_bound: bool
) -> None:
    from batchsched.objects.volume_parse import read_pv, read_pvc
    from batchsched.plugins.volumebinding.matching import serves

    volume = pv("v", storageClassName="local", capacity={"storage": "1Gi"})
    claim = pvc("c", storageClassName="local", resources={"requests": {"storage": "1Gi"}})
    if pre_bound:  # a PV pre-bound to the claim is passed over too, as upstream
        volume["spec"]["claimRef"] = {"namespace": "default", "name": "c"}
    if volume_class is not None:
        volume["spec"]["volumeAttributesClassName"] = volume_class
    if claim_class is not None:
        claim["spec"]["volumeAttributesClassName"] = claim_class
    assert serves(read_pv(volume), read_pvc(claim)) is matches


def test_a_volume_pre_bound_to_the_claim_must_still_be_large_enough() -> None:
    from batchsched.objects.volume_parse import read_pv, read_pvc
    from batchsched.plugins.volumebinding.matching import serves

    small = pv("v", capacity={"storage": "1Gi"}, claimRef={"namespace": "default", "name": "c"})
    claim = pvc("c", storageClassName="other", resources={"requests": {"storage": "2Gi"}})
    assert not serves(read_pv(small), read_pvc(claim))
    claim["spec"]["resources"]["requests"]["storage"] = "1Gi"
    assert serves(read_pv(small), read_pvc(claim))  # class is not asked of a pre-bound PV


def test_an_attributes_class_that_is_not_a_string_is_an_error() -> None:
    from batchsched.objects.volume_parse import read_pv, read_pvc

    with pytest.raises(ManifestError, match=r"spec\.volumeAttributesClassName"):
        read_pvc(pvc("c", volumeAttributesClassName=3))
    with pytest.raises(ManifestError, match=r"PersistentVolume v: spec\.volumeAttributesClassName"):
        read_pv(pv("v", volumeAttributesClassName=["fast"]))


def test_an_unbound_claim_waits_for_a_volume_of_its_attributes_class() -> None:
    wffc = wffc_class("local", "kubernetes.io/no-provisioner")
    slow = pv("slow", "n1", storageClassName="local", capacity={"storage": "1Gi"})
    slow["spec"]["volumeAttributesClassName"] = "slow"
    fast = pv("fast", "n2", storageClassName="local", capacity={"storage": "1Gi"})
    fast["spec"]["volumeAttributesClassName"] = "fast"
    claim = pvc(
        "c",
        storageClassName="local",
        volumeAttributesClassName="fast",
        resources={"requests": {"storage": "1Gi"}},
    )
    nodes = [node(n, labels={"kubernetes.io/hostname": n}) for n in ("n1", "n2")]
    result = schedule(*nodes, wffc, slow, fast, claim, claim_pod("p", "c"))
    assert {b.pod: b.node for b in result.bindings} == {"default/p": "n2"}
    assert [(b.claim, b.volume) for b in result.volume_bindings] == [("default/c", "fast")]


def test_an_assumed_binding_outlives_stale_reports_until_reverted() -> None:
    from batchsched.objects.volumes import PersistentVolume, PersistentVolumeClaim
    from batchsched.state.volumes import VolumeObjects

    volumes = VolumeObjects()
    volumes.upsert(PersistentVolume("pv", storage_class="local"))
    volumes.upsert(PersistentVolumeClaim("ns", "data", storage_class="local"))
    volumes.upsert(PersistentVolumeClaim("ns", "scratch", storage_class="local"))
    volumes.bind("ns/p", volumes.claims["ns/data"], "pv", "n1")
    volumes.bind("ns/p", volumes.claims["ns/scratch"], "", "n1")
    # A report from before the PreBind's writes does not free what the pod took.
    volumes.upsert(PersistentVolume("pv", storage_class="local", labels={"a": "b"}))
    volumes.upsert(PersistentVolumeClaim("ns", "scratch", storage_class="local"))
    assert volumes.volumes["pv"].claim_ref == "ns/data"
    assert volumes.volumes["pv"].labels == {"a": "b"}
    assert volumes.claims["ns/data"].bound
    assert volumes.claims["ns/scratch"].selected_node == "n1"
    # The bind failed: the objects are as last reported.
    volumes.revert("ns/p")
    assert volumes.volumes["pv"].claim_ref == ""
    assert volumes.volumes["pv"].labels == {"a": "b"}
    assert not volumes.claims["ns/data"].bound
    assert volumes.claims["ns/scratch"].selected_node == ""
    # Reports showing the writes take over; confirming keeps them.
    volumes.bind("ns/p", volumes.claims["ns/scratch"], "", "n2")
    volumes.upsert(
        PersistentVolumeClaim("ns", "scratch", storage_class="local", selected_node="n2")
    )
    volumes.confirm("ns/p")
    volumes.upsert(PersistentVolumeClaim("ns", "scratch", storage_class="local"))
    assert volumes.claims["ns/scratch"].selected_node == ""  # no longer assumed


def test_a_failed_bind_gives_the_claims_back() -> None:
    wffc = wffc_class("local", "kubernetes.io/no-provisioner")
    state = build_state(
        objects_of(
            node("n1"),
            wffc,
            pv("v", storageClassName="local", capacity={"storage": "1Gi"}),
            pvc("c", storageClassName="local", resources={"requests": {"storage": "1Gi"}}),
            claim_pod("p", "c"),
        )
    )
    scheduler = Scheduler(state, default_config())
    (bind,) = scheduler.schedule_pass(datetime(2026, 11, 22, tzinfo=UTC))
    assert isinstance(bind, Bind) and bind.node == "n1"
    assert bind.pre_bind == (
        BindVolumes((ClaimBinding("default/p", "default/c", "n1", "v"),), 600),
    )
    assert state.volumes.volumes["v"].claim_ref == "default/c"
    state.forget("default/p")
    assert state.volumes.volumes["v"].claim_ref == ""
    assert not state.volumes.claims["default/c"].bound


def _member(name: str, *claims: str) -> dict[str, Any]:
    return claim_pod(name, *claims, labels={"scheduling.x-k8s.io/pod-group": "g"})


def test_gang_members_bind_their_claims_together_or_not_at_all() -> None:
    from tests.builders import pod_group

    local = wffc_class("local", "kubernetes.io/no-provisioner")
    size = {"storage": "1Gi"}
    volumes = [pv(f"v{i}", f"n{i}", storageClassName="local", capacity=size) for i in (1, 2)]
    claims = [pvc(f"c{i}", storageClassName="local", resources={"requests": size}) for i in (1, 2)]
    nodes = [node(f"n{i}", labels={"kubernetes.io/hostname": f"n{i}"}) for i in (1, 2)]
    group = pod_group("g", 2, namespace="default")
    gang = [_member("m1", "c1"), _member("m2", "c2")]
    result = schedule(*nodes, local, *volumes, *claims, group, *gang)
    chosen = {b.claim: (b.pod, b.node, b.volume) for b in result.volume_bindings}
    assert len(result.bindings) == 2
    assert {pod for pod, _, _ in chosen.values()} == {"default/m1", "default/m2"}
    assert sorted(volume for _, _, volume in chosen.values()) == ["v1", "v2"]
    placed = {b.pod: b.node for b in result.bindings}
    assert all(placed[pod] == node for pod, node, _ in chosen.values())
    # One volume for two members: neither binds, and no claim is left bound.
    result = schedule(*nodes, local, volumes[0], *claims, group, *gang)
    assert result.bindings == [] and result.volume_bindings == []
    assert "didn't find available persistent volumes" in result.unschedulable["default/m2"]


def test_gang_members_see_each_others_read_write_once_pod_claims() -> None:
    from tests.builders import pod_group

    claim = pvc("only", "v", accessModes=["ReadWriteOncePod"])
    group = pod_group("g", 2, namespace="default")
    gang = [_member("m1", "only"), _member("m2", "only")]
    result = schedule(node("n1"), node("n2"), pv("v"), claim, group, *gang)
    assert result.bindings == []
    assert "ReadWriteOncePod access mode already in-use" in result.unschedulable["default/m2"]


def test_a_pre_bound_volume_outside_the_node_leaves_the_claim_no_other_volume() -> None:
    # Upstream's FindMatchingVolume returns no match when the PV pre-bound to the claim fails
    # the node's affinity, even if another available PV would fit there.
    wffc = wffc_class("local", "kubernetes.io/no-provisioner")
    pre_bound = pv("pinned", "n1", storageClassName="local", capacity={"storage": "1Gi"})
    pre_bound["spec"]["claimRef"] = {"namespace": "default", "name": "c"}
    other = pv("other", "n2", storageClassName="local", capacity={"storage": "1Gi"})
    claim = pvc("c", storageClassName="local", resources={"requests": {"storage": "1Gi"}})
    n1 = node("n1", labels={"kubernetes.io/hostname": "n1"}, cpu="0")
    n2 = node("n2", labels={"kubernetes.io/hostname": "n2"})
    result = schedule(n1, n2, wffc, pre_bound, other, claim, claim_pod("p", "c"))
    assert result.bindings == []
    assert "didn't find available persistent volumes to bind" in result.unschedulable["default/p"]
