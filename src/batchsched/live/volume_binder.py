"""VolumeBinding's PreBind in live mode, as upstream's volume binder does it.

For each claim the scheduler matched to a PV, the PV's `spec.claimRef` is set to the claim
(the PV controller then binds the claim); for each claim to provision, the claim gets the
`volume.kubernetes.io/selected-node` annotation (the provisioner then makes a PV on that
node). Then the claims are polled until the PV controller has bound them all, up to the
plugin's `bindTimeoutSeconds`. It fails early when a PV's claimRef is taken back, a
provisioner drops the selected node (its way of asking the scheduler to choose again), or
a provisioned PV's node affinity does not admit the node (as upstream's checkBindings).

On failure, what was written and not yet acted on is undone (a PV whose claim is not bound
loses its claimRef, an unbound claim its selected node), each with the version just read as
precondition so that nothing the PV controller wrote meanwhile is overwritten. Runs on an
actuator worker thread: the scheduling loop goes on while a pod waits here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from batchsched.decisions import BindVolumes
from batchsched.live.client import MERGE_PATCH, ApiError, GuardRefused, KubeClient
from batchsched.objects.errors import ManifestError
from batchsched.objects.volume_parse import read_pv
from batchsched.objects.volumes import BIND_COMPLETED_ANNOTATION, SELECTED_NODE_ANNOTATION
from batchsched.scheduling.admission import provisioned_volume_refusal
from batchsched.state.volumes import ClaimBinding

log = logging.getLogger(__name__)

PV = "/api/v1/persistentvolumes/{name}"
PVC = "/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"
POLL_SECONDS = 1.0  # as upstream's binder


class BindingFailed(Exception):
    """The pod's volumes could not be bound; the message says why (for its condition)."""


@dataclass(frozen=True, slots=True)
class _Claim:
    binding: ClaimBinding
    path: str
    uid: str
    wrote: bool  # False: the PV was pre-bound to the claim already (nothing to undo)


def _claim_path(key: str) -> str:
    namespace, name = key.split("/", 1)
    return PVC.format(ns=namespace, name=name)


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _bound(claim: dict[str, Any]) -> bool:
    spec = claim.get("spec") or {}
    return bool(spec.get("volumeName")) and BIND_COMPLETED_ANNOTATION in _annotations(claim)


