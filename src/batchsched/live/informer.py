"""List-then-watch informers feeding the scheduling loop.

Each informer lists its resource (in pages), reports every object (and every object it knew that the
list no longer has: deleted while it was not watching), then watches from the list's
resourceVersion with bookmarks. A watch that ends is resumed from the last resourceVersion
seen; 410 Gone (history compacted) means a full re-list; errors back off exponentially. An
optional resource whose API is absent (the PodGroup CRD, upstream's PodGroups) counts as empty
and is re-checked; upstream's PodGroups are read at whichever version discovery finds served.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
from typing import Any

import orjson

from batchsched.live.client import PAGE_SIZE, ApiError, KubeClient, WatchStream
from batchsched.live.facts import Fact, Remove, Upsert, Wakeup
from batchsched.live.kinds import Kind
from batchsched.live.malformed import malformed
from batchsched.objects.errors import ManifestError

log = logging.getLogger(__name__)


class Expired(Exception):
    """The watch's resourceVersion is older than the server's history: re-list."""


class Informer:
    def __init__(
        self,
        client: KubeClient,
        kind: Kind,
        sink: queue.Queue[Fact],
        watch_timeout: float = 300.0,
        initial_backoff: float = 0.8,
        max_backoff: float = 30.0,
        absent_recheck: float = 60.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.client = client
        self.kind = kind
        self.sink = sink
        self.watch_timeout = watch_timeout
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.absent_recheck = absent_recheck
        self.page_size = page_size
        self.synced = threading.Event()
        self.resource_version = ""
        self.served = kind  # the kind at the version the server serves, found at each list
        self.lists = 0  # full lists done (the first one and every re-list)
        self._known: dict[str, str] = {}  # key -> resourceVersion last reported
        self._malformed: dict[str, str] = {}  # key -> resourceVersion reported as malformed
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # ---- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        listed = False
        while not self._stop.is_set():
            try:
                if not listed:
                    self._list()
                    listed = True
                self._watch()
                failures = 0
            except Expired:
                log.info("%s: watch history expired, re-listing", self.kind.name)
                listed = False
            except Exception as err:
                if self._stop.is_set():
                    break
                absent = isinstance(err, ApiError) and err.status == 404
                if absent and self.kind.optional:
                    if listed:
                        listed = False  # the CRD went away while watching: look again
                    else:
                        self._absent()
                    continue
                if not isinstance(err, ApiError):
                    log.exception("%s: unexpected error in informer", self.kind.name)
                failures += 1
                delay = min(self.initial_backoff * 2 ** (failures - 1), self.max_backoff)
                log.warning("%s: %s; retrying in %.1fs", self.kind.name, err, delay)
                self._stop.wait(delay * (0.5 + random.random() / 2))

    def _absent(self) -> None:
        """The resource is not served (CRD not installed, API not enabled): report nothing,
        look again later."""
        if not self.synced.is_set():
            hint = "is its API enabled?" if self.kind.discover else "is the CRD installed?"
            log.warning(
                "%s: the API server does not serve %s (%s); treating it as empty",
                self.kind.name,
                self.served.path,
                hint,
            )
        for key in list(self._known):
            self._emit_remove(key)
        self.synced.set()
        self._stop.wait(self.absent_recheck)

    def _list(self) -> None:
        self.served = self.kind.served(self.client)
        seen: set[str] = set()
        version = ""
        # The first list takes what the API server has at hand (its watch cache, as
        # client-go's reflector does: the cheapest list there is); later ones, after a watch
        # fell behind, the latest version. Each page is read while the next is fetched.
        first = self.lists == 0
        for page in self.client.pages(self.served.path, self.page_size, any_version=first):
            if page.restarted:
                seen.clear()
            version = page.version
            for obj in page.items:
                key = self.kind.key_of(obj)
                seen.add(key)
                rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                if self._known.get(key) != rv or not rv:
                    self._emit(key, rv, obj)
        for key in list(self._known):
            if key not in seen:
                self._emit_remove(key)
        for key in list(self._malformed):
            if key not in seen:
                self._emit_remove(key)  # deleted while malformed: what was told of it goes
        self.resource_version = version
        self.lists += 1
        first = not self.synced.is_set()
        self.synced.set()
        if first:
            # The loop waits on the queue for the last list: it starts the moment it lands.
            self.sink.put(Wakeup())

    def _watch(self) -> None:
        query = {
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            # Spread reconnects of many watchers, as client-go does.
            "timeoutSeconds": str(int(self.watch_timeout * (1 + random.random()))),
        }
        stream = self.client.watch(
            self.served.path, query, read_timeout=self.watch_timeout * 2 + 30
        )
        self._stream = stream
        try:
            if self._stop.is_set():
                return
            for line in stream:
                self._event(orjson.loads(line))
        finally:
            self._stream = None
            stream.close()

    def _event(self, event: dict[str, Any]) -> None:
        type_ = event.get("type")
        obj = event.get("object") or {}
        if type_ == "ERROR":
            if obj.get("code") == 410:
                raise Expired()
            raise ApiError(int(obj.get("code") or 0), str(obj.get("reason", "")), str(obj))
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        if type_ in ("ADDED", "MODIFIED"):
            self._emit(self.kind.key_of(obj), rv, obj)
        elif type_ == "DELETED":
            self._emit_remove(self.kind.key_of(obj))
        if rv:
            self.resource_version = rv

    def _emit(self, key: str, rv: str, obj: dict[str, Any]) -> None:
        try:
            record = self.served.read_object(obj)
        except ManifestError as err:
            # One bad object must not stop the scheduler: report it (once per version, not on
            # every re-list) and treat it as absent.
            if key in self._known:
                self._emit_remove(key)
            if self._malformed.get(key) != rv or not rv:
                log.warning(
                    "ignoring %s", err.located(f"{self.served.path} (resourceVersion {rv})")
                )
                self._malformed[key] = rv
                self.sink.put(malformed(self.served, key, obj, err))
            return
        self._malformed.pop(key, None)
        self._known[key] = rv
        self.sink.put(Upsert(self.kind, record))

    def _emit_remove(self, key: str) -> None:
        self._known.pop(key, None)
        self._malformed.pop(key, None)
        self.sink.put(Remove(self.kind, key))
