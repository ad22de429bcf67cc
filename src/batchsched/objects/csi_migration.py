"""CSI migration: the in-tree disk sources Kubernetes now serves through CSI drivers, and the
driver and volume handle each becomes, as kube-scheduler's NodeVolumeLimits counts them.

Upstream derives these with Kubernetes' csi-translation-lib; the rules here are the parts of
it the scheduler depends on: which driver a source (or an in-tree provisioner name) migrated
to, how a disk's handle is formed, so that a disk counts once per node whether it is mounted
inline, through an in-tree PV, or (same handle) through a CSI PV, and the node affinity an
in-tree PV takes on where its plugin is migrated (which VolumeBinding checks). Upstream's
scheduler treats migration as on for five plugins only (AWS EBS, GCE PD, Azure Disk, Cinder,
Portworx): Azure File and vSphere volumes are not counted at all, as there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from batchsched.objects.records import NodeSelectorTerm, Requirement


@dataclass(frozen=True, slots=True)
class Migration:
    plugin: str  # the in-tree plugin's name, as a StorageClass provisioner names it
    driver: str  # the CSI driver it migrated to
    counted: bool  # whether upstream's NodeVolumeLimits counts it (isCSIMigrationOn)
    ident: str  # the source field that names the disk


# By the volume source's field in spec.volumes[*] or a PersistentVolume's spec.
MIGRATIONS: dict[str, Migration] = {
    "awsElasticBlockStore": Migration("kubernetes.io/aws-ebs", "ebs.csi.aws.com", True, "volumeID"),
    "gcePersistentDisk": Migration("kubernetes.io/gce-pd", "pd.csi.storage.gke.io", True, "pdName"),
    "azureDisk": Migration("kubernetes.io/azure-disk", "disk.csi.azure.com", True, "diskURI"),
    "cinder": Migration("kubernetes.io/cinder", "cinder.csi.openstack.org", True, "volumeID"),
    "portworxVolume": Migration(
        "kubernetes.io/portworx-volume", "pxd.portworx.com", True, "volumeID"
    ),
    "azureFile": Migration("kubernetes.io/azure-file", "file.csi.azure.com", False, "shareName"),
    "vsphereVolume": Migration(
        "kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com", False, "volumePath"
    ),
}
_BY_PLUGIN = {m.plugin: m for m in MIGRATIONS.values()}

_GCE_UNSPECIFIED = "UNSPECIFIED"
_EBS_VOLUME = re.compile(r"^vol-[^/]*$")
_ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")


class TranslationError(ValueError):
    """The disk's handle cannot be derived (upstream's translation fails)."""


def provisioner_driver(provisioner: str) -> str:
    """The driver a claim to be provisioned counts under: the provisioner itself, or, for an
    in-tree plugin's name, the CSI driver it migrated to ("" where upstream counts none)."""
    migration = _BY_PLUGIN.get(provisioner)
    if migration is None:
        return provisioner
    return migration.driver if migration.counted else ""


def inline_handle(kind: str, source: Mapping[str, Any]) -> str:
    """The volume handle of a disk mounted inline (spec.volumes[*].<kind>), for a counted
    kind. A GCE PD's zone is unknown inline, so its handle says so."""
    if kind == "gcePersistentDisk":
        return _gce_handle("zones", _GCE_UNSPECIFIED, str(source["pdName"]))
    return _common_handle(kind, source)


