"""Keep-alive connections: a connection the server closed while idle is not reused, and a
server URL's path prefix is kept."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from batchsched.live.http import Connections
from tests.live.fake_apiserver import WAIT_SECONDS


class OneShotServer:
    """Answers each connection's first request and then closes it, as an API server does to
    a connection idle for too long; records the request lines."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = threading.Semaphore(0)  # released as each connection is closed
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.connections += 1
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                self.requests.append(data.split(b"\r\n", 1)[0])
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            self.closed.release()


@pytest.fixture
def server() -> Iterator[OneShotServer]:
    served = OneShotServer()
    yield served
    served.sock.close()


def test_a_connection_closed_while_idle_is_replaced_not_failed(server: OneShotServer) -> None:
    connections = Connections(f"http://127.0.0.1:{server.port}/prefix", None)
    first = connections.request("GET", "/api/v1/nodes?limit=1", None, {}, 5.0)
    assert (first.status, first.body) == (200, b"ok")
    # The server has closed that connection since; the next request must not use it.
    assert server.closed.acquire(timeout=WAIT_SECONDS)
    second = connections.request("POST", "/api/v1/pods", b"{}", {"X": "1"}, 5.0)
    assert (second.status, second.body) == (200, b"ok")
    assert server.requests == [
        b"GET /prefix/api/v1/nodes?limit=1 HTTP/1.1",
        b"POST /prefix/api/v1/pods HTTP/1.1",
    ]
    assert server.connections == 2
