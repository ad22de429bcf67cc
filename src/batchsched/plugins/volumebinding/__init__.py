"""The volume plugins of kube-scheduler's default profile: VolumeBinding, VolumeRestrictions,
NodeVolumeLimits and VolumeZone (docs/volumes.md)."""

from batchsched.plugins.volumebinding.binding import VolumeBinding
from batchsched.plugins.volumebinding.limits import NodeVolumeLimits
from batchsched.plugins.volumebinding.restrictions import VolumeRestrictions
from batchsched.plugins.volumebinding.zone import VolumeZone

__all__ = ["NodeVolumeLimits", "VolumeBinding", "VolumeRestrictions", "VolumeZone"]
