"""The HTTP endpoints of a running scheduler: /healthz, /livez, /readyz, /metrics and the web
UI's pages.

Served over HTTPS (`certificate`: the serving certificate) with /metrics behind delegated
authentication and authorization (`auth`), or over plain HTTP for `--listen`
(docs/live.md, Endpoints). The probes are readable by anyone, as kube-scheduler's are; the
pages check their readers themselves (docs/ui.md). Nothing here changes anything: methods
other than GET are refused.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST

from batchsched.live.delegated_auth import DelegatedAuth
from batchsched.live.tls import ServingCertificate
from batchsched.objects.errors import InputError

if TYPE_CHECKING:
    from batchsched.ui.site import Site

log = logging.getLogger(__name__)

Route = Callable[[], tuple[int, str, bytes]]
_HANDSHAKE_TIMEOUT = 10.0  # a client that connects and says nothing holds one thread this long
_REQUEST_TIMEOUT = 30.0  # a request that never ends holds one thread this long


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    certificate: ServingCertificate | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        """The TLS handshake happens here, in the connection's own thread: a slow or silent
        client never holds up the others."""
        if self.certificate is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(_HANDSHAKE_TIMEOUT)
        try:
            tls = self.certificate.context(time.monotonic()).wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as err:
            log.debug("TLS handshake with %s failed: %s", client_address, err)
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()


class _Server6(_Server):
    address_family = socket.AF_INET6


class HealthServer:
    def __init__(
        self,
        address: str,
        metrics: Callable[[], bytes] | None,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        *,
        certificate: ServingCertificate | None = None,
        auth: DelegatedAuth | None = None,
        flag: str = "--listen",
        pages: Site | None = None,
    ) -> None:
        """`flag` names the option `address` came from in errors; `metrics` None: no
        /metrics; `pages`: the web UI, on every other path."""
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise InputError(f"{flag}: {address!r} must be HOST:PORT (e.g. 0.0.0.0:10259)")
        public: dict[str, Route] = {
            "/healthz": lambda: _probe(healthy()),
            "/livez": lambda: _probe(healthy()),
            "/readyz": lambda: _probe(ready()),
        }
        guarded: dict[str, Route] = {}
        if metrics is not None:
            guarded["/metrics"] = lambda: (200, CONTENT_TYPE_LATEST, metrics())

        class Handler(BaseHTTPRequestHandler):
            timeout = _REQUEST_TIMEOUT

            def log_message(self, format: str, *args: Any) -> None:
                pass  # probes every few seconds would drown the scheduler's own log

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                route = public.get(path) or guarded.get(path)
                refusal = None
                if path in guarded and auth is not None:
                    refusal = auth.check(self.headers.get("Authorization"), path)
                headers: tuple[tuple[str, str], ...] = ()
                if refusal is not None:
                    answer = (refusal.status, "text/plain", refusal.message.encode() + b"\n")
                elif route is not None:
                    answer = route()
                elif pages is not None:
                    page = pages.get(self.path, self.headers, str(self.client_address[0]))
                    answer = (page.status, page.content_type, page.body)
                    headers = page.headers
                else:
                    answer = (404, "text/plain", b"not found\n")
                self._answer(*answer, headers)

            def refuse_method(self) -> None:
                self._answer(
                    405, "text/plain", b"Method Not Allowed: read-only\n", (("Allow", "GET"),)
                )

            do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = refuse_method

            def _answer(
                self, code: int, ctype: str, body: bytes, headers: tuple[tuple[str, str], ...]
            ) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                if code != 304:
                    self.wfile.write(body)

        host = host.strip("[]")  # [::]:10259
        server = _Server6 if ":" in host else _Server
        try:
            self._http = server((host or "0.0.0.0", int(port)), Handler)
        except OSError as err:
            raise InputError(f"{flag}: cannot listen on {address}: {err.strerror}") from None
        self._http.certificate = certificate
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._lock = threading.Lock()
        self._serving = self._stopped = False

    def _serve(self) -> None:
        # Connections wait in the listen backlog while a self-signed certificate is made.
        if self._http.certificate is not None:
            try:
                self._http.certificate.prepare()
            except Exception:
                log.exception("cannot make the self-signed serving certificate")
        with self._lock:
            if self._stopped:
                return
            self._serving = True
        self._http.serve_forever()

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    def describe(self) -> str:
        host = str(self._http.server_address[0])
        scheme = "https" if self._http.certificate is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            serving = self._serving
        if serving:  # shutdown() waits for serve_forever, which may not have begun
            self._http.shutdown()
        self._http.server_close()


def _probe(ok: bool) -> tuple[int, str, bytes]:
    return (200, "text/plain", b"ok\n") if ok else (503, "text/plain", b"not ready\n")
