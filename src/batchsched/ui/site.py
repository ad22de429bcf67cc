"""The web UI's routes: a GET in, an answer out, whatever serves it (docs/ui.md).

Read-only: GET only, nothing changes anything. Refused quickly: a target over
`MAX_TARGET` characters (414), a malformed query (400), an unknown path (404), a token the
API server does not know (401). Pages are rendered once per board, reader and path, and
answer 304 to a reader who has the current one (`If-None-Match`), so a browser polling every
few seconds costs little.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html import escape
from importlib import resources
from typing import Protocol
from urllib.parse import parse_qs, unquote

from batchsched.live.delegated_auth import Refusal
from batchsched.ui import pages
from batchsched.ui.access import Access, Viewer
from batchsched.ui.board import Board
from batchsched.ui.publisher import Publisher

MAX_TARGET = 2048
_RENDERED_KEPT = 256
_STATIC = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}
_SECURITY = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
)
_NAV = (("/", "Queues"), ("/nodes", "Nodes"), ("/preemptions", "Preemptions"))


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


def _text(status: int, message: str) -> Answer:
    return Answer(status, "text/plain; charset=utf-8", message.encode() + b"\n", _SECURITY)


Render = Callable[[Board, Viewer], pages.Page | None]


class Headers(Protocol):
    """A request's headers, looked up without regard to case (http.server's message)."""

    def get(self, name: str, /) -> str | None: ...


class Site:
    def __init__(
        self,
        publisher: Publisher,
        access: Access,
        poll_seconds: float = 2.0,
        first_board_wait: float = 5.0,
    ) -> None:
        """`first_board_wait`: how long a request waits for the first board before a 503."""
        self.publisher = publisher
        self.first_board_wait = first_board_wait
        self.access = access
        self.poll_seconds = poll_seconds
        folder = resources.files("batchsched.ui") / "static"
        self._static = {name: (folder / name).read_bytes() for name in _STATIC}
        self._lock = threading.Lock()
        self._rendered: OrderedDict[tuple[object, ...], bytes] = OrderedDict()

    def get(self, target: str, headers: Headers, client: str) -> Answer:
        """Answer a GET of `target` (path and query) from address `client`."""
        if len(target) > MAX_TARGET:
            return _text(414, f"URI Too Long: at most {MAX_TARGET} characters")
        path, _, query = target.partition("?")
        try:
            params = parse_qs(query, max_num_fields=8, strict_parsing=bool(query))
        except ValueError:
            return _text(400, "Bad Request: malformed query string")
        if path.startswith("/static/"):
            return self._static_file(path.removeprefix("/static/"))
        render = _route(path, params)
        if render is None:
            return _text(404, "Not Found")
        board = self.publisher.take()
        if board is None:
            board = self.publisher.wait_newer(0, self.first_board_wait)
        if board is None:
            answer = _text(503, "Service Unavailable: the first snapshot is not ready yet")
            return Answer(answer.status, answer.content_type, answer.body, (("Retry-After", "1"),))
        viewer = self.access.viewer(headers.get("Authorization"), client, board.namespaces())
        if isinstance(viewer, Refusal):
            return _text(viewer.status, viewer.message)
        part = params.get("part", [""])[0] == "main"
        tag = _etag(board, viewer)
        if headers.get("If-None-Match") == tag:
            return Answer(304, "text/html; charset=utf-8", b"", (("ETag", tag), *_SECURITY))
        key = (board.version, viewer, target)
        with self._lock:
            body = self._rendered.get(key)
            if body is not None:
                self._rendered.move_to_end(key)
        if body is None:
            page = render(board, viewer)
            if page is None:
                return _text(404, "Not Found: no such pending workload or queue you may see")
            body = self._document(path, page, tag, part).encode()
            with self._lock:
                self._rendered[key] = body
                while len(self._rendered) > _RENDERED_KEPT:
                    self._rendered.popitem(last=False)
        extra = (("ETag", tag), ("Cache-Control", "no-cache"), *_SECURITY)
        return Answer(200, "text/html; charset=utf-8", body, extra)

    def _static_file(self, name: str) -> Answer:
        body = self._static.get(name)
        if body is None:
            return _text(404, "Not Found")
        return Answer(200, _STATIC[name], body, (("Cache-Control", "max-age=300"), *_SECURITY))

    def _document(self, path: str, page: pages.Page, tag: str, part: bool) -> str:
        title, main = page
        if part:  # what ui.js swaps in: the body of <main>
            return main
        current = ' aria-current="page"'
        links = "".join(
            f'<a href="{href}"{current if _section(path) == href else ""}>{label}</a>'
            for href, label in _NAV
        )
        return (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)} · batchsched</title>"
            '<link rel="stylesheet" href="/static/ui.css">'
            '<script src="/static/ui.js" defer></script></head>'
            f'<body data-poll="{self.poll_seconds:g}">'
            '<a class="skip" href="#main">Skip to the content</a>'
            '<header><span class="brand">batchsched</span>'
            f'<nav aria-label="Sections">{links}</nav>'
            '<span id="live" class="live" aria-live="polite"></span></header>'
            f'<main id="main" data-etag="{escape(tag)}">{main}</main>'
            "</body></html>"
        )


def _section(path: str) -> str:
    if path.startswith("/nodes"):
        return "/nodes"
    if path.startswith("/preemptions"):
        return "/preemptions"
    return "/"


def _route(path: str, params: Mapping[str, list[str]]) -> Render | None:
    """The page a path names, or None (404)."""
    if path == "/":
        return pages.queues_page
    if path == "/nodes":
        by = params.get("by", [""])[0]
        return lambda board, viewer: pages.nodes_page(board, viewer, by)
    if path == "/preemptions":
        return pages.preemptions_page
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if len(parts) == 2 and parts[0] == "queues":
        name = parts[1]
        return lambda board, viewer: pages.queue_page(board, viewer, name)
    if len(parts) == 3 and parts[0] in ("pods", "gangs") and all(parts):
        kind = "gang" if parts[0] == "gangs" else "pod"
        key = f"{parts[1]}/{parts[2]}"
        return lambda board, viewer: pages.workload_page(board, viewer, kind, key)
    return None


def _etag(board: Board, viewer: Viewer) -> str:
    seen = "*" if viewer.namespaces is None else ",".join(sorted(viewer.namespaces))
    digest = hashlib.blake2s(f"{viewer.name}\n{seen}".encode(), digest_size=6).hexdigest()
    return f'"{board.version}-{digest}"'
