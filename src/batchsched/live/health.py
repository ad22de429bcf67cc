"""The HTTP endpoints of a running scheduler: /metrics, /healthz, /readyz."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from batchsched.objects.errors import InputError


class HealthServer:
    def __init__(
        self,
        address: str,
        metrics: Callable[[], bytes],
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
    ) -> None:
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            raise InputError(f"--listen: {address!r} must be HOST:PORT (e.g. 0.0.0.0:10251)")
        routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, metrics()),
            "/healthz": lambda: _probe(healthy()),
            "/readyz": lambda: _probe(ready()),
        }

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # probes every few seconds would drown the scheduler's own log

            def do_GET(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
                code, ctype, body = route() if route else (404, "text/plain", b"not found\n")
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        try:
            self._http = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
        except OSError as err:
            raise InputError(f"--listen: cannot listen on {address}: {err.strerror}") from None
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()


def _probe(ok: bool) -> tuple[int, str, bytes]:
    return (200, "text/plain", b"ok\n") if ok else (503, "text/plain", b"not ready\n")
