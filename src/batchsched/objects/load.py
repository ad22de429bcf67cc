"""Read manifest files: YAML (multi-document, `kind: List`) and JSON as kubectl prints them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from batchsched.objects.documents import MAX_DEPTH, read_text, without_gc, yaml_documents
from batchsched.objects.dra import ResourceClaim, ResourceClaimTemplate, ResourceSlice
from batchsched.objects.errors import InputError, ManifestError
from batchsched.objects.kinds import BY_NAME, KINDS, NAMESPACED
from batchsched.objects.queues import Queue
from batchsched.objects.records import (
    DeviceClass,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Workload,
)
from batchsched.objects.schema import unknown_fields
from batchsched.objects.system_classes import SYSTEM_CLASSES
from batchsched.objects.unread import Unread, UnreadVersion, is_read
from batchsched.objects.volumes import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
)


@dataclass
class Objects:
    """Everything scheduling-relevant found in a set of manifests, in file order: one list per
    kind of objects/kinds.py (its `field`)."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    pod_groups: list[PodGroup] = field(default_factory=list)  # of every API
    workloads: list[Workload] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    device_classes: list[DeviceClass] = field(default_factory=list)
    claims: list[PersistentVolumeClaim] = field(default_factory=list)
    volumes: list[PersistentVolume] = field(default_factory=list)
    storage_classes: list[StorageClass] = field(default_factory=list)
    csi_nodes: list[CSINode] = field(default_factory=list)
    attachments: list[VolumeAttachment] = field(default_factory=list)
    csi_drivers: list[CSIDriver] = field(default_factory=list)
    capacities: list[CSIStorageCapacity] = field(default_factory=list)
    resource_slices: list[ResourceSlice] = field(default_factory=list)
    resource_claims: list[ResourceClaim] = field(default_factory=list)
    claim_templates: list[ResourceClaimTemplate] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)  # batchsched's, Volcano's and KAI's
    # Unknown fields in the files, `FILE: Kind name: unknown field "path"`, each once.
    warnings: list[str] = field(default_factory=list)
    # Objects of the files that were not read, by (kind, apiVersion); files with no object.
    unread: dict[tuple[str, str], Unread] = field(default_factory=dict)
    empty_sources: list[str] = field(default_factory=list)

    def warn(self, warning: str) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)

    def add(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Read `obj` into its kind's list (objects/kinds.py); other kinds are not read."""
        spec = BY_NAME.get(kind)
        if spec is not None and spec.accepts(obj):
            getattr(self, spec.field).append(spec.read(obj))

    def check_unique(self, source: str) -> None:
        """Two objects with one name would silently shadow each other: refuse that."""
        for spec in KINDS:
            seen: set[str] = set()
            for record in getattr(self, spec.field):
                name = spec.key(record)
                if name in seen:
                    raise ManifestError(
                        "defined more than once", obj=f"{spec.name} {name}"
                    ).located(source)
                seen.add(name)

    def check_priority_classes(self, source: str, classes: list[PriorityClass]) -> None:
        """A pod (or upstream PodGroup) naming a PriorityClass that does not exist: admission
        would refuse it. The API server's built-in classes always exist."""
        known = {c.name for c in classes}
        named = [(f"Pod {p.key}", p.priority_class_name) for p in self.pods]
        named += [(f"PodGroup {g.key}", g.priority_class_name) for g in self.pod_groups]
        for obj, class_name in named:
            if class_name and class_name not in known and class_name not in SYSTEM_CLASSES:
                raise ManifestError(
                    f"no PriorityClass {class_name!r} "
                    f"(known: {', '.join(sorted(known)) or 'none'})",
                    obj=obj,
                    field="spec.priorityClassName",
                    source=source,
                )

    def skip(self, kind: str, api_version: str, source: str) -> None:
        """Count an object that is not read, for the summary line of its kind."""
        unread = self.unread.setdefault((kind, api_version), Unread(kind, api_version))
        unread.count += 1
        if source not in unread.sources:
            unread.sources.append(source)

    def notices(self) -> list[str]:
        """What a person should hear of the files besides their unknown fields: files with no
        object, and one line per kind not read."""
        lines = [f"{source}: no object in it" for source in self.empty_sources]
        return lines + [u.summary() for u in self.unread.values()]

    def check_strict(self) -> None:
        """--strict: unknown fields are errors, as with kubectl's strict field validation,
        and so are kinds that look mistyped or belong to another scheduler."""
        refused = [u.summary() for u in self.unread.values() if u.strict_error]
        if self.warnings or refused:
            raise StrictError(self.warnings, refused)


class StrictError(InputError):
    def __init__(self, warnings: list[str], unread: list[str] | None = None) -> None:
        parts = []
        if warnings:
            lines = "\n  ".join(warnings)
            parts.append(f"{len(warnings)} unknown field(s):\n  {lines}")
        if unread:
            lines = "\n  ".join(unread)
            parts.append(f"{len(unread)} kind(s) not read:\n  {lines}")
        super().__init__("--strict: " + "\n".join(parts))


def _documents(text: str, source: str) -> Iterator[Any]:
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            yield orjson.loads(text)
            return
        except orjson.JSONDecodeError:
            pass  # YAML is a superset of JSON: let the YAML parser report the error
    yield from yaml_documents(text, source)


def _flatten(doc: Any, source: str, depth: int = 0) -> Iterator[Mapping[str, Any]]:
    if doc is None:
        return
    if depth >= MAX_DEPTH:  # JSON is read by orjson, which allows 1,024 levels
        raise ManifestError(f"lists nest deeper than {MAX_DEPTH} levels", source=source)
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, source, depth + 1)
        return
    if not isinstance(doc, Mapping):
        raise ManifestError(
            f"expected an object with a kind, got {type(doc).__name__}", source=source
        )
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from _flatten(item, source, depth + 1)
        return
    yield doc


