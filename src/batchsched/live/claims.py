"""DynamicResources' PreBind against the API server: before a pod's Binding, write the
allocation chosen for each of its claims into `status.allocation` and add the pod to
`status.reservedFor` (as upstream's plugin does, with the claim's delete-protection finalizer
first); for extended resources served by DRA, first create the pod's claim for them and
afterwards name it in the pod's `status.extendedResourceClaimStatus`. When the Binding fails,
take the reservation back, drop an allocation written here that nobody else uses, and delete
a claim created here.

Writes carry the claim's resourceVersion: on a conflict (409) the claim is read again and the
write retried, unless someone else allocated it meanwhile. Runs on actuator worker threads.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from batchsched.decisions import ClaimReservation, ExtendedClaimReservation, ReserveClaims
from batchsched.live.client import MERGE_PATCH, ApiError, KubeClient
from batchsched.objects.dra import (
    EXTENDED_CLAIM_SUFFIX,
    EXTENDED_RESOURCE_CLAIM,
    allocation_json,
    extended_status_json,
)

log = logging.getLogger(__name__)

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
CLAIM = CLAIMS + "/{name}"
POD_STATUS = "/api/v1/namespaces/{ns}/pods/{name}/status"
FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_LIMIT = 256  # resource.k8s.io/v1 ResourceClaimReservedForMaxSize
_ATTEMPTS = 5


class PreBindFailed(Exception):
    """The claims cannot be written as decided; the pod is tried again."""


@dataclass(frozen=True, slots=True)
class Consumer:
    """The pod a claim is reserved for."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class _Written:
    path: str
    allocated: bool  # the allocation was written here (not only the reservation)
    created: bool = False  # the claim itself was created here (for extended resources)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[1]

    @property
    def key(self) -> str:
        parts = self.path.split("/")
        return f"{parts[parts.index('namespaces') + 1]}/{self.name}"


def _results(allocation: Any) -> set[tuple[str, ...]]:
    """The devices an allocation names, to compare ours with what the API holds."""
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    keys = ("request", "driver", "pool", "device")
    return {tuple(str(r.get(k, "")) for k in keys) for r in results}


