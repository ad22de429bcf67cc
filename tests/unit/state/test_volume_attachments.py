"""VolumeAttachments in NodeVolumeLimits: a volume attached to a node holds its slot until the
object is gone, shared with the pods there that use it. One rule per test."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.errors import ManifestError
from batchsched.objects.records import Node
from batchsched.objects.volume_parse import read_pv, read_volume_attachment
from batchsched.state.cluster import ClusterState
from tests.builders import node
from tests.conftest import objects_of, schedule
from tests.unit.objects.test_csi_migration import csi_node
from tests.unit.state.test_volumes import claim_pod, pv, pvc

EXCEEDS = "1 node(s) exceed max volume count"


def attachment(
    name: str, pv_name: str, node_name: str = "n1", attacher: str = "d"
) -> dict[str, Any]:
    source = {"persistentVolumeName": pv_name} if pv_name else {"inlineVolumeSpec": {}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": attacher, "nodeName": node_name, "source": source},
        "status": {"attached": True},
    }


def csi_volume(i: int) -> list[dict[str, Any]]:
    return [pv(f"v{i}", csi={"driver": "d", "volumeHandle": f"h{i}"}), pvc(f"c{i}", f"v{i}")]


def test_a_volume_still_attached_holds_its_slot() -> None:
    # v0's pod is gone, its volume not yet detached: v1 does not fit beside it.
    result = schedule(
        node("n1"),
        csi_node(d=1),
        *csi_volume(0),
        *csi_volume(1),
        attachment("va0", "v0"),
        claim_pod("p", "c1"),
    )
    assert EXCEEDS in result.unschedulable["default/p"]


def test_a_pod_using_the_attached_volume_costs_nothing_more() -> None:
    result = schedule(
        node("n1"), csi_node(d=1), *csi_volume(0), attachment("va0", "v0"), claim_pod("p", "c0")
    )
    assert [b.pod for b in result.bindings] == ["default/p"]


def test_a_volume_of_a_pod_and_its_attachment_counts_once() -> None:
    result = schedule(
        node("n1"),
        csi_node(d=2),
        *csi_volume(0),
        *csi_volume(1),
        attachment("va0", "v0"),
        claim_pod("running", "c0", node_name="n1"),
        claim_pod("p", "c1"),
    )
    assert [b.pod for b in result.bindings] == ["default/p"]


@pytest.mark.parametrize(
    "extra",
    [
        [attachment("inline", "")],  # an inline volume's attachment
        [pv("tree", awsElasticBlockStore={"volumeID": "vol-1"}), attachment("va", "tree")],
        [attachment("va", "missing")],  # its PV is not known
        [attachment("va", "v0", node_name="elsewhere")],
    ],
)
def test_attachments_upstream_does_not_count_are_not_counted(extra: list[dict[str, Any]]) -> None:
    result = schedule(node("n1"), csi_node(d=1), *csi_volume(0), *extra, claim_pod("p", "c0"))
    assert [b.pod for b in result.bindings] == ["default/p"]


def test_preemption_cannot_free_a_slot_an_attachment_still_holds() -> None:
    running = claim_pod("low", "c0", node_name="n1", priority=0)
    high = claim_pod("high", "c1", priority=100)
    base = [node("n1"), csi_node(d=1), *csi_volume(0), *csi_volume(1), running, high]
    freed = schedule(*base)
    assert [(e.pod, e.preemptor) for e in freed.evictions] == [("default/low", "default/high")]
    held = schedule(*base, attachment("va0", "v0"))
    assert held.evictions == []
    assert EXCEEDS in held.unschedulable["default/high"]


def test_an_attachment_counts_once_its_pv_and_node_are_known_and_stops_with_either() -> None:
    state = ClusterState()
    state.upsert_volume_object(read_volume_attachment(attachment("va0", "v0")))
    state.upsert_volume_object(read_pv(csi_volume(0)[0]))
    assert state.volumes.volume_rows == {} and "d" not in state.volumes.attach_counts
    state.upsert_node(Node(name="n1", allocatable={}))
    assert state.volumes.volume_rows == {"d/h0": {0: 1}}
    assert int(state.volumes.attach_counts["d"][0]) == 1
    state.remove_volume_object("PersistentVolume", "v0")
    assert state.volumes.volume_rows == {} and int(state.volumes.attach_counts["d"][0]) == 0
    state.upsert_volume_object(read_pv(csi_volume(0)[0]))
    state.remove_node("n1")
    assert state.volumes.volume_rows == {}
    state.upsert_node(Node(name="n1", allocatable={}))
    state.remove_volume_object("VolumeAttachment", "va0")
    assert state.volumes.volume_rows == {}


@pytest.mark.parametrize("field", ["attacher", "nodeName"])
def test_an_attachment_without_attacher_or_node_is_an_error_naming_the_field(field: str) -> None:
    manifest = attachment("va0", "v0")
    del manifest["spec"][field]
    with pytest.raises(ManifestError, match=f"VolumeAttachment va0: spec.{field}"):
        objects_of(manifest)