def pv_handle(kind: str, source: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """The volume handle of a PersistentVolume with an in-tree source, for a counted kind. A
    GCE PD's is zonal or regional after the PV's zone label (the beta key first)."""
    if kind != "gcePersistentDisk":
        return _common_handle(kind, source)
    disk = str(source["pdName"])
    label = labels.get(_ZONE_LABELS[0]) or labels.get(_ZONE_LABELS[1]) or ""
    zones = label.split("__")
    if len(zones) == 1:
        return _gce_handle("zones", zones[0] or _GCE_UNSPECIFIED, disk)
    regions = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise TranslationError(
                "failed to get region from zones: zone in unexpected format, expected: "
                f"{{locale}}-{{region}}-{{zone}}, got: {zone}"
            )
        regions.add("-".join(parts[:2]))
    if len(regions) != 1:
        raise TranslationError(
            f"failed to get region from zones: multiple or no regions gotten from zones, "
            f"got: {sorted(regions)}"
        )
    return _gce_handle("regions", regions.pop(), disk)


def _gce_handle(scope: str, where: str, disk: str) -> str:
    return f"projects/{_GCE_UNSPECIFIED}/{scope}/{where}/disks/{disk}"


def _common_handle(kind: str, source: Mapping[str, Any]) -> str:
    ident = str(source[MIGRATIONS[kind].ident])
    if kind == "awsElasticBlockStore":
        return _ebs_volume_id(ident)
    if kind == "azureDisk":
        disk_kind = source.get("kind")
        # The API defaults `kind` to Shared; only managed disks migrate.
        disk_kind = "Shared" if disk_kind is None else str(disk_kind)
        if disk_kind.lower() != "managed":
            raise TranslationError(f"kind({disk_kind}) is not supported in csi migration")
    return ident


def _ebs_volume_id(kubernetes_id: str) -> str:
    """`aws://<zone>/vol-...` or a bare `vol-...` to the EBS volume ID."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    rest = re.split(r"[?#]", kubernetes_id[len("aws://") :], maxsplit=1)[0]
    path = rest[rest.index("/") :] if "/" in rest else ""
    volume_id = path.strip("/")
    if not _EBS_VOLUME.match(volume_id):
        raise TranslationError(
            "failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume "
            f"({kubernetes_id})"
        )
    return volume_id


# The zone key of the CSI driver's topology, for the plugins whose PV translation rewrites
# node affinity (Azure Disk and Portworx PVs keep theirs).
_CSI_ZONE_KEYS = {
    "gcePersistentDisk": "topology.gke.io/zone",
    "awsElasticBlockStore": "topology.ebs.csi.aws.com/zone",
    "cinder": "topology.cinder.csi.openstack.org/zone",
}
_GA_ZONE, _BETA_ZONE = "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"
_GA_REGION = "topology.kubernetes.io/region"
_BETA_REGION = "failure-domain.beta.kubernetes.io/region"


def pv_affinity(
    kind: str, terms: tuple[NodeSelectorTerm, ...], labels: Mapping[str, str]
) -> tuple[NodeSelectorTerm, ...]:
    """The node affinity of the PV as translated to CSI, which VolumeBinding checks on nodes
    where the plugin is migrated: its zone requirements (or, without any, its zone label)
    become requirements on the CSI driver's zone key, and the beta region key the GA one."""
    csi_key = _CSI_ZONE_KEYS.get(kind)
    if csi_key is None:
        return terms
    # The GA keys unless the PV uses only the beta zone key (in its affinity, else labels).
    keys = {r.key for term in terms for r in term.match_expressions}
    if keys & {_GA_ZONE, _BETA_ZONE}:
        beta = _GA_ZONE not in keys
    else:
        beta = _GA_ZONE not in labels and _BETA_ZONE in labels
    zone_key, region_key = (_BETA_ZONE, _BETA_REGION) if beta else (_GA_ZONE, _GA_REGION)
    if _values(terms, zone_key):
        terms = _rekeyed(terms, zone_key, csi_key)
    elif zone_key in labels:
        zones = tuple(sorted({z.strip() for z in labels[zone_key].split("__") if z.strip()}))
        if zones:
            added = Requirement(csi_key, "In", zones)
            terms = tuple(
                replace(term, match_expressions=(*term.match_expressions, added))
                for term in terms or (NodeSelectorTerm((), ()),)
            )
    if region_key == _BETA_REGION and _values(terms, _BETA_REGION):
        terms = _rekeyed(terms, _BETA_REGION, _GA_REGION)
    return terms


def _values(terms: tuple[NodeSelectorTerm, ...], key: str) -> bool:
    return any(r.values for term in terms for r in term.match_expressions if r.key == key)


def _rekeyed(
    terms: tuple[NodeSelectorTerm, ...], old: str, new: str
) -> tuple[NodeSelectorTerm, ...]:
    return tuple(
        replace(
            term,
            match_expressions=tuple(
                replace(r, key=new) if r.key == old else r for r in term.match_expressions
            ),
        )
        for term in terms
    )
