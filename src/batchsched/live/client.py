"""A small JSON client for the Kubernetes API.

The `kubernetes` package is used only to read kubeconfig / in-cluster credentials into its
Configuration; requests go through urllib3 with those TLS and auth settings, and bodies are
decoded with orjson into plain dicts (the official client's models are far too slow for a
5000-pod list). Every request waits for the client-side token bucket, and failures that are
worth retrying (429, 5xx, a dropped connection) are retried with backoff.

Credentials are found as kubectl finds them: `--kubeconfig`, else the `KUBECONFIG` list of
files (merged, first one wins), else `~/.kube/config`, else the pod's service account.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlencode

import orjson
import urllib3
import yaml
from kubernetes import config as kube_config
from kubernetes.client import Configuration
from urllib3.util.ssl_ import create_urllib3_context

from batchsched.live.ratelimit import TokenBucket
from batchsched.objects.errors import InputError

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


class ConnectError(InputError):
    """No usable cluster credentials (kubeconfig or in-cluster)."""


def _error_from(status: int, body: bytes, headers: Mapping[str, str]) -> ApiError:
    reason, message = "", body[:200].decode(errors="replace")
    try:
        parsed = orjson.loads(body)
        if isinstance(parsed, dict):
            reason = str(parsed.get("reason", ""))
            message = str(parsed.get("message", message))
    except orjson.JSONDecodeError:
        pass
    retry_after: float | None = None
    raw = headers.get("Retry-After")
    if raw is not None and raw.isdigit():
        retry_after = float(raw)
    return ApiError(status, reason, message, retry_after)


class WatchStream:
    """The lines of one watch response; `close()` from another thread ends the iteration."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        buffer = b""
        try:
            for chunk in self._response.stream(65536):
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line, buffer = buffer[:end], buffer[end + 1 :]
                    if line.strip():
                        yield line
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            raise ApiError(0, "StreamBroken", str(err)) from None
        finally:
            # A watch left early has unread data: its connection cannot be reused.
            self._response.close()
            self._response.release_conn()

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # already closed
            self._response.shutdown()


class KubeClient:
    def __init__(
        self,
        configuration: Configuration,
        limiter: TokenBucket | None = None,
        retries: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        pool_size: int = 32,
    ) -> None:
        self.configuration = configuration
        self.host = configuration.host.rstrip("/")
        self.limiter = limiter or TokenBucket.unlimited()
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.error_hook: ErrorHook | None = None
        tls: dict[str, Any] = {}
        if self.host.startswith("https"):
            if not configuration.verify_ssl:
                # Said once at start-up (load_configuration), not on every request.
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
            tls = {
                "cert_reqs": _cert_reqs(configuration),
                "ssl_context": _tls_context(configuration),
            }
            if configuration.tls_server_name:
                tls["server_hostname"] = configuration.tls_server_name
            if configuration.assert_hostname is not None:
                tls["assert_hostname"] = configuration.assert_hostname
        self._pool: urllib3.PoolManager
        if configuration.proxy:
            self._pool = urllib3.ProxyManager(
                configuration.proxy, maxsize=pool_size, retries=False, **tls
            )
        else:
            self._pool = urllib3.PoolManager(maxsize=pool_size, retries=False, **tls)

    def with_limiter(self, limiter: TokenBucket) -> KubeClient:
        """A client sharing these credentials with its own rate limit (e.g. for Events)."""
        other = KubeClient(
            self.configuration, limiter, self.retries, self.backoff, self.max_backoff
        )
        other.error_hook = self.error_hook
        return other

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": "batchsched"}
        if content_type:
            headers["Content-Type"] = content_type
        # The configuration's own auth settings (a bearer token, or basic auth as its header).
        # Reading them calls its refresh hook: rotated in-cluster tokens stay current.
        settings = cast(Mapping[str, Mapping[str, Any]], self.configuration.auth_settings())
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"]).title()] = str(setting["value"])
        return headers

    def url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        return f"{self.host}{path}?{urlencode(query)}" if query else f"{self.host}{path}"

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
            response = self._pool.request(
                method,
                self.url(path, query),
                body=data,
                headers=self._headers(content_type if data is not None else None),
                timeout=timeout,
                preload_content=True,
            )
        except urllib3.exceptions.HTTPError as err:
            raise ApiError(0, "Unreachable", str(err)) from None
        if response.status >= 400:
            raise _error_from(response.status, response.data, response.headers)
        return response.data

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

    def pages(self, path: str, page_size: int = PAGE_SIZE) -> Iterator[Page]:
        """A collection's pages, each as soon as it is decoded, while the next is fetched: the
        caller reads one page while the API server prepares the next.

        The pages share the first page's snapshot; if its continue token expires (410) before
        the last page, the list starts over in one unpaginated request, as client-go's pager,
        and that page comes `restarted` (the pages before it are void).
        """
        fetcher = ThreadPoolExecutor(1, thread_name_prefix="list-page")
        try:
            query = {"limit": str(page_size)}
            pending = fetcher.submit(self.json, "GET", path, query=query)
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
        try:
            response = self._pool.request(
                "GET",
                self.url(path, {**query, "watch": "true"}),
                headers=self._headers(None),
                timeout=urllib3.Timeout(connect=10.0, read=read_timeout),
                preload_content=False,
            )
        except urllib3.exceptions.HTTPError as err:
            raise ApiError(0, "Unreachable", str(err)) from None
        if response.status >= 400:
            error = _error_from(response.status, response.read(), response.headers)
            response.release_conn()
            raise error
        return WatchStream(response)


