"""Readers for upstream's Workload API: `Workload` and `PodGroup` of `scheduling.k8s.io`.

Kubernetes 1.36 serves them as `v1alpha2`, 1.37 as `v1beta1`; the two spell some fields
differently, and both read into the one PodGroup record the scheduler uses for every kind of
group (records.PodGroup):

- template reference: v1alpha2 `spec.podGroupTemplateRef.workload{workloadName,
  podGroupTemplateName}`, v1beta1 `spec.workloadRef{workloadName, templateName}`;
- disruptionMode: v1alpha2 `Pod` (default) or `PodGroup`, v1beta1 `{single: {}}` (default) or
  `{all: {}}`;
- the scheduled condition: v1alpha2 `PodGroupScheduled`, v1beta1 `PodGroupInitiallyScheduled`.

`spec.schedulingPolicy` is exactly one of `basic: {}` and `gang: {minCount: N}` in both;
`spec.schedulingConstraints.topology: [{key}]` (both versions) is read by topology.py; the
annotation `batchsched.io/max-runtime`, as on the CRD, states its members' runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchsched.objects.errors import shown
from batchsched.objects.numbers import INT32_MAX, INT32_MIN
from batchsched.objects.parse import (
    Json,
    _Reader,
    read_conditions,
    read_pod_group,
    stated_runtime_of_group,
)
from batchsched.objects.records import (
    UPSTREAM_GROUP,
    PodGroup,
    PodGroupStatus,
    Workload,
    WorkloadTemplate,
)
from batchsched.objects.topology import read_topology

V1ALPHA2 = f"{UPSTREAM_GROUP}/v1alpha2"
V1BETA1 = f"{UPSTREAM_GROUP}/v1beta1"
VERSIONS = (V1BETA1, V1ALPHA2)  # newest first: what discovery prefers

# The condition kube-scheduler sets when it has (or has not yet) placed the group.
SCHEDULED_CONDITION = {V1ALPHA2: "PodGroupScheduled", V1BETA1: "PodGroupInitiallyScheduled"}


def is_upstream(obj: Json) -> bool:
    """Whether a `kind: PodGroup` / `Workload` manifest is upstream's, not the CRD."""
    api_version = obj.get("apiVersion")
    return isinstance(api_version, str) and api_version.startswith(UPSTREAM_GROUP + "/")


def _version(r: _Reader, obj: Json) -> str:
    return r.choice(obj, "apiVersion", VERSIONS)


def _policy(r: _Reader, raw: Any, path: str) -> tuple[bool, int]:
    """(gang, minimum members) from a schedulingPolicy: exactly one of basic and gang."""
    policy = r.get(raw, path, dict, {})
    message = "must set exactly one of basic: {} and gang: {minCount: N}"
    if _one_of(r.at(path), policy, ("basic", "gang"), message) == "basic":
        return False, 1
    where = f"{path}.gang.minCount"
    if r.get(raw, f"{path}.gang", dict, {}).get("minCount") is None:
        raise r.fail(where, "is required")
    return True, r.integer(raw, where, 0, 1, INT32_MAX)


def _disrupt_whole(r: _Reader, raw: Any, path: str, version: str) -> bool:
    """True for PodGroup / {all: {}}; False (the default) for Pod / {single: {}}."""
    value = raw.get("disruptionMode") if isinstance(raw, Mapping) else None
    where = f"{path}.disruptionMode" if path else "disruptionMode"
    if value is None:
        return False
    if version == V1ALPHA2:
        if value not in ("Pod", "PodGroup"):
            raise r.fail(where, f"{value!r} is not one of Pod, PodGroup")
        return bool(value == "PodGroup")
    message = "must be exactly one of {single: {}} and {all: {}}"
    if not isinstance(value, Mapping):
        raise r.fail(where, f"{message}, got {shown(value)}")
    return _one_of(r.at(where), value, ("single", "all"), message) == "all"


