"""The API collections batchsched watches, derived from the kind registry (objects/kinds.py),
and how their JSON becomes records and state facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from batchsched.live.client import ApiError, KubeClient
from batchsched.objects import kinds as registry
from batchsched.objects.kinds import Reader, Record
from batchsched.state.cluster import ClusterState


@dataclass(frozen=True)
class Kind:
    """One watched collection: a kind of the registry as one API path serves it."""

    name: str  # the informer's name (the registry's collection name)
    path: str  # the cluster-wide collection
    namespaced: bool
    read: Reader
    manifest_kind: str  # the objects' `kind` (the registry's kind)
    optional: bool = False  # a CRD that may not be installed
    # (API group, resource, group/versions newest first): the path is found by discovery.
    discover: tuple[str, str, tuple[str, ...]] | None = None
    api_version: str = ""  # the discovered group/version

    def served(self, client: KubeClient) -> Kind:
        """This kind at the version the API server serves (itself if not discovered).

        Raises ApiError 404 when no known version is served, as a missing CRD does.
        """
        if self.discover is None:
            return self
        group, resource, versions = self.discover
        found = served_version(client, group, resource, versions)
        return replace(self, path=f"/apis/{found}/{resource}", api_version=found)

    def read_object(self, obj: Mapping[str, Any]) -> Record:
        """The record of one object; list items carry no apiVersion, so the served one is
        added for readers that depend on it."""
        if self.api_version and not obj.get("apiVersion"):
            obj = {**obj, "apiVersion": self.api_version}
        record: Record = self.read(obj)
        return record

    def key_of(self, obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        return f"{meta.get('namespace') or 'default'}/{name}" if self.namespaced else name

    def upsert(self, state: ClusterState, record: Record) -> None:
        state.apply(self.manifest_kind, record)

    def remove(self, state: ClusterState, key: str) -> None:
        """Forget a deleted object, unless the one now held under that key came from another
        collection of its kind (a CRD and an upstream PodGroup may share a namespace and
        name)."""
        if self.manifest_kind == "PodGroup":
            group = state.groups.by_key.get(key)
            if group is not None and group.upstream != (self.discover is not None):
                return
        state.remove(self.manifest_kind, key)


# Applied in this order when a full list arrives (the registry's), so pods find their priority
# classes, nodes and groups already there.
KINDS: tuple[Kind, ...] = tuple(
    Kind(
        collection.name,
        collection.path,
        kind.namespaced,
        collection.read,
        kind.name,
        collection.optional,
        collection.discover,
    )
    for kind in registry.KINDS
    if kind.in_state
    for collection in kind.collections
)
KIND_ORDER = {kind.name: i for i, kind in enumerate(KINDS)}


def served_version(client: KubeClient, group: str, resource: str, versions: tuple[str, ...]) -> str:
    """The first of `versions` in which the API server serves `resource` (discovery)."""
    body = orjson.loads(client.request("GET", f"/apis/{group}"))
    served = {str(v.get("groupVersion")) for v in body.get("versions") or []}
    for version in versions:
        if version in served:
            listing = orjson.loads(client.request("GET", f"/apis/{version}"))
            if any(r.get("name") == resource for r in listing.get("resources") or []):
                return version
    raise ApiError(
        404, "NotFound", f"the server serves {resource} in none of {', '.join(versions)}"
    )
