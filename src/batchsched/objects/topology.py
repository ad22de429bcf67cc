"""How a gang asks for topology (docs/topology.md): the readers of its request.

- upstream's Workload API (`scheduling.k8s.io` v1alpha2 and v1beta1): a PodGroup's
  `spec.schedulingConstraints.topology: [{key: <node label key>}]`, at most one entry (as the
  API server allows), is a required key;
- any PodGroup (the scheduler-plugins CRD too), and any pod for itself: the annotations
  `batchsched.io/topology-required: <key>` and
  `batchsched.io/topology-preferred: <key>[,<broader key>...]`.

A group or pod asks for one of required and preferred, not both; a key is a Kubernetes label key
(an optional DNS subdomain prefix and `/`, then a name of at most 63 characters).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from batchsched.objects.records import TopologyRequest

if TYPE_CHECKING:  # parse.py reads PodGroups with this module
    from batchsched.objects.parse import _Reader

NO_TOPOLOGY = TopologyRequest()
REQUIRED_ANNOTATION = "batchsched.io/topology-required"
PREFERRED_ANNOTATION = "batchsched.io/topology-preferred"
_CONSTRAINTS = "spec.schedulingConstraints"

_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_PREFIX = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*", re.ASCII)


def label_key_problem(key: str) -> str:
    """Why `key` is not a valid node label key, or "" if it is."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX.fullmatch(prefix)):
        return f"{key!r}: the prefix before '/' must be a DNS subdomain of at most 253 characters"
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return (
            f"{key!r} is not a label key: a name of at most 63 characters (letters, digits, "
            "'-', '_', '.', starting and ending with a letter or digit), optionally prefixed "
            "by a DNS subdomain and '/'"
        )
    return ""


def _key(r: _Reader, field: str, key: str) -> str:
    problem = label_key_problem(key)
    if problem:
        raise r.fail(field, problem)
    return key


def read_topology(r: _Reader, obj: Mapping[str, Any], upstream: bool) -> TopologyRequest:
    """A PodGroup's or pod's topology request from its annotations (and, for an upstream
    PodGroup, its constraints)."""
    annotations = r.string_map(obj, "metadata.annotations")
    required = annotations.get(REQUIRED_ANNOTATION, "").strip()
    preferred_raw = annotations.get(PREFERRED_ANNOTATION)
    where_required = f"metadata.annotations.{REQUIRED_ANNOTATION}"
    if REQUIRED_ANNOTATION in annotations:
        _key(r, where_required, required)
    constraint = _upstream_key(r, obj) if upstream else ""
    if constraint and required and constraint != required:
        raise r.fail(
            where_required,
            f"asks {required!r} but {_CONSTRAINTS}.topology[0].key asks {constraint!r}: "
            "set one of them",
        )
    required = constraint or required
    preferred: tuple[str, ...] = ()
    if preferred_raw is not None:
        where = f"metadata.annotations.{PREFERRED_ANNOTATION}"
        keys = [part.strip() for part in preferred_raw.split(",")]
        preferred = tuple(_key(r, where, key) for key in keys)
        if len(set(preferred)) != len(preferred):
            raise r.fail(where, f"{preferred_raw!r} names a key twice")
        if required:
            raise r.fail(
                where,
                f"is set with the required key {required!r}: ask for one of required "
                "and preferred topology",
            )
    return TopologyRequest(required=required, preferred=preferred)


def _upstream_key(r: _Reader, obj: Mapping[str, Any]) -> str:
    """The key of `spec.schedulingConstraints.topology` ("" if none)."""
    path = f"{_CONSTRAINTS}.topology"
    entries = r.items(obj, path)
    if len(entries) > 1:
        raise r.fail(path, f"has {len(entries)} entries: at most 1 is allowed")
    if not entries:
        return ""
    return _key(r, f"{path}[0].key", r.at(f"{path}[0]").required_str(entries[0], "key"))
