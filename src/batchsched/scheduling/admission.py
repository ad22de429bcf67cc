"""Admission: the one place that decides what batchsched must not schedule (docs/support.md).

- A pod not ready to be attempted (`not_ready`): scheduling gates, or being deleted; it waits
  outside the queue, as upstream's PreEnqueue keeps it.
- A pod refused (`Admission.refusal`): it uses a field batchsched does not implement yet
  (found when the pod was read, `objects/support.py`), or DRA claims or DRA-served extended
  resources under a profile that does not allocate them. It stays pending with the message,
  never binds (a refused gang member never binds with its group) and never preempts.
- A pod stating a bad runtime bound (a label or annotation the API server does not check,
  on the pod or its PodGroup, docs/backfill.md#stated-runtimes): refused the same way, the
  error naming the object, the field and what is allowed as its message.
- A volume the PV controller provisioned for a pod that no longer admits the chosen node
  (`provisioned_volume_refusal`), checked before the Binding as upstream's binder does.

Every refusal of what is not implemented is worded by `objects.support.unsupported_message`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from batchsched.config import Profile
from batchsched.decisions import Decision, Nominate
from batchsched.objects.records import Node, Pod
from batchsched.objects.support import unsupported_message
from batchsched.objects.volumes import PersistentVolume
from batchsched.plugins.nodeaffinity.plugin import terms_hold
from batchsched.state.cluster import ClusterState

# The plugin that allocates DRA claims, and must be at both points to do so.
_CLAIMS_PLUGIN = "DynamicResources"


def allocates_claims(profile: Profile) -> bool:
    """Whether pods of the profile may use DRA claims: it has DynamicResources at Filter and
    Reserve."""
    return all(
        any(name == _CLAIMS_PLUGIN for name, _ in profile.plugins[point])
        for point in ("filter", "reserve")
    )


def pod_refusal(
    pod: Pod, device_class_resources: Mapping[str, str], claims_allowed: bool = False
) -> str | None:
    """Why the pod must not be scheduled by batchsched yet, or None.

    `device_class_resources` maps an extended resource to the DeviceClass that claims it;
    `claims_allowed` says whether the pod's profile allocates DRA claims (`allocates_claims`).
    """
    if pod.refused:
        return unsupported_message("pod", pod.refused)
    if pod.runtime_error:
        return pod.runtime_error
    if claims_allowed:
        return None
    if pod.resource_claims:
        return unsupported_message(
            "pod",
            "spec.resourceClaims (allocated with the DynamicResources plugin only: "
            "the profile lacks it at Filter or Reserve)",
        )
    if device_class_resources:
        for resource in pod.requests:
            device_class = device_class_resources.get(resource)
            if device_class is not None:
                return unsupported_message(
                    "pod",
                    f"extended resource {resource} (mapped by DeviceClass {device_class}; "
                    "allocated with the DynamicResources plugin only)",
                )
    return None


def not_ready(pod: Pod) -> str | None:
    """Why a pending pod is not to be attempted at all, or None (SchedulingGates, and
    kube-scheduler's skip of pods being deleted)."""
    if pod.deletion_timestamp is not None:
        return "not scheduled: the pod is being deleted (metadata.deletionTimestamp is set)"
    if pod.scheduling_gates:
        return f"waiting for its scheduling gates: {', '.join(pod.scheduling_gates)}"
    return None


class Admission:
    """The scheduler's refusals: each pod judged under its own profile."""

    def __init__(self, state: ClusterState, profile_of: Callable[[Pod], Profile]) -> None:
        self.state = state
        self._profile_of = profile_of
        self._claims_allowed: dict[str, bool] = {}  # per profile (scheduler name)

    def refusal(self, pod: Pod) -> str | None:
        profile = self._profile_of(pod)
        allowed = self._claims_allowed.get(profile.scheduler_name)
        if allowed is None:
            allowed = self._claims_allowed[profile.scheduler_name] = allocates_claims(profile)
        refusal = pod_refusal(pod, self.state.device_class_resources, allowed)
        if refusal is None:
            group = self.state.group_of(pod)
            if group is not None and group.runtime_error:
                return group.runtime_error
        return refusal

    def withdraw(self, pod: Pod) -> list[Decision]:
        """A refused pod's nomination (from an earlier scheduler) stops holding room it will
        never use."""
        if pod.key not in self.state.nominations:
            return []
        self.state.nominate(pod.key, None)
        return [Nominate(pod.key, None)]


def provisioned_volume_refusal(
    pv: PersistentVolume, node: Node, migrated_plugins: frozenset[str]
) -> str:
    """Why the PV's node affinity refuses `node` ("" if it does not), as VolumeBinding's
    mask answers for every node: on a node that migrated the PV's in-tree plugin, as
    translated."""
    terms = pv.node_affinity
    if pv.migrated_plugin and pv.migrated_plugin in migrated_plugins:
        if pv.untranslatable:
            return pv.untranslatable
        terms = pv.migrated_affinity
    if terms and not terms_hold(node, terms):
        return "no matching NodeSelectorTerms"  # upstream's CheckNodeAffinity error
    return ""
