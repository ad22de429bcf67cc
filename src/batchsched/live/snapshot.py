"""Read the scheduling-relevant objects of a cluster once (for `schedule --kubeconfig`)."""

from __future__ import annotations

from pathlib import Path

from batchsched.live.client import ApiError, KubeClient, connect
from batchsched.live.kinds import KINDS
from batchsched.objects.errors import InputError
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
    for kind in KINDS:
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
                objects.add(kind.manifest_kind or kind.name, item)
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
    for attr in (
        "nodes",
        "pods",
        "priority_classes",
        "pdbs",
        "pod_groups",
        "workloads",
        "device_classes",
        "namespaces",
        "claims",
        "volumes",
        "storage_classes",
        "csi_nodes",
        "attachments",
        "csi_drivers",
        "capacities",
        "resource_slices",
        "resource_claims",
        "claim_templates",
    ):
        extra = getattr(files, attr)
        names = {_name(obj) for obj in extra}
        kept = [obj for obj in getattr(cluster, attr) if _name(obj) not in names]
        setattr(merged, attr, kept + extra)
    return merged


def _name(obj: object) -> str:
    key = getattr(obj, "key", None)
    return str(key) if key is not None else str(getattr(obj, "name", ""))
