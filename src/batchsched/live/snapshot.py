"""Read the scheduling-relevant objects of a cluster once (for `schedule --kubeconfig`)."""

from __future__ import annotations

from pathlib import Path

from batchsched.live.client import ApiError, KubeClient, connect
from batchsched.live.kinds import KINDS as COLLECTIONS
from batchsched.objects.errors import InputError
from batchsched.objects.kinds import KINDS
from batchsched.objects.load import Objects


class ClusterReadError(InputError):
    """The cluster could not be read (unreachable, forbidden, ...)."""


def list_objects(client: KubeClient) -> Objects:
    """Nodes, pods, PriorityClasses, PDBs, PodGroups and DeviceClasses as `Objects`, as if
    from files.

    An absent PodGroup CRD, or an API server serving no version of upstream's PodGroups,
    reads as no PodGroups; a malformed object is an error naming it.
    """
    objects = Objects()
    for kind in COLLECTIONS:
        try:
            kind = kind.served(client)
            items, _ = client.list(kind.path)
        except ApiError as err:
            if err.status == 404 and kind.optional:
                continue
            raise ClusterReadError(f"cannot list {kind.path}: {err}") from None
        for item in items:
            if kind.api_version and not item.get("apiVersion"):
                item = {**item, "apiVersion": kind.api_version}
            try:
                objects.add(kind.manifest_kind, item)
            except InputError as err:
                raise ClusterReadError(f"{client.host}{kind.path}: {err}") from None
    return objects


def read_cluster(kubeconfig: Path | None, context: str | None = None) -> Objects:
    # A command run by hand: fail after a couple of seconds rather than retry for long.
    return list_objects(connect(kubeconfig, retries=2, context=context))


def merge_objects(cluster: Objects, files: Objects) -> Objects:
    """The cluster's objects with those from files added; a file's object replaces the
    cluster's object of the same kind and name (to ask "what if this pod were changed")."""
    merged = Objects(warnings=list(files.warnings))
    for kind in KINDS:
        extra = getattr(files, kind.field)
        names = {kind.key(obj) for obj in extra}
        kept = [obj for obj in getattr(cluster, kind.field) if kind.key(obj) not in names]
        setattr(merged, kind.field, kept + extra)
    return merged