class ClaimWriter:
    def __init__(self, client: KubeClient, guard: Callable[[], bool]) -> None:
        self.client = client
        self.guard = guard

    def reserve(self, step: ReserveClaims, pod: Consumer) -> Callable[[], None]:
        """Write every claim of the step; the returned call undoes what was written. On a
        failure what was written is undone and PreBindFailed (or GuardRefused) raised."""
        written: list[_Written] = []
        try:
            for claim in step.claims:
                done = self._reserve_one(claim, pod)
                if done is not None:
                    written.append(done)
            if step.extended is not None:
                written.append(self._create_extended(step.extended, pod))
                made = written[-1]
                reservation = ClaimReservation(made.key, step.extended.allocation)
                self._reserve_one(reservation, pod)
                status = extended_status_json(made.name, step.extended.mappings)
                self._pod_status(pod, status)
        except Exception:
            self._undo(written, pod)
            raise
        return lambda: self._undo(written, pod)

    def _create_extended(self, extended: ExtendedClaimReservation, pod: Consumer) -> _Written:
        """Create the claim for the pod's extended resources, as upstream's PreBind does:
        a generated name, the pod as controlling owner, the extended-resource-claim
        annotation, a device request per container and resource."""
        requests = [
            {
                "name": alt.name,
                "exactly": {
                    "deviceClassName": alt.device_class,
                    "allocationMode": "ExactCount",
                    "count": alt.count,
                },
            }
            for request in extended.claim.requests
            for alt in request.alternatives
        ]
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": f"{pod.name}{EXTENDED_CLAIM_SUFFIX}-",
                "namespace": pod.namespace,
                "annotations": {EXTENDED_RESOURCE_CLAIM: "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod.name,
                        "uid": pod.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"devices": {"requests": requests}},
        }
        collection = CLAIMS.format(ns=pod.namespace)
        try:
            made = self.client.json("POST", collection, body=body, guard=self.guard)
        except ApiError as err:
            raise PreBindFailed(f"creating the claim for extended resources: {err}") from None
        name = str(made["metadata"]["name"])
        return _Written(f"{collection}/{name}", allocated=True, created=True)

    def _pod_status(self, pod: Consumer, status: Any) -> None:
        path = POD_STATUS.format(ns=pod.namespace, name=pod.name)
        body = {"status": {"extendedResourceClaimStatus": status}}
        try:
            self.client.request(
                "PATCH", path, body=body, content_type=MERGE_PATCH, guard=self.guard
            )
        except ApiError as err:
            raise PreBindFailed(f"pod status.extendedResourceClaimStatus: {err}") from None

    def _reserve_one(self, claim: ClaimReservation, pod: Consumer) -> _Written | None:
        namespace, name = claim.claim.split("/", 1)
        path = CLAIM.format(ns=namespace, name=name)
        wanted = None if claim.allocation is None else allocation_json(claim.allocation)
        for _ in range(_ATTEMPTS):
            current = self._get(path, claim.claim)
            status = current.get("status") or {}
            reserved = list(status.get("reservedFor") or [])
            if any(r.get("uid") == pod.uid for r in reserved):
                return None  # written by an earlier attempt whose answer was lost
            held = status.get("allocation")
            if wanted is None and held is None:
                raise PreBindFailed(f"resourceclaim {claim.claim} is no longer allocated")
            if wanted is not None and held is not None and _results(held) != _results(wanted):
                raise PreBindFailed(f"resourceclaim {claim.claim} was allocated meanwhile")
            if len(reserved) >= RESERVED_FOR_LIMIT:
                raise PreBindFailed(
                    f"resourceclaim {claim.claim}: status.reservedFor holds "
                    f"{RESERVED_FOR_LIMIT} consumers already"
                )
            allocating = wanted is not None and held is None
            entry = {"resource": "pods", "name": pod.name, "uid": pod.uid}
            patch: dict[str, Any] = {"reservedFor": [*reserved, entry]}
            if allocating:
                patch["allocation"] = wanted
            try:
                version = current["metadata"]["resourceVersion"]
                if allocating:
                    version = self._protect(path, current)
                self._patch(f"{path}/status", version, {"status": patch})
            except ApiError as err:
                if err.status == 409:
                    continue  # changed meanwhile: read it again
                raise PreBindFailed(f"resourceclaim {claim.claim}: {err}") from None
            return _Written(path, allocating)
        raise PreBindFailed(
            f"resourceclaim {claim.claim}: still conflicting after {_ATTEMPTS} attempts"
        )

    def _protect(self, path: str, claim: dict[str, Any]) -> str:
        """Add the delete-protection finalizer (an allocated claim must not vanish while
        its devices are in use); the claim's resourceVersion after it."""
        meta = claim.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if FINALIZER in finalizers:
            return str(meta["resourceVersion"])
        body = {"finalizers": [*finalizers, FINALIZER]}
        updated = self._patch(path, str(meta["resourceVersion"]), {"metadata": body})
        return str(updated["metadata"]["resourceVersion"])

    def _undo(self, written: list[_Written], pod: Consumer) -> None:
        for done in reversed(written):
            try:
                if done.created:
                    self._delete(done, pod)
                else:
                    self._undo_one(done, pod)
            except Exception as err:  # logged: the resourceclaim controller cleans up too
                log.warning(
                    "could not undo %s for %s/%s: %s", done.path, pod.namespace, pod.name, err
                )

    def _undo_one(self, done: _Written, pod: Consumer) -> None:
        for _ in range(_ATTEMPTS):
            try:
                current = self.client.json("GET", done.path)
            except ApiError as err:
                if err.status == 404:
                    return
                raise
            status = current.get("status") or {}
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != pod.uid]
            deallocate = done.allocated and not reserved
            patch: dict[str, Any] = {"reservedFor": reserved or None}
            if deallocate:
                patch["allocation"] = None
            try:
                version = str(current["metadata"]["resourceVersion"])
                updated = self._patch(f"{done.path}/status", version, {"status": patch})
                if deallocate:
                    self._unprotect(done.path, updated)
                return
            except ApiError as err:
                if err.status != 409:
                    raise
        raise PreBindFailed(f"{done.path}: still conflicting after {_ATTEMPTS} attempts")

    def _delete(self, done: _Written, pod: Consumer) -> None:
        """Take back a claim created here: out of the pod's status, finalizer off, deleted."""
        path = POD_STATUS.format(ns=pod.namespace, name=pod.name)
        body = {"status": {"extendedResourceClaimStatus": None}}
        with contextlib.suppress(ApiError):  # the pod may be gone: the claim goes anyway
            self.client.request(
                "PATCH", path, body=body, content_type=MERGE_PATCH, guard=self.guard
            )
        for _ in range(_ATTEMPTS):
            try:
                self._unprotect(done.path, self.client.json("GET", done.path))
                self.client.request("DELETE", done.path, guard=self.guard)
                return
            except ApiError as err:
                if err.status == 404:
                    return
                if err.status != 409:
                    raise
        raise PreBindFailed(f"{done.path}: still conflicting after {_ATTEMPTS} attempts")

    def _unprotect(self, path: str, claim: dict[str, Any]) -> None:
        meta = claim.get("metadata") or {}
        finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        if len(finalizers) != len(meta.get("finalizers") or []):
            body = {"finalizers": finalizers or None}
            self._patch(path, str(meta["resourceVersion"]), {"metadata": body})

    def _get(self, path: str, key: str) -> dict[str, Any]:
        try:
            found: dict[str, Any] = self.client.json("GET", path)
        except ApiError as err:
            raise PreBindFailed(f"resourceclaim {key}: {err}") from None
        return found

    def _patch(self, path: str, version: str, body: dict[str, Any]) -> dict[str, Any]:
        meta = {**body.get("metadata", {}), "resourceVersion": version}
        result: dict[str, Any] = self.client.json(
            "PATCH",
            path,
            body={**body, "metadata": meta},
            content_type=MERGE_PATCH,
            guard=self.guard,
        )
        return result
