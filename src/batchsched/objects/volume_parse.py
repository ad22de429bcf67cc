"""Readers for the storage objects (objects/volumes.py)."""

from __future__ import annotations

from batchsched.objects.csi_migration import (
    MIGRATIONS,
    TranslationError,
    pv_affinity,
    pv_handle,
)
from batchsched.objects.numbers import INT32_MAX
from batchsched.objects.parse import (
    Json,
    _Reader,
    node_selector_terms,
    owner_references,
    read_label_selector,
)
from batchsched.objects.quantity import QuantityError, resource_amount
from batchsched.objects.records import NodeSelectorTerm, Requirement
from batchsched.objects.volumes import (
    BETA_CLASS_ANNOTATION,
    BIND_COMPLETED_ANNOTATION,
    READ_WRITE_ONCE_POD,
    SELECTED_NODE_ANNOTATION,
    WAIT_FOR_FIRST_CONSUMER,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)

_BINDING_MODES = ("Immediate", WAIT_FOR_FIRST_CONSUMER)
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"


def read_pvc(obj: Json) -> PersistentVolumeClaim:
    r = _Reader("PersistentVolumeClaim", obj)
    r.namespaced()
    r.require_name()
    spec = r.get(obj, "spec", dict, {})
    sp = r.at("spec")
    annotations = r.string_map(obj, "metadata.annotations")
    storage_class = annotations.get(BETA_CLASS_ANNOTATION) or sp.get(
        spec, "storageClassName", str, ""
    )
    return PersistentVolumeClaim(
        namespace=r.namespace,
        name=r.name,
        volume_name=sp.get(spec, "volumeName", str, ""),
        storage_class=storage_class,
        bind_completed=BIND_COMPLETED_ANNOTATION in annotations,
        phase=r.get(obj, "status.phase", str, "") or "Pending",
        deletion_timestamp=r.time(obj, "metadata.deletionTimestamp"),
        owner_uids=tuple(o.uid for o in owner_references(r, obj) if o.controller),
        access_modes=_access_modes(sp, spec),
        request=sp.resources(spec, "resources.requests").get("storage", 0),
        selector=read_label_selector(sp, spec, "selector") if spec.get("selector") else None,
        volume_mode=sp.get(spec, "volumeMode", str, "Filesystem"),
        attributes_class=sp.get(spec, "volumeAttributesClassName", str, ""),
        selected_node=annotations.get(SELECTED_NODE_ANNOTATION, ""),
    )


ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", READ_WRITE_ONCE_POD)


def _access_modes(sp: _Reader, spec: Json) -> tuple[str, ...]:
    """`spec.accessModes` of a claim or volume, each one the API server knows: binding
    compares them, and an unknown one (or a number read as its text) would match nothing."""
    modes = sp.strings(spec, "accessModes")
    for i, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            raise sp.fail(f"accessModes[{i}]", f"{mode!r} is not one of {', '.join(ACCESS_MODES)}")
    return modes


def read_pv(obj: Json) -> PersistentVolume:
    r = _Reader("PersistentVolume", obj)
    r.require_name()
    spec = r.get(obj, "spec", dict, {})
    path = "spec.nodeAffinity.required.nodeSelectorTerms"
    required = r.get(obj, "spec.nodeAffinity.required", dict, {})
    raw_terms = r.at("spec.nodeAffinity.required").items(required, "nodeSelectorTerms")
    terms = node_selector_terms(r, raw_terms, path)
    if required and not terms:
        raise r.fail(path, "must list at least one term")
    csi = r.get(spec, "csi", dict, {})
    sp = r.at("spec")
    claim_ref = sp.get(spec, "claimRef", dict, {})
    ref = r.at("spec.claimRef")
    annotations = r.string_map(obj, "metadata.annotations")
    labels = r.string_map(obj, "metadata.labels")
    pv = PersistentVolume(
        name=r.name,
        labels=labels,
        node_affinity=terms,
        capacity=sp.resources(spec, "capacity").get("storage", 0),
        access_modes=_access_modes(sp, spec),
        storage_class=annotations.get(BETA_CLASS_ANNOTATION)
        or sp.get(spec, "storageClassName", str, ""),
        volume_mode=sp.get(spec, "volumeMode", str, "Filesystem"),
        attributes_class=sp.get(spec, "volumeAttributesClassName", str, ""),
        claim_ref=(
            f"{ref.get(claim_ref, 'namespace', str, '') or 'default'}/"
            f"{ref.get(claim_ref, 'name', str, '')}"
            if claim_ref
            else ""
        ),
        phase=r.get(obj, "status.phase", str, "") or "Available",
        deleting=r.time(obj, "metadata.deletionTimestamp") is not None,
        csi_driver=r.at("spec.csi").get(csi, "driver", str, ""),
        csi_handle=r.at("spec.csi").get(csi, "volumeHandle", str, ""),
    )
    return pv if csi else _migrated(sp, spec, pv)