def _one_of(r: _Reader, union: Mapping[str, Any], members: tuple[str, ...], message: str) -> str:
    """The one member set in a union of objects (a null member is not set, as the API server
    decodes it); a member that is not an object is refused, naming it."""
    chosen = []
    for name in members:
        value = union.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise r.fail(name, f"must be a mapping, got {shown(value)}")
        chosen.append(name)
    if len(chosen) != 1:
        raise r.fail("", message)
    return chosen[0]


def _priority(r: _Reader, raw: Any, path: str) -> tuple[int | None, str]:
    scoped = r.at(path) if path else r
    class_name = scoped.get(raw, "priorityClassName", str, "")
    if not isinstance(raw, Mapping) or raw.get("priority") is None:
        return None, class_name
    return scoped.integer(raw, "priority", 0, INT32_MIN, INT32_MAX), class_name


def _named(kind: str, obj: Json) -> tuple[_Reader, str]:
    """A reader for a namespaced object of this API that has a name, and its version."""
    r = _Reader(kind, obj)
    r.namespaced()
    r.require_name()
    return r, _version(r, obj)


def _pair(r: _Reader, obj: Json, path: str, first: str, second: str) -> str:
    """`first/second` of the reference at `path` (e.g. `Job/train`), "" if it is not set."""
    raw = r.get(obj, path, dict, {})
    if not raw:
        return ""
    ref = r.at(path)
    return f"{ref.get(raw, first, str, '')}/{ref.get(raw, second, str, '')}"


def read_upstream_pod_group(obj: Json) -> PodGroup:
    r, version = _named("PodGroup", obj)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise r.fail("spec", "is required")
    gang, min_member = _policy(r, obj, "spec.schedulingPolicy")
    priority, class_name = _priority(r, spec, "spec")
    if version == V1ALPHA2:
        ref = ("spec.podGroupTemplateRef.workload", "workloadName", "podGroupTemplateName")
    else:
        ref = ("spec.workloadRef", "workloadName", "templateName")
    bound, runtime_error = stated_runtime_of_group(r, obj)
    return PodGroup(
        namespace=r.namespace,
        name=r.name,
        min_member=min_member,
        creation_timestamp=r.time(obj, "metadata.creationTimestamp"),
        status=PodGroupStatus(conditions=read_conditions(r, obj)),
        resource_version=r.get(obj, "metadata.resourceVersion", str, ""),
        api_version=version,
        gang=gang,
        disrupt_whole=_disrupt_whole(r, spec, "spec", version),
        priority=priority,
        priority_class_name=class_name,
        workload=_pair(r, obj, *ref),
        topology=read_topology(r, obj, upstream=True),
        labels=r.string_map(obj, "metadata.labels"),
        max_runtime_seconds=bound,
        runtime_error=runtime_error,
    )


def read_workload(obj: Json) -> Workload:
    r, version = _named("Workload", obj)
    templates = []
    seen: set[str] = set()
    raw_templates = r.items(obj, "spec.podGroupTemplates")
    if not raw_templates:
        raise r.fail("spec.podGroupTemplates", "must list at least one template")
    for i, raw in enumerate(raw_templates):
        path = f"spec.podGroupTemplates[{i}]"
        t = r.at(path)
        name = t.required_str(raw, "name")
        if name in seen:
            raise t.fail("name", f"{name!r} is used by two templates")
        seen.add(name)
        gang, min_member = _policy(t, raw, "schedulingPolicy")
        priority, class_name = _priority(t, raw, "")
        templates.append(
            WorkloadTemplate(
                name=name,
                gang=gang,
                min_member=min_member,
                disrupt_whole=_disrupt_whole(t, raw, "", version),
                priority=priority,
                priority_class_name=class_name,
            )
        )
    return Workload(
        namespace=r.namespace,
        name=r.name,
        api_version=version,
        templates=tuple(templates),
        controller=_pair(r, obj, "spec.controllerRef", "kind", "name"),
    )


def read_any_pod_group(obj: Json) -> PodGroup:
    """A `kind: PodGroup` of either API: upstream's by its apiVersion, else the CRD."""
    return read_upstream_pod_group(obj) if is_upstream(obj) else read_pod_group(obj)