def _cert_reqs(configuration: Configuration) -> ssl.VerifyMode:
    return ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE


def _tls_context(configuration: Configuration) -> ssl.SSLContext:
    """One TLS context for all of a client's connections, its certificates loaded once:
    urllib3 would otherwise build a context per connection and load the CA bundle into each
    (tens of milliseconds of CPU apiece, a dozen times over at start-up)."""
    context = create_urllib3_context(cert_reqs=_cert_reqs(configuration))
    try:
        if configuration.ssl_ca_cert:
            context.load_verify_locations(cafile=configuration.ssl_ca_cert)
        elif configuration.verify_ssl:
            context.load_default_certs()
        if configuration.cert_file:
            context.load_cert_chain(configuration.cert_file, configuration.key_file)
    except (OSError, ssl.SSLError) as err:
        raise ConnectError(
            f"{configuration.host}: cannot load the TLS certificates: {err}"
        ) from None
    return context


def _list_version(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion", ""))


DEFAULT_KUBECONFIG = Path("~/.kube/config")


def kubeconfig_source(kubeconfig: Path | None) -> str | None:
    """The kubeconfig file list to read (kubectl's order), or None for in-cluster config."""
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise ConnectError(f"--kubeconfig {kubeconfig}: no such file")
        return str(kubeconfig)
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        paths = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
        if not any(p.is_file() for p in paths):
            raise ConnectError(f"KUBECONFIG={listed}: none of these files exists")
        return listed
    if DEFAULT_KUBECONFIG.expanduser().is_file():
        return str(DEFAULT_KUBECONFIG.expanduser())
    return None


def _current_context(source: str) -> str | None:
    """kubectl's rule for a list of files: the first file that sets current-context wins (the
    kubernetes package would take the last)."""
    for raw in source.split(os.pathsep):
        path = Path(raw).expanduser()
        if raw and path.is_file():
            try:
                current = (yaml.safe_load(path.read_text()) or {}).get("current-context")
            except yaml.YAMLError as err:
                raise ConnectError(f"{path}: not a kubeconfig: {err}") from None
            if current:
                return str(current)
    return None


def load_configuration(kubeconfig: Path | None, context: str | None = None) -> Configuration:
    """Credentials as kubectl finds them (see the module's docstring); `context` picks a
    kubeconfig context other than the current one."""
    configuration = Configuration()
    source = kubeconfig_source(kubeconfig)
    try:
        if source is not None:
            context = context or _current_context(source)
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=source,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        elif context is not None:
            raise ConnectError(
                f"--context {context}: no kubeconfig to find it in "
                "(pass --kubeconfig PATH or set KUBECONFIG)"
            )
        else:
            kube_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
    except kube_config.ConfigException as err:
        where = source if source is not None else "in-cluster config"
        hint = (
            ""
            if source is not None
            else " (outside a cluster, pass --kubeconfig PATH or set KUBECONFIG)"
        )
        raise ConnectError(f"{where}: {err}{hint}") from None
    except OSError as err:
        raise ConnectError(f"{source}: cannot read: {err.strerror}") from None
    if not configuration.verify_ssl and configuration.host.startswith("https"):
        log.warning(
            "%s: TLS certificate verification is off (insecure-skip-tls-verify): "
            "the API server's identity is not checked",
            configuration.host,
        )
    return configuration


def connect(
    kubeconfig: Path | None,
    limiter: TokenBucket | None = None,
    retries: int = 5,
    context: str | None = None,
) -> KubeClient:
    return KubeClient(load_configuration(kubeconfig, context), limiter, retries=retries)
