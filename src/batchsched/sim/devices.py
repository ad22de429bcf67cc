"""DRA in a scenario (docs/simulate.md): devices a pool's nodes carry, DeviceClasses, and the
claim each pod of a job gets from a template.

    cluster:
      deviceClasses: [DeviceClass manifests]
      pools:
      - name: a100
        count: 4
        allocatable: {cpu: "64"}
        devices:                    # per node; each entry makes `count` devices <name>-<i>
        - {driver: gpu.example.com, name: mig-1g, count: 7,
           attributes: {profile: 1g.10gb, nvlink: 0}, capacity: {memory: 10Gi}}
    work:
      jobs:
      - name: a
        resourceClaims:             # each pod gets its own claim <pod>-<name>
        - {name: gpu, spec: {devices: {requests: [...], constraints: [...]}}}

A pool's devices of one driver on one node are one ResourceSlice, of a pool named after the
node; the claims are made from ResourceClaimTemplates the scheduler instantiates, as
`batchsched schedule` does, and deleted with their pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchsched.objects.dra import (
    ResourceClaimTemplate,
    ResourceSlice,
    read_resource_claim_template,
    read_resource_slice,
)
from batchsched.objects.errors import ManifestError, shown
from batchsched.objects.parse import read_device_class
from batchsched.objects.quantity import parse_quantity
from batchsched.objects.records import DeviceClass, PodClaim
from batchsched.sim.fields import (
    MAX_COUNT,
    REQUIRED,
    Fields,
    ScenarioError,
    positive_int,
    string,
)

_DEVICE = ("driver", "name", "count", "attributes", "capacity")
_CLAIM = ("name", "spec")
# A scenario's attribute values and the ResourceSlice attribute type each becomes.
_ATTRIBUTE_TYPES: tuple[tuple[type, str], ...] = ((bool, "bool"), (int, "int"), (str, "string"))


@dataclass
class ScenarioDevices:
    """The DRA objects of a scenario: shared by its runs, never changed in place."""

    classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    templates: list[ResourceClaimTemplate] = field(default_factory=list)


def device_classes(c: Fields) -> list[DeviceClass]:
    """`cluster.deviceClasses`: DeviceClass manifests."""
    out: dict[str, DeviceClass] = {}
    for i, manifest in enumerate(c.items("deviceClasses")):
        try:
            device_class = read_device_class(manifest if isinstance(manifest, Mapping) else {})
        except ManifestError as err:
            raise c.fail(f"deviceClasses[{i}]", str(err)) from None
        if device_class.name in out:
            raise c.fail(f"deviceClasses[{i}]", f"DeviceClass {device_class.name} is defined twice")
        out[device_class.name] = device_class
    return list(out.values())


def pool_slices(pool: Fields, nodes: list[str]) -> list[ResourceSlice]:
    """A pool's `devices`: one ResourceSlice per node and driver."""
    by_driver: dict[str, list[dict[str, Any]]] = {}
    names: set[tuple[str, str]] = set()
    for i, raw in enumerate(pool.items("devices")):
        d = Fields(pool.source, raw, pool.path(f"devices[{i}]"), _DEVICE)
        driver = d.value("driver", string, REQUIRED)
        name = d.value("name", string, REQUIRED)
        count = d.value("count", positive_int, 1)
        if count > MAX_COUNT:
            raise d.fail("count", f"must be at most {MAX_COUNT}, got {count}")
        if (driver, name) in names:
            raise d.fail("name", f"{name}: another entry of the pool has it for driver {driver}")
        names.add((driver, name))
        device = {"attributes": _attributes(d), "capacity": _capacity(d)}
        devices = by_driver.setdefault(driver, [])
        devices.extend({"name": f"{name}-{k}", **device} for k in range(count))
    out = []
    for node in nodes:
        for driver, devices in sorted(by_driver.items()):
            manifest = {
                "metadata": {"name": f"{node}-{driver}"},
                "spec": {
                    "driver": driver,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
            try:
                out.append(read_resource_slice(manifest))
            except ManifestError as err:
                raise pool.fail("devices", f"driver {driver}: {err}") from None
    return out


def _attributes(d: Fields) -> dict[str, dict[str, Any]]:
    raw = d.raw.get("attributes") or {}
    if not isinstance(raw, Mapping):
        raise d.fail("attributes", f"must be a mapping of name to value, got {shown(raw)}")
    out = {}
    for key, value in raw.items():
        kind = next((t for cls, t in _ATTRIBUTE_TYPES if isinstance(value, cls)), None)
        if kind is None:
            raise d.fail(
                f"attributes.{key}", f"must be an int, a bool or a string, got {shown(value)}"
            )
        out[str(key)] = {kind: value}
    return out


def _capacity(d: Fields) -> dict[str, dict[str, Any]]:
    raw = d.raw.get("capacity") or {}
    if not isinstance(raw, Mapping):
        raise d.fail("capacity", f"must be a mapping of name to quantity, got {shown(raw)}")
    out = {}
    for key, value in raw.items():
        try:
            parse_quantity(value)
        except ValueError as err:
            raise d.fail(f"capacity.{key}", str(err)) from None
        out[str(key)] = {"value": str(value)}
    return out


def job_claims(
    f: Fields, job: str, namespace: str, classes: list[DeviceClass]
) -> tuple[tuple[PodClaim, ...], tuple[ResourceClaimTemplate, ...]]:
    """A job template's `resourceClaims`: the pods' entries and the templates they name
    (`<job>-<entry>`)."""
    known = sorted(c.name for c in classes)
    refs: list[PodClaim] = []
    templates: list[ResourceClaimTemplate] = []
    for i, raw in enumerate(f.items("resourceClaims")):
        e = Fields(f.source, raw, f.path(f"resourceClaims[{i}]"), _CLAIM)
        entry = e.value("name", string, REQUIRED)
        if any(r.name == entry for r in refs):
            raise e.fail("name", f"{entry}: another claim of the job has this name")
        spec = e.raw.get("spec")
        if not isinstance(spec, Mapping):
            raise e.fail("spec", "is required: a ResourceClaim spec (devices.requests)")
        manifest = {
            "metadata": {"name": f"{job}-{entry}", "namespace": namespace},
            "spec": {"spec": spec},
        }
        try:
            template = read_resource_claim_template(manifest)
        except ManifestError as err:
            field_name = err.field.removeprefix("spec.spec.").removeprefix("spec.spec")
            raise e.fail(f"spec.{field_name}".rstrip("."), err.what) from None
        if not template.requests:
            raise e.fail("spec.devices.requests", "must list at least one request")
        for request in template.requests:
            for alt in request.alternatives:
                if alt.device_class not in known:
                    raise e.fail(
                        "spec.devices.requests",
                        f"request {alt.name}: deviceClassName {alt.device_class!r} must name "
                        f"a DeviceClass of cluster.deviceClasses ({', '.join(known) or 'none'})",
                    )
        refs.append(PodClaim(entry, template_name=template.name))
        templates.append(template)
    return tuple(refs), tuple(templates)


def check_templates(path: Path, templates: list[ResourceClaimTemplate]) -> None:
    """Two jobs or generators whose claims would share a template name."""
    seen: set[str] = set()
    for template in templates:
        if template.key in seen:
            raise ScenarioError(
                f"{path}: work: two jobs or generators make claims from template "
                f"{template.key}: give them distinct names"
            )
        seen.add(template.key)
