"""Keep-alive HTTP/1.1 connections to one API server, on the standard library's http.client.

urllib3's layers over http.client (a pool manager keyed by normalised URLs, URL parsing,
header dictionaries, response wrappers) cost about three times the CPU of the request itself:
some 400 µs per Binding or Event, which on a small machine is taken from the API server that
must answer them. What the client needs is narrow: one host, one TLS context, bodies read
whole (or streamed line by line for watches), an optional CONNECT proxy.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import select
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

# What a dropped connection, a refused one or a garbled answer raises.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    retry_after: str | None


class _TLSConnection(http.client.HTTPSConnection):
    """An HTTPS connection whose certificate is checked against `server_name` (kubeconfig
    tls-server-name) when one is given, rather than against the host dialled."""

    def __init__(
        self, host: str, port: int, context: ssl.SSLContext, server_name: str, timeout: float
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls_context = context
        self._server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # TCP, and the proxy's tunnel if any
        target = self._tunnel_host or self.host  # type: ignore[attr-defined]
        self.sock = self._tls_context.wrap_socket(
            self.sock, server_hostname=self._server_name or target
        )


class Connections:
    """Idle connections to `url`'s host, reused last in, first out (the warmest socket)."""

    def __init__(
        self,
        url: str,
        context: ssl.SSLContext | None,
        server_name: str = "",
        proxy: str = "",
        keep: int = 32,
    ) -> None:
        parts = urlsplit(url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")  # a server URL may carry a path prefix
        self.context = context
        self.server_name = server_name
        self.keep = keep
        self._proxy = urlsplit(proxy) if proxy else None
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        host, port = self.host, self.port
        if self._proxy is not None:
            host = self._proxy.hostname or ""
            port = self._proxy.port or 80
        conn: http.client.HTTPConnection
        if self.tls:
            assert self.context is not None
            conn = _TLSConnection(host, port, self.context, self.server_name, timeout)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        if self._proxy is not None:
            headers = {}
            if self._proxy.username is not None:
                user = f"{unquote(self._proxy.username)}:{unquote(self._proxy.password or '')}"
                headers["Proxy-Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
            conn.set_tunnel(self.host, self.port, headers)
        return conn

    def _take(self, timeout: float) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new(timeout)
            if not _dropped(conn):
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                return conn
            conn.close()

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(conn)
                return
        conn.close()

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: float,
    ) -> Answer:
        """One request, its answer read whole; TRANSPORT_ERRORS when there is none."""
        conn = self._take(timeout)
        try:
            conn.request(method, self.prefix + target, body=body, headers=dict(headers))
            response = conn.getresponse()
            answer = Answer(response.status, response.read(), response.getheader("Retry-After"))
        except BaseException:
            conn.close()
            raise
        self._give_back(conn)
        return answer

    def stream(
        self, target: str, headers: Mapping[str, str], connect_timeout: float, read_timeout: float
    ) -> Stream:
        """A long response read as it comes (a watch), on a connection of its own."""
        conn = self._new(connect_timeout)
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(read_timeout)
            conn.request("GET", self.prefix + target, headers=dict(headers))
            response = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        return Stream(conn, response)


class Stream:
    """A streamed response: its status, its body chunk by chunk, and a `close()` that another
    thread may call to end a read that is waiting."""

    def __init__(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse):
        self._conn = conn
        self._response = response
        self.status = response.status
        self._sock = conn.sock

    def read_all(self) -> bytes:
        try:
            return self._response.read()
        finally:
            self._conn.close()

    def chunks(self, size: int = 65536) -> Iterator[bytes]:
        try:
            while chunk := self._response.read1(size):
                yield chunk
        finally:
            self._conn.close()

    def close(self) -> None:
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """An idle connection the server closed (or wrote to, which it never should): readable."""
    sock = conn.sock
    if sock is None:
        return False  # closed by us after a `Connection: close`: it reconnects when used
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True
