"""No node over its attach limits, nor with two writers on one inline disk, over random
clusters mixing inline in-tree disks, in-tree PVs, CSI PVs of the same drivers and
VolumeAttachments still holding volumes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import node, pod
from tests.conftest import schedule

SETTINGS = settings(max_examples=40, deadline=None)
GCE, EBS = "pd.csi.storage.gke.io", "ebs.csi.aws.com"
BOUND = {"pv.kubernetes.io/bind-completed": "yes"}

# A volume a pod may use: (source kind, disk id, read-only). Kinds: "gce" / "ebs" inline,
# "gce-pv" (an in-tree PV), "csi-pv" (a CSI PV of the GCE driver with the same handle).
Use = tuple[str, str, bool]


def handle(use: Use) -> tuple[str, str]:
    """The driver and handle the test expects the use to count as (written independently of
    the translation: a GCE PD without zone is `.../zones/UNSPECIFIED/disks/<name>`, an EBS
    volume is its bare ID)."""
    kind, ident, _ = use
    if kind == "ebs":
        return EBS, ident.rsplit("/", 1)[-1]
    return GCE, f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{ident}"


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, list[Use]], dict[str, int]]:
    manifests: list[dict[str, Any]] = []
    limits: dict[str, int] = {}
    for i in range(draw(st.integers(1, 3))):
        name = f"n{i}"
        manifests.append(node(name, cpu="64", pods="110"))
        gce, ebs = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        limits[f"{name}/{GCE}"], limits[f"{name}/{EBS}"] = gce, ebs
        drivers = [
            {"name": GCE, "nodeID": name, "allocatable": {"count": gce}},
            {"name": EBS, "nodeID": name, "allocatable": {"count": ebs}},
        ]
        manifests.append(
            {"kind": "CSINode", "metadata": {"name": name}, "spec": {"drivers": drivers}}
        )
    for disk in ("d0", "d1", "d2"):
        manifests.append(_pv(f"gce-{disk}", {"gcePersistentDisk": {"pdName": disk}}))
        csi = {"csi": {"driver": GCE, "volumeHandle": handle(("gce", disk, False))[1]}}
        manifests.append(_pv(f"csi-{disk}", csi))
        for kind in ("gce", "csi"):
            manifests.append(
                {
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": f"{kind}-{disk}",
                        "namespace": "default",
                        "annotations": BOUND,
                    },
                    "spec": {"storageClassName": "", "volumeName": f"{kind}-{disk}"},
                }
            )
    # Volumes still attached to n0 (VolumeAttachments), within its limit.
    held = sorted(draw(st.sets(st.sampled_from(["d0", "d1", "d2"]), max_size=limits[f"n0/{GCE}"])))
    for disk in held:
        spec = {
            "attacher": GCE,
            "nodeName": "n0",
            "source": {"persistentVolumeName": f"csi-{disk}"},
        }
        manifests.append(
            {"kind": "VolumeAttachment", "metadata": {"name": f"va-{disk}"}, "spec": spec}
        )
    pods: dict[str, list[Use]] = {"": [("csi-pv", disk, True) for disk in held]}
    uses = st.tuples(
        st.sampled_from(["gce", "ebs", "gce-pv", "csi-pv"]),
        st.sampled_from(["d0", "d1", "d2"]),
        st.booleans(),
    )
    for j in range(draw(st.integers(1, 10))):
        chosen: list[Use] = draw(st.lists(uses, min_size=1, max_size=3, unique_by=lambda u: u[1]))
        chosen = [
            ("ebs", f"aws://z/vol-{ident}" if ro else f"vol-{ident}", ro)
            if kind == "ebs"
            else (kind, ident, ro)
            for kind, ident, ro in chosen
        ]
        running = draw(st.booleans()) and len(pods) == 1  # one placed pod at most, on n0
        name = f"run-{j}" if running else f"p-{j}"
        on = "n0" if running and _fits([*chosen, *pods[""]], limits, "n0") else ""
        pods[name] = chosen
        manifests.append(
            pod(
                name,
                cpu="1",
                node_name=on,
                priority=draw(st.sampled_from([0, 10, 100])),
                volumes=[_volume(i, use) for i, use in enumerate(chosen)],
            )
        )
    return manifests, pods, limits


def _pv(name: str, source: dict[str, Any]) -> dict[str, Any]:
    spec = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], **source}
    return {"kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def _volume(i: int, use: Use) -> dict[str, Any]:
    kind, ident, ro = use
    if kind == "gce":
        return {"name": f"v{i}", "gcePersistentDisk": {"pdName": ident, "readOnly": ro}}
    if kind == "ebs":
        return {"name": f"v{i}", "awsElasticBlockStore": {"volumeID": ident, "readOnly": ro}}
    claim = f"{kind.removesuffix('-pv')}-{ident}"
    return {"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}}


def _fits(uses: list[Use], limits: dict[str, int], on: str) -> bool:
    counts: dict[str, set[str]] = {}
    for use in uses:
        driver, name = handle(use)
        counts.setdefault(driver, set()).add(name)
    return all(len(names) <= limits[f"{on}/{driver}"] for driver, names in counts.items())


@SETTINGS
@given(clusters())
def test_no_node_exceeds_an_attach_limit_or_shares_a_disk_with_a_writer(
    cluster: tuple[list[dict[str, Any]], dict[str, list[Use]], dict[str, int]],
) -> None:
    manifests, uses, limits = cluster
    result = schedule(*manifests)
    evicted = {e.pod.split("/")[1] for e in result.evictions}
    placed = {
        m["metadata"]["name"]: m["spec"].get("nodeName", "")
        for m in manifests
        if m["kind"] == "Pod"
    }
    placed.update({b.pod.split("/")[1]: b.node for b in result.bindings})
    placed[""] = "n0"  # the attachments: counted, never evicted
    per_node: dict[str, list[str]] = {}
    for name, on in placed.items():
        if on and name not in evicted:
            per_node.setdefault(on, []).append(name)
    for on, names in per_node.items():
        attached: dict[str, set[str]] = {}
        inline: dict[tuple[str, str], list[bool]] = {}
        for name in names:
            for use in uses[name]:
                driver, volume = handle(use)
                attached.setdefault(driver, set()).add(volume)
                if use[0] in ("gce", "ebs"):
                    inline.setdefault((use[0], use[1]), []).append(use[2])
        for driver, volumes in attached.items():
            assert len(volumes) <= limits[f"{on}/{driver}"], (on, driver, sorted(volumes))
        for (kind, ident), read_only in inline.items():
            if len(read_only) > 1:
                assert kind == "gce" and all(read_only), (on, kind, ident)
