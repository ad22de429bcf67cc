"""A pod's volumes that use a PersistentVolumeClaim, and the disks it mounts inline (iSCSI,
RBD, CSI-migrated in-tree disks), as the volume plugins see them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from batchsched.objects.csi_migration import MIGRATIONS, TranslationError, inline_handle
from batchsched.objects.errors import ManifestError, shown
from batchsched.objects.volumes import InlineDisk, PodVolume


def pod_volumes(label: str, pod_name: str, spec: Mapping[str, Any]) -> tuple[PodVolume, ...]:
    """Claim volumes, directly or as generic ephemeral volumes (whose claim the ephemeral
    volume controller names `<pod>-<volume>`). `label` names the pod in errors."""
    out = []
    for i, volume in _volumes(label, spec):
        name = volume.get("name") or ""
        if not isinstance(name, str):
            raise ManifestError(
                f"must be a string, got {shown(name)}", obj=label, field=f"spec.volumes[{i}].name"
            )
        claim = _source(label, i, volume, "persistentVolumeClaim")
        if claim is not None:
            claim_name = claim.get("claimName")
            if not isinstance(claim_name, str) or not claim_name:
                field = f"spec.volumes[{i}].persistentVolumeClaim.claimName"
                raise ManifestError("is required (a string)", obj=label, field=field)
            out.append(PodVolume(name, claim_name, ephemeral=False))
        elif _source(label, i, volume, "ephemeral") is not None:
            out.append(PodVolume(name, f"{pod_name}-{name}", ephemeral=True))
    return tuple(out)


def pod_disks(label: str, spec: Mapping[str, Any]) -> tuple[InlineDisk, ...]:
    """Inline iSCSI, RBD and migrated in-tree disks (VolumeRestrictions: one writer per disk
    per node; NodeVolumeLimits: the migrated ones count against their CSI driver's limit)."""
    out: list[InlineDisk] = []
    for i, volume in _volumes(label, spec):
        out.extend(_migrated(label, i, volume))
        for kind in ("iscsi", "rbd"):
            source = _source(label, i, volume, kind)
            if source is None:
                continue
            where = f"spec.volumes[{i}].{kind}"
            read_only = source.get("readOnly") is True
            if kind == "iscsi":
                out.append(InlineDisk(kind, (_required(source, "iqn", label, where),), read_only))
                continue
            monitors = source.get("monitors")
            if not isinstance(monitors, list) or not monitors:
                raise ManifestError("is required (a list)", obj=label, field=f"{where}.monitors")
            pool = source.get("pool") or "rbd"  # the API's default
            image = _required(source, "image", label, where)
            ident = (str(pool), image)
            out.append(InlineDisk(kind, ident, read_only, frozenset(map(str, monitors))))
    return tuple(out)


def _migrated(label: str, i: int, volume: Mapping[str, Any]) -> Iterator[InlineDisk]:
    for kind, migration in MIGRATIONS.items():
        source = _source(label, i, volume, kind)
        if source is None or not migration.counted:
            continue
        ident = _required(source, migration.ident, label, f"spec.volumes[{i}].{kind}")
        handle, why = ident, ""
        try:
            handle = inline_handle(kind, source)
        except TranslationError as err:  # upstream's message, for the pods it keeps off nodes
            why = f"converting volume({volume.get('name') or ''}) from inline to csi: {err}"
        read_only = source.get("readOnly") is True
        yield InlineDisk(kind, (ident,), read_only, frozenset(), migration.driver, handle, why)


def _volumes(label: str, spec: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """`spec.volumes`, each a mapping: one that is not would otherwise be skipped, and the
    pod scheduled without the claim or disk it names."""
    volumes = spec.get("volumes")
    if volumes is None:
        return
    if not isinstance(volumes, list):
        raise ManifestError(
            f"must be a list, got {shown(volumes)}", obj=label, field="spec.volumes"
        )
    for i, volume in enumerate(volumes):
        if not isinstance(volume, Mapping):
            field = f"spec.volumes[{i}]"
            raise ManifestError(f"must be a mapping, got {shown(volume)}", obj=label, field=field)
        yield i, volume


def _source(label: str, i: int, volume: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The volume's source of `kind` (None: not this kind); set, it must be a mapping."""
    source = volume.get(kind)
    if source is None or isinstance(source, Mapping):
        return source
    field = f"spec.volumes[{i}].{kind}"
    raise ManifestError(f"must be a mapping, got {shown(source)}", obj=label, field=field)


def _required(source: Mapping[str, Any], key: str, label: str, where: str) -> str:
    value = source.get(key)
    if not isinstance(value, str) or not value:
        raise ManifestError("is required (a string)", obj=label, field=f"{where}.{key}")
    return value
