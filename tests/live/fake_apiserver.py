"""An in-process fake Kubernetes API server for the live tests and the live benchmark.

It keeps objects in memory and behaves like kube-apiserver on what batchsched uses:
resourceVersions, list and watch (chunked JSON lines, bookmarks, an ERROR event with 410 for a
resourceVersion older than the kept history), create, replace with optimistic concurrency,
merge and strategic merge patches (pod conditions merge by `type`), status subresources, the
pod Binding subresource (409 when already bound), delete with UID/resourceVersion
preconditions, Events and Leases, paginated lists (`limit`/`continue`, every page from the
first page's snapshot, 410 once history is compacted past it; a `resourceVersion=0` list comes
whole, as the watch cache serves it), and the not-ready taint that the
real admission chain puts on every new Node (with `kubelet=True`, the default, a built-in node
kubelet then reports the node Ready and the taint is lifted, as the node lifecycle controller
does). Tests inject failures (`inject`), drop watches
(`drop_watches`) and compact history (`compact`) to exercise the client's recovery paths.
"""

from __future__ import annotations

import bisect
import copy
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    name: str = ""  # the store's key: the plural, unless two API groups share it

    @property
    def key(self) -> str:
        return self.name or self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


UPSTREAM_ALPHA = "podgroups.v1alpha2"
UPSTREAM_BETA = "podgroups.v1beta1"
RESOURCES = {
    r.key: r
    for r in (
        Resource("", "v1", "nodes", "Node", False),
        Resource("", "v1", "pods", "Pod", True),
        Resource("", "v1", "namespaces", "Namespace", False),
        Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
        Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
        Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True),
        Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
        Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
        Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True),
        Resource("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
        # Upstream's Workload API PodGroups: not served unless a test serves them (`missing`).
        Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True, UPSTREAM_ALPHA),
        Resource("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", True, UPSTREAM_BETA),
        Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
        Resource("", "v1", "persistentvolumes", "PersistentVolume", False),
        Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
        Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False),
        Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False),
        Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
        Resource("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True),
        Resource("batchsched.io", "v1alpha1", "queues", "Queue", False),
        Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, "queues.volcano"),
        Resource("scheduling.run.ai", "v2", "queues", "Queue", False, "queues.kai"),
        Resource("events.k8s.io", "v1", "events", "Event", True),
        Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
        # Reviews: answered at once from `tokens` and `grants`, never stored.
        Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False),
        Resource(
            "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
        ),
    )
}
REVIEWS = ("tokenreviews", "subjectaccessreviews")
MASTERS = "system:masters"  # the group allowed everything, as RBAC's superuser group
_BY_ROUTE = {(r.group, r.version, r.plural): r for r in RESOURCES.values()}
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


_DISCOVERY = re.compile(r"^/apis/(?P<group>[^/]+)(?:/(?P<version>[^/]+))?/?$")