def _label(kind: str, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or "?")
    if kind in NAMESPACED:
        return f"{kind} {meta.get('namespace') or 'default'}/{name}"
    return f"{kind} {name}"


def load_text(text: str, source: str, into: Objects | None = None) -> Objects:
    objects = into if into is not None else Objects()
    found = 0
    for doc in _documents(text, source):
        for obj in _flatten(doc, source):
            found += 1
            kind = obj.get("kind")
            if not isinstance(kind, str):
                raise ManifestError("every object needs a kind", source=source)
            api_version = obj.get("apiVersion")
            api_version = api_version if isinstance(api_version, str) else ""
            try:
                if not is_read(kind, api_version):
                    objects.skip(kind, api_version, source)
                    continue
            except UnreadVersion as err:
                raise ManifestError(str(err), obj=_label(kind, obj), field="apiVersion").located(
                    source
                ) from None
            try:
                objects.add(kind, obj)
            except ManifestError as err:
                raise err.located(source) from None
            for path in unknown_fields(kind, obj):
                objects.warn(f"{source}: {_label(kind, obj)}: unknown field {path!r}")
    if not found:
        objects.empty_sources.append(source)
    return objects


MANIFEST_SUFFIXES = (".json", ".yaml", ".yml")
STDIN = "-"


def expand_paths(paths: list[Path], recursive: bool) -> list[Path]:
    """Files as given; a directory stands for its manifest files (.json, .yaml, .yml) in name
    order, and with `recursive` for those of its subdirectories too, as `kubectl -f DIR -R`."""
    out: list[Path] = []
    for path in paths:
        if str(path) == STDIN or not path.is_dir():
            out.append(path)
            continue
        found = path.rglob("*") if recursive else path.iterdir()
        out.extend(sorted(p for p in found if p.is_file() and _is_manifest(p)))
    return out


def directory_notices(paths: list[Path], recursive: bool) -> list[str]:
    """What `expand_paths` leaves out that a person may have meant: a directory with no
    manifest file, or (without `recursive`) manifest files only in its subdirectories."""
    notes = []
    for path in paths:
        if str(path) == STDIN or not path.is_dir():
            continue
        manifests = [p for p in path.rglob("*") if p.is_file() and _is_manifest(p)]
        nested = [p for p in manifests if p.parent != path]
        if not recursive and nested and len(nested) == len(manifests):
            notes.append(
                f"{path}: no manifest file in it, {len(nested)} in its subdirectories "
                "(give -R to read them)"
            )
        elif not recursive and nested:
            notes.append(
                f"{path}: {len(nested)} manifest file(s) in its subdirectories not read "
                "(give -R to read them)"
            )
        elif not manifests:
            notes.append(f"{path}: no manifest file ({', '.join(MANIFEST_SUFFIXES)}) in it")
    return notes


def _is_manifest(path: Path) -> bool:
    return path.suffix.lower() in MANIFEST_SUFFIXES


def load_files(paths: list[Path], stdin: Callable[[], str] | None = None) -> Objects:
    """The objects of `paths`; `-` reads `stdin` (once: a second `-` would read nothing)."""
    # The collector is paused over the records too: reading them allocates enough to set off
    # collections that walk the whole parsed snapshot (a third of the JSON read's time).
    return without_gc(lambda: _load_all(paths, stdin))


def _load_all(paths: list[Path], stdin: Callable[[], str] | None) -> Objects:
    objects = Objects()
    for path in paths:
        if str(path) == STDIN and stdin is not None:
            load_text(stdin(), "<stdin>", objects)
            continue
        load_text(read_text(path), str(path), objects)
    objects.check_unique(", ".join(str(p) for p in paths))
    return objects