class VolumeBinder:
    def __init__(
        self,
        client: KubeClient,
        guard: Callable[[], bool],
        stopping: threading.Event,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.client = client
        self.guard = guard
        self.stopping = stopping  # the replica shuts down: stop waiting, undo nothing
        self.poll_seconds = poll_seconds

    def bind(self, step: BindVolumes) -> None:
        """Write the step's bindings and wait for the PV controller; BindingFailed if they
        are not all bound in time (after undoing what can be undone)."""
        deadline = time.monotonic() + step.timeout_seconds
        written: list[_Claim] = []
        try:
            for binding in step.bindings:
                written.append(self._write(binding))
            self._wait(step, written, deadline)
        except (ApiError, GuardRefused, BindingFailed) as err:
            if not self.stopping.is_set():
                self._undo(written)
            raise BindingFailed(f"binding volumes: {err}") from None

    # ---- writing -----------------------------------------------------------------------

    def _write(self, binding: ClaimBinding) -> _Claim:
        path = _claim_path(binding.claim)
        claim = self.client.json("GET", path)
        uid = str(claim["metadata"].get("uid", ""))
        if not binding.volume:
            body = {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: binding.node}}}
            self._patch(path, body)
            return _Claim(binding, path, uid, True)
        pv_path = PV.format(name=binding.volume)
        pv = self.client.json("GET", pv_path)
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        mine = ref.get("namespace") == claim["metadata"].get("namespace") and ref.get(
            "name"
        ) == claim["metadata"].get("name")
        if ref and not mine:
            taken = f"{ref.get('namespace')}/{ref.get('name')}"
            raise BindingFailed(f'persistentvolume "{binding.volume}" is bound to {taken}')
        if not mine:
            claim_ref = {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": claim["metadata"].get("namespace"),
                "name": claim["metadata"].get("name"),
                "uid": uid,
            }
            version = pv["metadata"].get("resourceVersion")
            body = {"metadata": {"resourceVersion": version}, "spec": {"claimRef": claim_ref}}
            self._patch(pv_path, body)
        return _Claim(binding, path, uid, not mine)

    def _patch(self, path: str, body: dict[str, Any]) -> None:
        self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH, guard=self.guard)

    # ---- waiting -----------------------------------------------------------------------

    def _wait(self, step: BindVolumes, claims: list[_Claim], deadline: float) -> None:
        while not self._all_bound(step, claims):
            left = deadline - time.monotonic()
            if left <= 0:
                raise BindingFailed(
                    f"timed out after {step.timeout_seconds}s waiting for the PV controller "
                    "to bind the claims (bindTimeoutSeconds)"
                )
            if self.stopping.wait(min(self.poll_seconds, left)):
                raise BindingFailed("the scheduler is shutting down")

    def _all_bound(self, step: BindVolumes, claims: list[_Claim]) -> bool:
        for claim in claims:
            binding = claim.binding
            current = self.client.json("GET", claim.path)
            if binding.volume:
                pv = self.client.json("GET", PV.format(name=binding.volume))
                ref = (pv.get("spec") or {}).get("claimRef") or {}
                if not ref:
                    raise BindingFailed(
                        f'claimRef got reset for persistentvolume "{binding.volume}"'
                    )
            elif _annotations(current).get(SELECTED_NODE_ANNOTATION) != binding.node:
                # A provisioner that cannot make the volume there drops the annotation.
                raise BindingFailed(
                    f'provisioning failed for persistentvolumeclaim "{binding.claim}"'
                )
            elif not self._provisioned_fits(step, current):
                return False
            if not _bound(current):
                return False
        return True

    def _provisioned_fits(self, step: BindVolumes, claim: dict[str, Any]) -> bool:
        """As upstream's checkBindings: the PV provisioned for a claim must admit the node
        (translated where the node migrated its in-tree plugin, as the Filter checks it).
        False while the PV is not seen yet."""
        name = (claim.get("spec") or {}).get("volumeName")
        if not name or step.node is None:
            return True
        try:
            pv = read_pv(self.client.json("GET", PV.format(name=name)))
        except ApiError as err:
            if err.status == 404:
                return False  # not seen yet (or deleted: the claim then loses it)
            raise
        except ManifestError as err:
            raise BindingFailed(f"persistentvolume {name}: {err}") from None
        why = provisioned_volume_refusal(pv, step.node, step.migrated_plugins)
        if why:
            node = step.node.name
            raise BindingFailed(f'pv "{name}" node affinity doesn\'t match node "{node}": {why}')
        return True

    # ---- undoing -----------------------------------------------------------------------

    def _undo(self, claims: list[_Claim]) -> None:
        for claim in claims:
            try:
                self._undo_one(claim)
            except (ApiError, GuardRefused) as err:
                # Left for the PV controller (as upstream, which never undoes these writes).
                log.warning("could not undo the binding of %s: %s", claim.binding.claim, err)

    def _undo_one(self, claim: _Claim) -> None:
        binding = claim.binding
        if not claim.wrote:
            return
        current = self.client.json("GET", claim.path)
        if _bound(current):
            return  # bound after all: the pod may use it when it is tried again
        if not binding.volume:
            if _annotations(current).get(SELECTED_NODE_ANNOTATION) == binding.node:
                version = current["metadata"].get("resourceVersion")
                annotations = {SELECTED_NODE_ANNOTATION: None}
                body = {"metadata": {"resourceVersion": version, "annotations": annotations}}
                self._patch(claim.path, body)
            return
        pv_path = PV.format(name=binding.volume)
        pv = self.client.json("GET", pv_path)
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        phase = (pv.get("status") or {}).get("phase")
        if ref.get("uid") == claim.uid and phase != "Bound":
            version = pv["metadata"].get("resourceVersion")
            body = {"metadata": {"resourceVersion": version}, "spec": {"claimRef": None}}
            self._patch(pv_path, body)
