"""A small JSON client for the Kubernetes API.

Credentials come from live/credentials.py (kubectl's rules); requests go through keep-alive
connections (live/http.py) with their TLS and auth settings, and bodies are decoded with
orjson into plain dicts (the official client's models are far too slow for a 5000-pod list).
Every request waits for the client-side token bucket, and failures that are worth retrying
(429, 5xx, a dropped connection) are retried with backoff.
"""

from __future__ import annotations

import logging
import random
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson

from batchsched.live.credentials import ConnectError, Credentials, load_credentials
from batchsched.live.http import TRANSPORT_ERRORS, Connections, Stream
from batchsched.live.ratelimit import TokenBucket
from batchsched.live.tls import load_chain_data

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"

ErrorHook = Callable[[str, int], None]
PAGE_SIZE = 500  # objects per list page, as client-go's pager


class ApiError(Exception):
    """The API server answered with an error status (or could not be reached: status 0)."""

    def __init__(self, status: int, reason: str, message: str, retry_after: float | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.status in (0, 429) or self.status >= 500


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list; `restarted`: the list started over, the pages before are void."""

    items: list[dict[str, Any]]
    version: str  # the list's resourceVersion
    restarted: bool = False


class GuardRefused(Exception):
    """The request's guard said no just before sending (e.g. this replica no longer leads)."""


def _error_from(status: int, body: bytes, retry_header: str | None) -> ApiError:
    reason, message = "", body[:200].decode(errors="replace")
    try:
        parsed = orjson.loads(body)
        if isinstance(parsed, dict):
            reason = str(parsed.get("reason", ""))
            message = str(parsed.get("message", message))
    except orjson.JSONDecodeError:
        pass
    retry_after: float | None = None
    if retry_header is not None and retry_header.isdigit():
        retry_after = float(retry_header)
    return ApiError(status, reason, message, retry_after)


class WatchStream:
    """The lines of one watch response; `close()` from another thread ends the iteration."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        buffer = b""
        try:
            for chunk in self._stream.chunks():
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line, buffer = buffer[:end], buffer[end + 1 :]
                    if line.strip():
                        yield line
        except (*TRANSPORT_ERRORS, ValueError) as err:  # ValueError: closed under the read
            raise ApiError(0, "StreamBroken", str(err)) from None

    def close(self) -> None:
        self._stream.close()


class KubeClient:
    def __init__(
        self,
        credentials: Credentials,
        limiter: TokenBucket | None = None,
        retries: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        pool_size: int = 32,
    ) -> None:
        self.credentials = credentials
        self.host = credentials.host.rstrip("/")
        self.limiter = limiter or TokenBucket.unlimited()
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.error_hook: ErrorHook | None = None
        context = _tls_context(credentials) if self.host.startswith("https") else None
        self._connections = Connections(
            self.host, context, credentials.tls_server_name, credentials.proxy, keep=pool_size
        )

    def with_limiter(self, limiter: TokenBucket) -> KubeClient:
        """A client sharing these credentials with its own rate limit (e.g. for Events)."""
        other = KubeClient(self.credentials, limiter, self.retries, self.backoff, self.max_backoff)
        other.error_hook = self.error_hook
        return other

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": "batchsched"}
        if content_type:
            headers["Content-Type"] = content_type
        # Asked per request: rotated tokens and refreshed exec credentials stay current.
        headers.update(self.credentials.auth_headers())
        return headers

    @staticmethod
    def _target(path: str, query: Mapping[str, str] | None = None) -> str:
        return f"{path}?{urlencode(query)}" if query else path

    def _once(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        body: Any,
        content_type: str | None,
        timeout: float,
        guard: Callable[[], bool] | None,
    ) -> bytes:
        self.limiter.acquire()
        # Checked after the rate limiter's wait, which can be long, right before sending.
        if guard is not None and not guard():
            raise GuardRefused(f"{method} {path}")
        data = orjson.dumps(body) if body is not None else None
        try:
            answer = self._connections.request(
                method,
                self._target(path, query),
                data,
                self._headers(content_type if data is not None else None),
                timeout,
            )
        except TRANSPORT_ERRORS as err:
            raise ApiError(0, "Unreachable", f"{method} {path}: {err!r}") from None
        if answer.status >= 400:
            raise _error_from(answer.status, answer.body, answer.retry_after)
        return answer.body

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float = 30.0,
        guard: Callable[[], bool] | None = None,
    ) -> bytes:
        """The raw response body; retries 429, 5xx and connection failures with backoff.

        `guard` is asked before every attempt is sent; if it says no, GuardRefused is raised
        and nothing is sent (a write that waited for the rate limit or a retry must not land
        after this replica lost its lease).
        """
        attempt = 0
        while True:
            try:
                return self._once(method, path, query, body, content_type, timeout, guard)
            except ApiError as err:
                if self.error_hook is not None:
                    self.error_hook(method, err.status)
                if not err.retryable or attempt >= self.retries:
                    raise
                delay = min(self.backoff * 2**attempt, self.max_backoff)
                delay = err.retry_after if err.retry_after is not None else delay
                # Jitter spreads the retries of many concurrent writers.
                time.sleep(delay * (0.5 + random.random() / 2))
                attempt += 1
                log.debug("retrying %s %s after %s", method, path, err)

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return orjson.loads(self.request(method, path, **kwargs))

    def list(self, path: str, page_size: int = PAGE_SIZE) -> tuple[list[dict[str, Any]], str]:
        """All items of a collection and the list's resourceVersion, a page at a time."""
        items: list[dict[str, Any]] = []
        version = ""
        for page in self.pages(path, page_size):
            if page.restarted:
                items.clear()
            items.extend(page.items)
            version = page.version
        return items, version

    def pages(
        self, path: str, page_size: int = PAGE_SIZE, any_version: bool = False
    ) -> Iterator[Page]:
        """A collection's pages, each as soon as it is decoded, while the next is fetched: the
        caller reads one page while the API server prepares the next.

        The list is consistent (the latest version) unless `any_version`: then it is
        `resourceVersion=0`, whatever the API server has at hand, which kube-apiserver serves
        from its watch cache in one response whatever the limit (as client-go's reflector
        lists at start: no read from etcd, a third less of the server's CPU). The pages share
        the first page's snapshot; if its continue token expires (410) before the last page,
        the list starts over in one unpaginated request, as client-go's pager, and that page
        comes `restarted` (the pages before it are void).
        """
        fetcher = ThreadPoolExecutor(1, thread_name_prefix="list-page")
        try:
            query = {"limit": str(page_size)}
            first = {**query, "resourceVersion": "0"} if any_version else query
            pending = fetcher.submit(self.json, "GET", path, query=first)
            while True:
                restarted = False
                try:
                    body = pending.result()
                except ApiError as err:
                    if err.status != 410 or "continue" not in query:
                        raise
                    log.info("%s: list continuation expired, listing again in one page", path)
                    body, restarted = self.json("GET", path), True
                token = "" if restarted else (body.get("metadata") or {}).get("continue")
                if token:
                    query = {"limit": str(page_size), "continue": str(token)}
                    pending = fetcher.submit(self.json, "GET", path, query=query)
                yield Page(body.get("items") or [], _list_version(body), restarted)
                if not token:
                    return
        finally:
            fetcher.shutdown(wait=False, cancel_futures=True)

    def watch(self, path: str, query: Mapping[str, str], read_timeout: float) -> WatchStream:
        self.limiter.acquire()
        target = self._target(path, {**query, "watch": "true"})
        try:
            stream = self._connections.stream(target, self._headers(None), 10.0, read_timeout)
            if stream.status >= 400:
                raise _error_from(stream.status, stream.read_all(), None)
        except TRANSPORT_ERRORS as err:
            raise ApiError(0, "Unreachable", f"watch {path}: {err!r}") from None
        return WatchStream(stream)


def _tls_context(credentials: Credentials) -> ssl.SSLContext:
    """One TLS context for all of a client's connections, its certificates loaded once (tens
    of milliseconds of CPU apiece). The server's name is checked against its certificate
    unless verification is off."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not credentials.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        if credentials.ca_data:
            context.load_verify_locations(cadata=credentials.ca_data)
        elif credentials.ca_file:
            context.load_verify_locations(cafile=credentials.ca_file)
        elif credentials.verify:
            context.load_default_certs()
        if credentials.cert_data is not None and credentials.key_data is not None:
            load_chain_data(context, credentials.cert_data, credentials.key_data)
        elif credentials.cert_file:
            context.load_cert_chain(credentials.cert_file, credentials.key_file)
    except (OSError, ssl.SSLError) as err:
        raise ConnectError(f"{credentials.host}: cannot load the TLS certificates: {err}") from None
    return context


def _list_version(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion", ""))


def connect(
    kubeconfig: Path | None,
    limiter: TokenBucket | None = None,
    retries: int = 5,
    context: str | None = None,
) -> KubeClient:
    return KubeClient(load_credentials(kubeconfig, context), limiter, retries=retries)