def _migrated(sp: _Reader, spec: Json, pv: PersistentVolume) -> PersistentVolume:
    """A PV with a migrated in-tree source, as the scheduler sees it translated: counted
    under the CSI driver and handle (not at all when the handle cannot be derived: upstream
    logs it), with the node affinity it takes on where its plugin is migrated."""
    for kind, migration in MIGRATIONS.items():
        source = spec.get(kind)
        if isinstance(source, dict) and migration.counted:
            sp.at(kind).required_str(source, migration.ident)
            pv.migrated_plugin = migration.plugin
            try:
                pv.csi_handle = pv_handle(kind, source, pv.labels)
            except TranslationError as err:
                pv.untranslatable = f"could not translate pv: {err}"
                return pv
            pv.csi_driver = migration.driver
            pv.migrated_affinity = pv_affinity(kind, pv.node_affinity, pv.labels)
    return pv


def read_storage_class(obj: Json) -> StorageClass:
    r = _Reader("StorageClass", obj)
    r.require_name()
    provisioner = r.required_str(obj, "provisioner")
    mode = r.choice(obj, "volumeBindingMode", _BINDING_MODES, "Immediate")
    topologies = []
    for i, raw in enumerate(r.items(obj, "allowedTopologies")):
        where = f"allowedTopologies[{i}].matchLabelExpressions"
        exprs = []
        for j, expr in enumerate(
            r.at(f"allowedTopologies[{i}]").items(raw, "matchLabelExpressions")
        ):
            e = r.at(f"{where}[{j}]")
            key = e.get(expr, "key", str, "")
            values = e.strings(expr, "values")
            if not key or not values:
                raise e.fail("", "needs a key and values")
            exprs.append(Requirement(key, "In", values))
        topologies.append(NodeSelectorTerm(tuple(exprs), ()))
    return StorageClass(
        name=r.name,
        provisioner=provisioner,
        volume_binding_mode=mode,
        allowed_topologies=tuple(topologies),
    )


def read_csi_node(obj: Json) -> CSINode:
    r = _Reader("CSINode", obj)
    r.require_name()
    limits: dict[str, int] = {}
    for i, raw in enumerate(r.items(obj, "spec.drivers")):
        d = r.at(f"spec.drivers[{i}]")
        driver = d.required_str(raw, "name")
        if d.get(raw, "allocatable", dict, {}).get("count") is not None:
            limits[driver] = d.integer(raw, "allocatable.count", 0, 0, INT32_MAX)
    migrated = r.string_map(obj, "metadata.annotations").get(MIGRATED_PLUGINS_ANNOTATION, "")
    return CSINode(r.name, frozenset(filter(None, migrated.split(","))), limits)


def read_volume_attachment(obj: Json) -> VolumeAttachment:
    r = _Reader("VolumeAttachment", obj)
    r.require_name()
    return VolumeAttachment(
        name=r.name,
        attacher=r.required_str(obj, "spec.attacher"),
        node_name=r.required_str(obj, "spec.nodeName"),
        pv_name=r.get(obj, "spec.source.persistentVolumeName", str, ""),
    )


def read_csi_driver(obj: Json) -> CSIDriver:
    r = _Reader("CSIDriver", obj)
    r.require_name()
    return CSIDriver(name=r.name, storage_capacity=r.get(obj, "spec.storageCapacity", bool, False))


def read_csi_storage_capacity(obj: Json) -> CSIStorageCapacity:
    r = _Reader("CSIStorageCapacity", obj)
    r.namespaced()
    r.require_name()
    storage_class = r.required_str(obj, "storageClassName")
    topology = read_label_selector(r, obj, "nodeTopology") if "nodeTopology" in obj else None
    amounts: dict[str, int | None] = {}
    for field in ("maximumVolumeSize", "capacity"):
        amounts[field] = None
        if obj.get(field) is not None:
            try:
                amounts[field] = resource_amount("storage", obj[field])
            except QuantityError as err:
                raise r.fail(field, str(err)) from None
    capacity = amounts["capacity"]
    maximum = amounts["maximumVolumeSize"]
    limit = capacity if maximum is None else maximum  # the maximum is the more precise
    return CSIStorageCapacity(r.namespace, r.name, storage_class, topology, limit, capacity)