class ApiFailure(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


@dataclass
class Fault:
    code: int
    remaining: int
    method: str | None
    path: str | None  # substring of the request path
    retry_after: int | None


NOT_READY = "node.kubernetes.io/not-ready"
# How long a test waits for what the scheduler will do: generous, for a machine under load
# (a wait returns as soon as what it waits for holds).
WAIT_SECONDS = 60.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any, strategic: bool = False) -> Any:
    """RFC 7386 merge patch; `strategic` also merges `conditions` lists by their `type`."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif strategic and key == "conditions" and isinstance(value, list):
            merged = {c.get("type"): c for c in out.get(key) or []}
            for cond in value:
                merged[cond.get("type")] = merge_patch(merged.get(cond.get("type")), cond)
            out[key] = list(merged.values())
        else:
            out[key] = merge_patch(out.get(key), value, strategic)
    return out


class FakeApiServer:
    def __init__(
        self, history: int = 100_000, bookmark_interval: float = 0.5, kubelet: bool = True
    ) -> None:
        self.lock = threading.Condition()
        # One condition per resource, so a write wakes only the watches of its resource.
        self.changed = {plural: threading.Condition(self.lock) for plural in RESOURCES}
        self.store: dict[str, dict[str, dict[str, Any]]] = {p: {} for p in RESOURCES}
        self.rv = 1
        self.history: list[tuple[int, str, str, dict[str, Any]]] = []
        self.compacted_rv = 1  # watches must start at or after this resourceVersion
        self.max_history = history
        self.bookmark_interval = bookmark_interval
        self.faults: list[Fault] = []
        self.kubelet = kubelet
        # continue token -> (resourceVersion of the first page, the items still to send)
        self.continuations: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self.requests: list[tuple[str, str]] = []  # (HTTP method, path)
        self.verbs: list[tuple[str, str]] = []
        self.credentials: set[str] = (
            set()
        )  # Authorization headers seen  # (Kubernetes verb: list, watch, get, ..., path)
        self.bindings = 0  # Binding requests accepted
        self.last_binding = 0.0  # wall time of the last one
        self.watch_generation = 0  # bumped by drop_watches: open watches end
        self.open_watches = 0
        self.stopped = False
        # Resources (by key) that answer 404, as an absent CRD or a disabled API does.
        self.missing: set[str] = {UPSTREAM_ALPHA, UPSTREAM_BETA}
        self.down = False  # restarting: requests on open connections get no answer
        # TokenReview: token -> the user it proves (username, uid, groups).
        self.tokens: dict[str, dict[str, Any]] = {}
        # SubjectAccessReview on non-resource URLs: (user name or "group:NAME", path, verb)
        # allowed; a path ending in `*` is a prefix, as in an RBAC rule.
        self.grants: set[tuple[str, str, str]] = set()
        self.reviews: list[dict[str, Any]] = []  # the review requests, in order
        self._listen(0)

    def discover(self, group: str, version: str | None) -> dict[str, Any]:
        """An APIGroup (`/apis/G`) or APIResourceList (`/apis/G/V`) of the served resources."""
        served = [r for r in RESOURCES.values() if r.group == group and r.key not in self.missing]
        if version is None:
            versions = sorted({r.api_version for r in served})
            if not versions:
                raise ApiFailure(404, "NotFound", f"the server does not serve {group}")
            return {
                "kind": "APIGroup",
                "name": group,
                "versions": [{"groupVersion": gv, "version": gv.split("/")[1]} for gv in versions],
            }
        resources = [r for r in served if r.version == version]
        if not resources:
            raise ApiFailure(404, "NotFound", f"the server does not serve {group}/{version}")
        return {
            "kind": "APIResourceList",
            "groupVersion": f"{group}/{version}",
            "resources": [
                {"name": r.plural, "kind": r.kind, "namespaced": r.namespaced} for r in resources
            ],
        }

    def _listen(self, port: int) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            self._wake_all()
        self._http.shutdown()
        self._http.server_close()

    def restart(self, downtime: float, while_down: Any = None) -> None:
        """Go away for `downtime` seconds and come back on the same port with the same objects
        but a fresh watch cache (history forgotten: resuming watches get 410, as after a real
        kube-apiserver restart). `while_down(self)` may change objects meanwhile."""
        port = int(self._http.server_address[1])
        with self.lock:
            self.down = True
            self.watch_generation += 1
            self._wake_all()
        self._http.shutdown()
        self._http.server_close()
        if while_down is not None:
            while_down(self)
        time.sleep(downtime)
        with self.lock:
            self.rv += 1
            self.history.clear()
            self.compacted_rv = self.rv
            self.down = False
        self._listen(port)
        self._thread.start()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def write_kubeconfig(self, path: Path) -> Path:
        path.write_text(
            orjson.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "fake", "user": {"token": "fake-token"}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                    "current-context": "fake",
                }
            ).decode()
        )
        return path

    # ---- test controls ---------------------------------------------------------------

    def inject(
        self,
        code: int,
        count: int = 1,
        method: str | None = None,
        path: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        """The next `count` requests matching method and path substring fail with `code`."""
        with self.lock:
            self.faults.append(Fault(code, count, method, path, retry_after))

    def drop_watches(self) -> None:
        with self.lock:
            self.watch_generation += 1
            self._wake_all()

    def compact(self) -> None:
        """Forget all history: a watch resuming from any earlier resourceVersion gets 410."""
        with self.lock:
            self.rv += 1
            self.history.clear()
            self.compacted_rv = self.rv
            self._wake_all()

    def _wake_all(self) -> None:
        self.lock.notify_all()
        for condition in self.changed.values():
            condition.notify_all()

    def vanish(self, plural: str, name: str, namespace: str | None = None) -> None:
        """Delete an object and compact history in one step: its DELETED event is never seen,
        as when an object goes while a watch is down and etcd compacts meanwhile."""
        res = RESOURCES[plural]
        ns = (namespace or "default") if res.namespaced else None
        with self.lock:
            del self.store[plural][self.key(ns, name)]
            self.rv += 1
            self.history.clear()
            self.compacted_rv = self.rv
            self._wake_all()

    def wait_for(self, predicate: Any, timeout: float = WAIT_SECONDS) -> bool:
        """Wait until `predicate(server)` holds (checked after every change): at once when it
        does, so the deadline is only how long a wait that fails takes to say so."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, 0.05))
        return True

    # ---- direct object access (tests set up the cluster with these) -------------------

    @staticmethod
    def key(namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if namespace else name

    def create(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        res = RESOURCES[plural]
        ns = obj.get("metadata", {}).get("namespace") or ("default" if res.namespaced else None)
        with self.lock:
            return copy.deepcopy(self._create(res, ns, copy.deepcopy(obj)))

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        res = RESOURCES[plural]
        ns = (namespace or "default") if res.namespaced else None
        with self.lock:
            obj = self.store[plural].get(self.key(ns, name))
            return copy.deepcopy(obj) if obj is not None else None

    def objects(self, plural: str) -> list[dict[str, Any]]:
        with self.lock:
            return [copy.deepcopy(o) for o in self.store[plural].values()]

    def delete(self, plural: str, name: str, namespace: str | None = None) -> None:
        res = RESOURCES[plural]
        ns = (namespace or "default") if res.namespaced else None
        with self.lock:
            self._delete(res, ns, name, {})

    def update(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        res = RESOURCES[plural]
        meta = obj["metadata"]
        ns = (meta.get("namespace") or "default") if res.namespaced else None
        with self.lock:
            return copy.deepcopy(self._replace(res, ns, meta["name"], copy.deepcopy(obj)))

    # ---- the API semantics (called with the lock held) ---------------------------------

    def _record(self, plural: str, type_: str, obj: dict[str, Any]) -> None:
        # Stored objects are never changed in place (every write stores a new dict), so the
        # history can share them.
        self.history.append((self.rv, plural, type_, obj))
        if len(self.history) > self.max_history:
            drop = len(self.history) // 2
            self.compacted_rv = self.history[drop][0]
            del self.history[:drop]
        self.changed[plural].notify_all()
        self.lock.notify_all()

    def _stamp(self, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)

    def _find(self, res: Resource, ns: str | None, name: str) -> dict[str, Any]:
        obj = self.store[res.key].get(self.key(ns, name))
        if obj is None:
            raise ApiFailure(404, "NotFound", f'{res.plural} "{name}" not found')
        return obj

    def _create(self, res: Resource, ns: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        if not name:
            raise ApiFailure(422, "Invalid", "metadata.name: Required value")
        key = self.key(ns, name)
        if key in self.store[res.key]:
            raise ApiFailure(409, "AlreadyExists", f'{res.plural} "{name}" already exists')
        if ns:
            meta["namespace"] = ns
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        obj["kind"] = res.kind
        obj["apiVersion"] = res.api_version
        if res.plural == "pods":
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        if res.plural == "nodes":
            # kube-apiserver's TaintNodesByCondition admission: no pod lands on a new node
            # until its kubelet has said it is Ready.
            spec = obj.setdefault("spec", {})
            spec["taints"] = [t for t in spec.get("taints") or [] if t.get("key") != NOT_READY]
            spec["taints"].append({"key": NOT_READY, "effect": "NoSchedule"})
        self._stamp(obj)
        self.store[res.key][key] = obj
        self._record(res.key, "ADDED", obj)
        if res.plural == "nodes" and self.kubelet:
            return self._node_ready(key)
        return obj

    def _review(self, res: Resource, body: dict[str, Any]) -> dict[str, Any]:
        """A TokenReview or SubjectAccessReview answered as the real API server would for
        the tokens and grants the test set."""
        self.reviews.append(copy.deepcopy(body))
        spec = body.get("spec") or {}
        status: dict[str, Any]
        if res.plural == "tokenreviews":
            user = self.tokens.get(str(spec.get("token", "")))
            status = {"authenticated": False, "error": "invalid bearer token"}
            if user is not None:
                status = {"authenticated": True, "user": copy.deepcopy(user)}
        else:
            # Non-resource grants name a path ("/metrics", "/metric*"); resource grants
            # "RESOURCE:NAMESPACE", "RESOURCE:*" for every namespace (a ClusterRoleBinding).
            attributes = spec.get("nonResourceAttributes")
            wanted = str((attributes or {}).get("path", ""))
            if attributes is None:
                attributes = spec.get("resourceAttributes")
                if attributes is None:
                    raise ApiFailure(422, "Invalid", "no resourceAttributes")
                wanted = f"{attributes.get('resource')}:{attributes.get('namespace') or '*'}"
            subjects = {spec.get("user", "")} | {f"group:{g}" for g in spec.get("groups") or []}
            status = {"allowed": f"group:{MASTERS}" in subjects}
            for subject, path, verb in self.grants:
                matches = path == wanted or (path.endswith("*") and wanted.startswith(path[:-1]))
                if subject in subjects and verb in (attributes.get("verb"), "*") and matches:
                    status = {"allowed": True}
        return {"apiVersion": res.api_version, "kind": res.kind, "spec": spec, "status": status}

    def _node_ready(self, key: str) -> dict[str, Any]:
        """What a node's kubelet and the node lifecycle controller do once it is up."""
        node = copy.deepcopy(self.store["nodes"][key])
        status = node.setdefault("status", {})
        others = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
        status["conditions"] = [*others, {"type": "Ready", "status": "True", "reason": "Ready"}]
        taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != NOT_READY]
        node["spec"]["taints"] = taints
        if not taints:
            del node["spec"]["taints"]
        return self._commit(RESOURCES["nodes"], None, key, node)

    def _check_version(self, current: dict[str, Any], given: dict[str, Any], name: str) -> None:
        wanted = (given.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ApiFailure(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )

    def _replace(
        self, res: Resource, ns: str | None, name: str, obj: dict[str, Any]
    ) -> dict[str, Any]:
        current = self._find(res, ns, name)
        self._check_version(current, obj, name)
        meta = obj.setdefault("metadata", {})
        for kept in ("uid", "creationTimestamp", "namespace", "name"):
            if kept in current["metadata"]:
                meta[kept] = current["metadata"][kept]
        obj["kind"] = res.kind
        obj["apiVersion"] = res.api_version
        return self._commit(res, ns, name, obj)

    def _commit(
        self, res: Resource, ns: str | None, name: str, obj: dict[str, Any]
    ) -> dict[str, Any]:
        self._stamp(obj)
        self.store[res.key][self.key(ns, name)] = obj
        self._record(res.key, "MODIFIED", obj)
        return obj

    def _patch(
        self,
        res: Resource,
        ns: str | None,
        name: str,
        sub: str | None,
        patch: Any,
        content_type: str,
    ) -> dict[str, Any]:
        if content_type not in (
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ):
            raise ApiFailure(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
        if not isinstance(patch, dict):
            raise ApiFailure(400, "BadRequest", "patch must be a JSON object")
        current = self._find(res, ns, name)
        self._check_version(current, patch, name)
        strategic = content_type == "application/strategic-merge-patch+json"
        merged = merge_patch(current, patch, strategic)
        # A status subresource write changes only status; a main write never changes status.
        if sub == "status":
            result = copy.deepcopy(current)
            result["status"] = merged.get("status", {})
        else:
            result = merged
            result["status"] = copy.deepcopy(current.get("status", {}))
        result["metadata"]["uid"] = current["metadata"]["uid"]
        return self._commit(res, ns, name, result)

    def _bind(self, ns: str | None, name: str, binding: Any) -> dict[str, Any]:
        res = RESOURCES["pods"]
        pod = self._find(res, ns, name)
        node = (binding.get("target") or {}).get("name") if isinstance(binding, dict) else None
        if not node:
            raise ApiFailure(422, "Invalid", "target.name: Required value")
        uid = (binding.get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            raise ApiFailure(409, "Conflict", f'pods "{name}": precondition failed: UID {uid}')
        if pod.get("spec", {}).get("nodeName"):
            raise ApiFailure(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                f'already assigned to node "{pod["spec"]["nodeName"]}"',
            )
        pod = copy.deepcopy(pod)
        pod["spec"]["nodeName"] = node
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()})
        status["conditions"] = conditions
        self._commit(res, ns, name, pod)
        self.bindings += 1
        self.last_binding = time.time()
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def _delete(self, res: Resource, ns: str | None, name: str, options: Any) -> dict[str, Any]:
        current = self._find(res, ns, name)
        pre = (options or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise ApiFailure(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {pre['uid']}, "
                f"UID in object meta: {current['metadata']['uid']}",
            )
        if (
            pre.get("resourceVersion")
            and pre["resourceVersion"] != (current["metadata"]["resourceVersion"])
        ):
            raise ApiFailure(409, "Conflict", "Precondition failed: resourceVersion")
        del self.store[res.key][self.key(ns, name)]
        gone = copy.deepcopy(current)
        self._stamp(gone)
        self._record(res.key, "DELETED", gone)
        return gone

    def _list(
        self, res: Resource, ns: str | None, limit: int = 0, token: str = ""
    ) -> dict[str, Any]:
        if token:
            if token not in self.continuations:
                raise ApiFailure(400, "BadRequest", "invalid continue token")
            rv, items = self.continuations.pop(token)
            if rv < self.compacted_rv:
                raise ApiFailure(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                )
        else:
            rv = self.rv
            # Sorted by key, as etcd returns them.
            items = [
                o
                for _, o in sorted(self.store[res.key].items())
                if ns is None or o["metadata"].get("namespace") == ns
            ]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if 0 < limit < len(items):
            items, rest = items[:limit], items[limit:]
            meta["continue"] = next_token = uuid.uuid4().hex
            self.continuations[next_token] = (rv, rest)
            meta["remainingItemCount"] = len(rest)
        return {
            "kind": f"{res.kind}List",
            "apiVersion": res.api_version,
            "metadata": meta,
            "items": items,
        }

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.method not in (None, method):
                continue
            if fault.path is not None and fault.path not in path:
                continue
            fault.remaining -= 1
            if fault.remaining <= 0:
                self.faults.remove(fault)
            return fault
        return None

    def watch_events(
        self, res: Resource, ns: str | None, since: int, bookmarks: bool, timeout: float
    ) -> Iterator[dict[str, Any]]:
        """Events after resourceVersion `since`, until timeout, a drop or shutdown."""
        deadline = time.monotonic() + timeout
        with self.lock:
            generation = self.watch_generation
            compacted = self.compacted_rv
            if since >= compacted:
                self.open_watches += 1
        if since < compacted:
            yield _expired(f"too old resource version: {since} ({compacted})")
            return
        try:
            last = since
            next_bookmark = time.monotonic() + self.bookmark_interval
            while True:
                batch: list[dict[str, Any]] = []
                expired = False
                with self.lock:
                    while True:
                        # A resource no longer served (its CRD removed) ends its watches, as
                        # the real API server does, also one opened just before the removal.
                        gone = res.key in self.missing
                        if self.stopped or self.watch_generation != generation or gone:
                            return
                        if last < self.compacted_rv:
                            # History moved past this watch while it waited: like etcd
                            # compaction, the client must re-list.
                            expired = True
                            break
                        start = bisect.bisect_right(self.history, last, key=lambda e: e[0])
                        if start < len(self.history):
                            for rv, plural, type_, obj in self.history[start:]:
                                last = rv
                                if plural != res.key:
                                    continue
                                if ns is not None and obj["metadata"].get("namespace") != ns:
                                    continue
                                batch.append({"type": type_, "object": obj})
                            if batch:
                                break
                        now = time.monotonic()
                        if now >= deadline:
                            return
                        if bookmarks and now >= next_bookmark:
                            next_bookmark = now + self.bookmark_interval
                            last = max(last, self.rv)
                            batch.append(
                                {
                                    "type": "BOOKMARK",
                                    "object": {
                                        "kind": res.kind,
                                        "apiVersion": res.api_version,
                                        "metadata": {"resourceVersion": str(last)},
                                    },
                                }
                            )
                            break
                        self.changed[res.key].wait(min(deadline, next_bookmark) - now)
                if expired:
                    yield _expired(f"too old resource version: {last}")
                    return
                yield from batch
        finally:
            with self.lock:
                self.open_watches -= 1
                self.lock.notify_all()


def _verb(method: str, name: str | None, watch: bool) -> str:
    if method == "GET":
        return "watch" if watch else ("get" if name else "list")
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]


def parse_path(path: str) -> dict[str, str | None] | None:
    """group, version, ns, plural, name, sub of an API path (None if it is not one)."""
    match = _PATH.match(path)
    if match is None:
        return None
    parts = match.groupdict()
    parts["group"] = parts["group"] or ""
    parts["version"] = parts.pop("core") or parts["version"]
    return parts


def _expired(message: str) -> dict[str, Any]:
    return {"type": "ERROR", "object": ApiFailure(410, "Expired", message).status()}


def _handler_for(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: with Nagle's algorithm on, the client's
        # delayed ACK would hold every response back ~40 ms.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: tests read assertions, not access logs

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = orjson.dumps(body)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not raw:
                return {}
            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise ApiFailure(400, "BadRequest", "body is not JSON") from None

        def _serve(self, method: str) -> None:
            if server.down:
                self.close_connection = True  # the client sees the connection drop
                return
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                body = self._body() if method != "GET" else {}
                with server.lock:
                    server.requests.append((method, url.path))
                    server.credentials.add(self.headers.get("Authorization", ""))
                    fault = server._take_fault(method, url.path)
                if fault is not None:
                    headers = {}
                    if fault.retry_after is not None:
                        headers["Retry-After"] = str(fault.retry_after)
                    reason = "TooManyRequests" if fault.code == 429 else "InternalError"
                    failure = ApiFailure(fault.code, reason, "injected failure")
                    self._send(fault.code, failure.status(), headers)
                    return
                discovery = _DISCOVERY.match(url.path)
                if discovery is not None and method == "GET":
                    self._send(200, server.discover(discovery["group"], discovery["version"]))
                    return
                match = _PATH.match(url.path)
                if match is None:
                    raise ApiFailure(404, "NotFound", f"no route for {url.path}")
                group = match["group"] or ""
                version = match["core"] or match["version"]
                res = _BY_ROUTE.get((group, version, match["plural"]))
                if res is None or res.key in server.missing:
                    raise ApiFailure(404, "NotFound", f"the server could not find {url.path}")
                ns = match["ns"]
                if res.namespaced and ns is None and method != "GET":
                    raise ApiFailure(404, "NotFound", "namespace required")
                name, sub = match["name"], match["sub"]
                watch = method == "GET" and name is None and query.get("watch") in ("true", "1")
                with server.lock:
                    server.verbs.append((_verb(method, name, watch), url.path))
                if watch:
                    self._watch(res, ns, query)
                    return
                code, result = self._dispatch(method, res, ns, name, sub, body, query)
                self._send(code, result)
            except ApiFailure as failure:
                self._send(failure.code, failure.status())
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _dispatch(
            self,
            method: str,
            res: Resource,
            ns: str | None,
            name: str | None,
            sub: str | None,
            body: Any,
            query: dict[str, str],
        ) -> tuple[int, Any]:
            with server.lock:
                if name is None:
                    if method == "GET":
                        limit = int(query.get("limit") or 0)
                        if query.get("resourceVersion") == "0":
                            limit = 0  # served from the watch cache: whole, whatever the limit
                        return 200, server._list(res, ns, limit, query.get("continue", ""))
                    if method == "POST" and res.plural in REVIEWS:
                        return 201, server._review(res, body)
                    if method == "POST":
                        return 201, server._create(res, ns, body)
                    raise ApiFailure(405, "MethodNotAllowed", f"{method} on a collection")
                if sub not in (None, "status", "binding"):
                    raise ApiFailure(404, "NotFound", f"no subresource {sub}")
                if sub == "binding":
                    if res.plural != "pods" or method != "POST":
                        raise ApiFailure(405, "MethodNotAllowed", "binding is POST on pods")
                    return 201, server._bind(ns, name, body)
                if method == "GET":
                    return 200, server._find(res, ns, name)
                if method == "PUT":
                    return 200, server._replace(res, ns, name, body)
                if method == "PATCH":
                    ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
                    return 200, server._patch(res, ns, name, sub, body, ctype)
                if method == "DELETE":
                    return 200, server._delete(res, ns, name, body)
                raise ApiFailure(405, "MethodNotAllowed", method)

        def _watch(self, res: Resource, ns: str | None, query: dict[str, str]) -> None:
            raw_rv = query.get("resourceVersion", "")
            timeout = float(query.get("timeoutSeconds") or 300)
            bookmarks = query.get("allowWatchBookmarks") == "true"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if raw_rv in ("", "0"):
                with server.lock:
                    since = server.rv
                    initial = [
                        {"type": "ADDED", "object": copy.deepcopy(o)}
                        for o in server._list(res, ns)["items"]
                    ]
            else:
                since, initial = int(raw_rv), []
            for event in initial:
                self._chunk(orjson.dumps(event) + b"\n")
            for event in server.watch_events(res, ns, since, bookmarks, timeout):
                self._chunk(orjson.dumps(event) + b"\n")
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    return Handler
