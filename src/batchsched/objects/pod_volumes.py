"""A pod's volumes that use a PersistentVolumeClaim, as the volume plugins see them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchsched.objects.errors import ManifestError
from batchsched.objects.volumes import PodVolume


def pod_volumes(label: str, pod_name: str, spec: Mapping[str, Any]) -> tuple[PodVolume, ...]:
    """Claim volumes, directly or as generic ephemeral volumes (whose claim the ephemeral
    volume controller names `<pod>-<volume>`). `label` names the pod in errors."""
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        return ()
    out = []
    for i, volume in enumerate(volumes):
        if not isinstance(volume, Mapping):
            continue
        name = str(volume.get("name") or "")
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, Mapping):
            claim_name = claim.get("claimName")
            if not isinstance(claim_name, str) or not claim_name:
                field = f"spec.volumes[{i}].persistentVolumeClaim.claimName"
                raise ManifestError("is required (a string)", obj=label, field=field)
            out.append(PodVolume(name, claim_name, ephemeral=False))
        elif volume.get("ephemeral") is not None:
            out.append(PodVolume(name, f"{pod_name}-{name}", ephemeral=True))
    return tuple(out)
