"""Which manifests batchsched reads, by kind and apiVersion, and what it says of the others.

Nothing in the input passes silently (docs/schedule.md#what-is-not-read): an object of a
known kind in a version batchsched does not read is an error naming the versions it reads;
objects of other kinds, or of a known kind from another API (Volcano's PodGroup, Kueue's
Workload), are counted and reported once per kind and API, saying why they matter when they
belong to another scheduler or look like a typo of a known kind. `--strict` makes those two
an error.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from batchsched.objects.kinds import KINDS

# The apiVersions read per kind (the kind registry's).
READ_VERSIONS: dict[str, tuple[str, ...]] = {k.name: k.api_versions for k in KINDS}

# API groups of other schedulers and scheduling tools: their objects change what a user may
# expect of a schedule, so they are named as theirs, and `--strict` refuses them.
_ONLY_GROUPS = "batchsched reads only the scheduler-plugins and upstream PodGroups"
SCHEDULING_APIS: dict[str, str] = {
    "kueue.x-k8s.io": (
        "Kueue's: batchsched reads its own, Volcano's and KAI's Queues, not Kueue's quotas"
    ),
    "scheduling.volcano.sh": f"Volcano's: {_ONLY_GROUPS}, and Volcano's Queue",
    "batch.volcano.sh": "Volcano's: batchsched reads the pods, not Volcano's jobs",
    "scheduling.run.ai": f"KAI Scheduler's: {_ONLY_GROUPS}, and KAI's Queue v2",
    "scheduling.x-k8s.io": (
        "scheduler-plugins': batchsched reads its PodGroup, not ElasticQuota (its Queue instead)"
    ),
    "scheduling.k8s.io": "batchsched does not read this kind",
    "resource.k8s.io": "a DRA kind batchsched does not read: allocations ignore it",
    "kubescheduler.config.k8s.io": "a scheduler configuration: give it with --config, not -f",
}


def group_of(api_version: str) -> str:
    """The API group of `group/version`; "" for the core group's `v1`."""
    return api_version.rpartition("/")[0]


class UnreadVersion(ValueError):
    """A known kind in an apiVersion of its own group that batchsched does not read."""


def is_read(kind: str, api_version: str) -> bool:
    """Whether an object is read; raises UnreadVersion for a known kind in an unknown version
    of a group it is read from (scheduling.x-k8s.io/v1beta1 PodGroup). An object without
    apiVersion is read as its kind."""
    versions = READ_VERSIONS.get(kind)
    if versions is None:
        return False
    if not api_version or api_version in versions:
        return True
    if group_of(api_version) in {group_of(v) for v in versions}:
        raise UnreadVersion(
            f"{api_version!r} is not a version batchsched reads; {kind} is read as "
            f"{', '.join(versions)}"
        )
    return False


@dataclass
class Unread:
    """Objects of one kind and apiVersion that were not read."""

    kind: str
    api_version: str
    count: int = 0
    sources: list[str] = field(default_factory=list)

    @property
    def typo_of(self) -> str:
        """The known kind this one looks like a misspelling of (`Pood`: Pod), or ""."""
        group = group_of(self.api_version)
        for known in difflib.get_close_matches(
            self.kind.lower(), [k.lower() for k in READ_VERSIONS], n=3, cutoff=0.75
        ):
            [kind] = [k for k in READ_VERSIONS if k.lower() == known]
            if not self.api_version or group in {group_of(v) for v in READ_VERSIONS[kind]}:
                return kind
        return ""

    @property
    def scheduling(self) -> str:
        """Whose scheduling object this is and why it matters, or "" for other kinds."""
        return SCHEDULING_APIS.get(group_of(self.api_version), "")

    @property
    def strict_error(self) -> bool:
        """What `--strict` refuses: a likely typo, or another scheduler's object."""
        return bool(self.typo_of or self.scheduling)

    def summary(self) -> str:
        """One line for all objects of this kind and API."""
        api = f" ({self.api_version})" if self.api_version else ""
        where = ", ".join(self.sources[:3]) + (
            f" and {len(self.sources) - 3} more" if len(self.sources) > 3 else ""
        )
        line = f"not read: {self.count} {self.kind}{api} in {where}"
        if self.typo_of:
            return f"{line}: unknown kind; did you mean {self.typo_of}?"
        if self.scheduling:
            return f"{line}: {self.scheduling}"
        return f"{line}: batchsched does not read this kind"
