"""CSI-migrated in-tree disks: the handles they translate to, their count against the
migrated driver's attach limit (NodeVolumeLimits), VolumeRestrictions' GCE PD and EBS
rules, and VolumeBinding's translated node affinity. One rule per test."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.csi_migration import (
    TranslationError,
    inline_handle,
    provisioner_driver,
    pv_affinity,
    pv_handle,
)
from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import read_pod
from batchsched.objects.records import NodeSelectorTerm, Requirement
from tests.builders import node, pod
from tests.conftest import objects_of, schedule
from tests.unit.state.test_volumes import claim_pod, pv, pvc, wffc_class

GCE = "pd.csi.storage.gke.io"
EBS = "ebs.csi.aws.com"
EXCEEDS = "1 node(s) exceed max volume count"
NO_DISK = "1 node(s) had no available disk"


def csi_node(name: str = "n1", **counts: int) -> dict[str, Any]:
    drivers = [
        {"name": driver.replace("_", "."), "allocatable": {"count": count}}
        for driver, count in counts.items()
    ]
    return {"kind": "CSINode", "metadata": {"name": name}, "spec": {"drivers": drivers}}


def disk_pod(name: str, kind: str, source: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return pod(name, volumes=[{"name": "d", kind: source}], **kwargs)


def attached(kind: str, source: dict[str, Any]) -> list[tuple[str, str, str]]:
    disks = read_pod(disk_pod("p", kind, source)).disks
    return [(d.driver, d.handle, d.untranslatable) for d in disks]


# --- translation -----------------------------------------------------------------------


def test_an_inline_gce_pd_has_no_zone_in_its_handle() -> None:
    handle = inline_handle("gcePersistentDisk", {"pdName": "d1"})
    assert handle == "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d1"


@pytest.mark.parametrize(
    ("labels", "handle"),
    [
        ({}, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d1"),
        (
            {"topology.kubernetes.io/zone": "us-east1-b"},
            "projects/UNSPECIFIED/zones/us-east1-b/disks/d1",
        ),
        (  # the beta key is read first
            {
                "failure-domain.beta.kubernetes.io/zone": "eu-west1-a",
                "topology.kubernetes.io/zone": "us-east1-b",
            },
            "projects/UNSPECIFIED/zones/eu-west1-a/disks/d1",
        ),
        (  # regional: several zones of one region
            {"topology.kubernetes.io/zone": "us-east1-b__us-east1-c"},
            "projects/UNSPECIFIED/regions/us-east1/disks/d1",
        ),
    ],
)
def test_a_gce_pd_pv_handle_names_its_zone_or_region(labels: dict[str, str], handle: str) -> None:
    assert pv_handle("gcePersistentDisk", {"pdName": "d1"}, labels) == handle


@pytest.mark.parametrize("zones", ["us-east1-b__europe-west1-b", "us-east1-b__zone2"])
def test_a_regional_gce_pd_in_no_single_region_cannot_be_translated(zones: str) -> None:
    labels = {"topology.kubernetes.io/zone": zones}
    with pytest.raises(TranslationError, match="failed to get region from zones"):
        pv_handle("gcePersistentDisk", {"pdName": "d1"}, labels)


@pytest.mark.parametrize(
    ("volume_id", "handle"),
    [("vol-1", "vol-1"), ("aws://us-east-1a/vol-1", "vol-1"), ("aws:///vol-2", "vol-2")],
)
def test_an_ebs_handle_is_the_bare_volume_id(volume_id: str, handle: str) -> None:
    assert inline_handle("awsElasticBlockStore", {"volumeID": volume_id}) == handle


@pytest.mark.parametrize("volume_id", ["aws://us-east-1a/disk-1", "aws://vol-1", "aws://z/a/vol-1"])
def test_an_ebs_url_without_a_volume_id_cannot_be_translated(volume_id: str) -> None:
    with pytest.raises(TranslationError, match=r"Invalid format for AWS volume \(aws://"):
        inline_handle("awsElasticBlockStore", {"volumeID": volume_id})


def test_only_a_managed_azure_disk_migrates_and_the_api_default_kind_is_shared() -> None:
    source = {"diskName": "d", "diskURI": "/subscriptions/s/resourceGroups/g/providers/x/d"}
    assert inline_handle("azureDisk", {**source, "kind": "Managed"}) == source["diskURI"]
    for kind in (None, "Shared", "Dedicated"):
        with pytest.raises(TranslationError, match=r"is not supported in csi migration"):
            inline_handle("azureDisk", source if kind is None else {**source, "kind": kind})


def test_each_counted_inline_disk_names_its_driver_and_handle() -> None:
    assert attached("cinder", {"volumeID": "c1"}) == [("cinder.csi.openstack.org", "c1", "")]
    assert attached("portworxVolume", {"volumeID": "p1"}) == [("pxd.portworx.com", "p1", "")]
    assert attached("awsElasticBlockStore", {"volumeID": "aws://z/vol-9"}) == [(EBS, "vol-9", "")]


def test_azure_file_and_vsphere_volumes_are_not_counted_as_upstream() -> None:
    assert attached("azureFile", {"secretName": "s", "shareName": "x"}) == []
    assert attached("vsphereVolume", {"volumePath": "[ds] v.vmdk"}) == []
    azure_file = pv("v", azureFile={"secretName": "s", "shareName": "x"})
    assert objects_of(azure_file).volumes[0].csi_driver == ""


def test_an_untranslatable_inline_disk_keeps_its_own_id_and_upstream_s_message() -> None:
    [(driver, handle, why)] = attached("awsElasticBlockStore", {"volumeID": "aws://z/bad"})
    assert (driver, handle) == (EBS, "aws://z/bad")
    assert why.startswith("converting volume(d) from inline to csi: failed to translate")


def test_an_untranslatable_pv_is_not_counted_as_upstream() -> None:
    bad = pv("v", awsElasticBlockStore={"volumeID": "aws://z/bad"})
    good = pv("w", awsElasticBlockStore={"volumeID": "aws://z/vol-1"})
    volumes = objects_of(bad, good).volumes
    assert [(v.csi_driver, v.csi_handle) for v in volumes] == [("", ""), (EBS, "vol-1")]


def test_an_in_tree_provisioner_counts_under_its_csi_driver() -> None:
    assert provisioner_driver("kubernetes.io/gce-pd") == GCE
    assert provisioner_driver("kubernetes.io/vsphere-volume") == ""  # not counted upstream
    assert provisioner_driver("example.com/nfs") == "example.com/nfs"


@pytest.mark.parametrize(
    ("manifest", "field"),
    [
        (disk_pod("p", "gcePersistentDisk", {"readOnly": True}), "gcePersistentDisk.pdName"),
        (disk_pod("p", "awsElasticBlockStore", {"volumeID": ""}), "volumeID"),
        (pv("v", cinder={"fsType": "ext4"}), "spec.cinder.volumeID"),
    ],
)
def test_a_migrated_disk_without_its_id_is_an_error_naming_the_field(
    manifest: dict[str, Any], field: str
) -> None:
    with pytest.raises(ManifestError, match=field):
        objects_of(manifest)


# --- NodeVolumeLimits ------------------------------------------------------------------


def test_inline_and_csi_volumes_of_one_driver_share_its_limit() -> None:
    volume = pv("v", csi={"driver": GCE, "volumeHandle": "h"})
    result = schedule(
        node("n1"),
        csi_node(pd_csi_storage_gke_io=2),
        volume,
        pvc("c", "v"),
        claim_pod("csi", "c", node_name="n1"),
        disk_pod("inline-1", "gcePersistentDisk", {"pdName": "a"}),
        disk_pod("inline-2", "gcePersistentDisk", {"pdName": "b"}, created="2026-11-22T09:00:01Z"),
    )
    assert [b.pod for b in result.bindings] == ["default/inline-1"]
    assert result.evictions == []
    assert EXCEEDS in result.unschedulable["default/inline-2"]


def test_a_disk_mounted_inline_and_through_an_in_tree_pv_counts_once() -> None:
    # Both translate to the EBS handle vol-1: the new pod attaches nothing new.
    volume = pv("v", awsElasticBlockStore={"volumeID": "vol-1"})
    result = schedule(
        node("n1"),
        csi_node(ebs_csi_aws_com=1),
        volume,
        pvc("c", "v"),
        claim_pod("holder", "c", node_name="n1"),
        disk_pod("same", "awsElasticBlockStore", {"volumeID": "aws://us-east-1a/vol-1"}),
        disk_pod("other", "awsElasticBlockStore", {"volumeID": "vol-2"}),
    )
    assert [b.pod for b in result.bindings] == ["default/same"]
    assert EXCEEDS in result.unschedulable["default/other"]


def test_pods_another_scheduler_placed_count_with_their_in_tree_disks() -> None:
    result = schedule(
        node("n1"),
        csi_node(cinder_csi_openstack_org=1),
        disk_pod("theirs", "cinder", {"volumeID": "c1"}, node_name="n1", scheduler="other"),
        disk_pod("ours", "cinder", {"volumeID": "c2"}),
    )
    assert result.bindings == []
    assert EXCEEDS in result.unschedulable["default/ours"]


def test_a_claim_to_provision_with_an_in_tree_provisioner_counts_under_its_csi_driver() -> None:
    result = schedule(
        node("n1"),
        csi_node(pd_csi_storage_gke_io=1),
        wffc_class("standard", "kubernetes.io/gce-pd"),
        pvc("c", storageClassName="standard", resources={"requests": {"storage": "1Gi"}}),
        disk_pod("inline", "gcePersistentDisk", {"pdName": "a"}, node_name="n1"),
        claim_pod("p", "c"),
    )
    assert result.bindings == []
    assert EXCEEDS in result.unschedulable["default/p"]


def test_an_untranslatable_inline_disk_keeps_its_pod_off_nodes_with_a_csi_node() -> None:
    bad = disk_pod("bad", "azureDisk", {"diskName": "d", "diskURI": "https://a/vhds/d.vhd"})
    result = schedule(node("n1"), node("n2"), csi_node("n1"), bad)
    assert [(b.pod, b.node) for b in result.bindings] == [("default/bad", "n2")]
    alone = schedule(node("n1"), csi_node("n1"), bad)
    assert "kind(Shared) is not supported in csi migration" in alone.unschedulable["default/bad"]


def test_a_placed_pod_s_untranslatable_disk_still_takes_a_slot() -> None:
    result = schedule(
        node("n1"),
        csi_node(ebs_csi_aws_com=1),
        disk_pod("theirs", "awsElasticBlockStore", {"volumeID": "aws://z/x"}, node_name="n1"),
        disk_pod("ours", "awsElasticBlockStore", {"volumeID": "vol-2"}),
    )
    assert EXCEEDS in result.unschedulable["default/ours"]


def test_preemption_frees_the_slot_of_an_inline_disk() -> None:
    result = schedule(
        node("n1"),
        csi_node(pd_csi_storage_gke_io=1),
        disk_pod("low", "gcePersistentDisk", {"pdName": "a"}, node_name="n1", priority=0),
        disk_pod("high", "gcePersistentDisk", {"pdName": "b"}, priority=100),
    )
    assert [(e.pod, e.preemptor) for e in result.evictions] == [("default/low", "default/high")]


# --- VolumeRestrictions ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("theirs", "ours", "conflict"),
    [
        ({"pdName": "a"}, {"pdName": "a", "readOnly": True}, True),
        ({"pdName": "a", "readOnly": True}, {"pdName": "a"}, True),
        ({"pdName": "a", "readOnly": True}, {"pdName": "a", "readOnly": True}, False),
        ({"pdName": "a"}, {"pdName": "b"}, False),
    ],
)
def test_a_gce_pd_has_one_writer_per_node(
    theirs: dict[str, Any], ours: dict[str, Any], conflict: bool
) -> None:
    result = schedule(
        node("n1"),
        disk_pod("theirs", "gcePersistentDisk", theirs, node_name="n1"),
        disk_pod("ours", "gcePersistentDisk", ours),
    )
    assert (NO_DISK in result.unschedulable.get("default/ours", "")) is conflict


@pytest.mark.parametrize(
    ("theirs", "ours", "conflict"),
    [
        ("vol-1", "vol-1", True),
        ("vol-1", "vol-2", False),
        ("vol-1", "aws://z/vol-1", False),  # upstream compares the volumeIDs as written
    ],
)
def test_an_ebs_volume_is_one_pod_s_per_node_even_read_only(
    theirs: str, ours: str, conflict: bool
) -> None:
    result = schedule(
        node("n1"),
        disk_pod(
            "theirs", "awsElasticBlockStore", {"volumeID": theirs, "readOnly": True}, node_name="n1"
        ),
        disk_pod("ours", "awsElasticBlockStore", {"volumeID": ours, "readOnly": True}),
    )
    assert (NO_DISK in result.unschedulable.get("default/ours", "")) is conflict


def test_other_migrated_disks_have_no_conflict_rule() -> None:
    result = schedule(
        node("n1"),
        disk_pod("theirs", "cinder", {"volumeID": "c1"}, node_name="n1"),
        disk_pod("ours", "cinder", {"volumeID": "c1"}),
    )
    assert [b.pod for b in result.bindings] == ["default/ours"]


# --- VolumeBinding: an in-tree PV's node affinity where its plugin is migrated -----------

GKE_ZONE = "topology.gke.io/zone"
MIGRATED = {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/gce-pd"}


def named(name: str, **labels: str) -> dict[str, Any]:
    return node(name, labels={"kubernetes.io/hostname": name, **labels})


def zone_term(key: str, *zones: str) -> NodeSelectorTerm:
    return NodeSelectorTerm((Requirement(key, "In", zones),), ())


def test_a_zone_label_becomes_a_requirement_on_the_driver_s_zone_key() -> None:
    labels = {"topology.kubernetes.io/zone": "us-east1-b__us-east1-c"}
    assert pv_affinity("gcePersistentDisk", (), labels) == (
        zone_term(GKE_ZONE, "us-east1-b", "us-east1-c"),
    )


def test_zone_requirements_are_rekeyed_and_the_beta_region_becomes_ga() -> None:
    terms = (
        NodeSelectorTerm(
            (
                Requirement("failure-domain.beta.kubernetes.io/zone", "In", ("z1",)),
                Requirement("failure-domain.beta.kubernetes.io/region", "In", ("r1",)),
            ),
            (),
        ),
    )
    assert pv_affinity("awsElasticBlockStore", terms, {}) == (
        NodeSelectorTerm(
            (
                Requirement("topology.ebs.csi.aws.com/zone", "In", ("z1",)),
                Requirement("topology.kubernetes.io/region", "In", ("r1",)),
            ),
            (),
        ),
    )


def test_azure_disk_and_portworx_pvs_keep_their_affinity() -> None:
    labels = {"topology.kubernetes.io/zone": "z1"}
    assert pv_affinity("azureDisk", (), labels) == ()
    assert pv_affinity("portworxVolume", (), labels) == ()


def test_the_migrated_plugins_annotation_is_read() -> None:
    manifest = csi_node()
    manifest["metadata"]["annotations"] = {
        "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/gce-pd,kubernetes.io/cinder"
    }
    [read] = objects_of(manifest).csi_nodes
    assert read.migrated_plugins == {"kubernetes.io/gce-pd", "kubernetes.io/cinder"}


def test_a_bound_in_tree_pv_needs_the_driver_s_zone_label_only_on_migrated_nodes() -> None:
    zone = {"topology.kubernetes.io/zone": "us-east1-b"}
    migrated = [csi_node(name) for name in ("bare", "gke")]
    for manifest in migrated:
        manifest["metadata"]["annotations"] = MIGRATED
    volume = pv("v", gcePersistentDisk={"pdName": "d1"})
    volume["metadata"]["labels"] = zone
    nodes = [
        named("bare", **zone),  # migrated, without the driver's zone label
        named("gke", **zone, **{GKE_ZONE: "us-east1-b"}),
        named("old", **zone),  # not migrated: the PV's own (empty) affinity
    ]
    pinned = [
        claim_pod(f"to-{n}", "c", node_selector={"kubernetes.io/hostname": n})
        for n in ("bare", "gke", "old")
    ]
    result = schedule(*nodes, *migrated, volume, pvc("c", "v"), *pinned)
    assert sorted(b.node for b in result.bindings) == ["gke", "old"]
    assert (
        "1 node(s) didn't match PersistentVolume's node affinity"
        in (result.unschedulable["default/to-bare"])
    )


def test_an_untranslatable_bound_pv_fails_only_on_migrated_nodes() -> None:
    migrated = csi_node("n1")
    migrated["metadata"]["annotations"] = {
        "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"
    }
    volume = pv("v", awsElasticBlockStore={"volumeID": "aws://z/bad"})
    pods = [
        claim_pod(f"to-{n}", "c", node_selector={"kubernetes.io/hostname": n}) for n in ("n1", "n2")
    ]
    result = schedule(named("n1"), named("n2"), migrated, volume, pvc("c", "v"), *pods)
    assert [b.node for b in result.bindings] == ["n2"]
    assert (
        "1 could not translate pv: failed to translate Kubernetes ID"
        in (result.unschedulable["default/to-n1"])
    )


def test_the_prebind_check_of_one_node_agrees_with_the_filter_s_mask() -> None:
    from batchsched.commands.schedule import build_state
    from batchsched.objects.parse import read_node
    from batchsched.objects.volume_parse import read_pv
    from batchsched.plugins.volumebinding.affinity import AffinityIndex
    from batchsched.scheduling.admission import provisioned_volume_refusal as refusal

    zone = {"topology.kubernetes.io/zone": "us-east1-b"}
    nodes = [named("bare", **zone), named("gke", **zone, **{GKE_ZONE: "us-east1-b"})]
    nodes.append(named("old", **zone))
    migrated = [csi_node(name) for name in ("bare", "gke")]
    for manifest in migrated:
        manifest["metadata"]["annotations"] = MIGRATED
    gce = pv("gce", gcePersistentDisk={"pdName": "d1"})
    gce["metadata"]["labels"] = zone
    volumes = [read_pv(gce), read_pv(pv("local", "gke"))]
    state = build_state(objects_of(*nodes, *migrated))
    index = AffinityIndex()
    for volume in volumes:
        mask = index.volume_mask(state, volume)
        for manifest in nodes:
            placed = read_node(manifest)
            csi = state.volumes.csi_nodes.get(placed.name)
            plugins = csi.migrated_plugins if csi is not None else frozenset()
            admitted = mask is None or bool(mask[state.nodes.row_of[placed.name]])
            assert (refusal(volume, placed, plugins) == "") == admitted
    assert refusal(volumes[1], read_node(nodes[0]), frozenset()) == "no matching NodeSelectorTerms"
    bad = read_pv(pv("bad", awsElasticBlockStore={"volumeID": "aws://z/bad"}))
    ebs = frozenset({"kubernetes.io/aws-ebs"})
    assert refusal(bad, read_node(nodes[0]), ebs).startswith("could not translate pv")
    assert refusal(bad, read_node(nodes[0]), frozenset()) == ""  # not migrated: as written
