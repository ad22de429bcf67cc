"""`batchsched ui`: the web pages over a snapshot of manifests, judged as `schedule` judges
them, and judged again when its files change (docs/ui.md).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from batchsched.commands.schedule import settle
from batchsched.config import SchedulerConfig
from batchsched.live.health import HealthServer
from batchsched.objects.errors import InputError
from batchsched.objects.load import STDIN, Objects, expand_paths
from batchsched.ui.access import Access, Network
from batchsched.ui.board import build_board
from batchsched.ui.history import plan_preemptions
from batchsched.ui.publisher import Publisher
from batchsched.ui.site import Site

log = logging.getLogger(__name__)

Stamp = tuple[tuple[str, int, int], ...]


class SnapshotJudge:
    """Judges the snapshot and publishes its board; again when the files change."""

    def __init__(
        self,
        load: Callable[[], Objects],
        config: SchedulerConfig,
        now: datetime | None,
        paths: list[Path],
        recursive: bool,
        publisher: Publisher,
    ) -> None:
        """`now` None: each judgement at the time it is made."""
        self.load = load
        self.config = config
        self.now = now
        self.paths = [p for p in paths if str(p) != STDIN]
        self.recursive = recursive
        self.publisher = publisher
        self.source = ", ".join(str(p) for p in paths) or "the cluster"
        self._stamp = self.stamp()

    def stamp(self) -> Stamp:
        """The files' names, sizes and modification times: what a change moves."""
        out = []
        for path in expand_paths(self.paths, self.recursive):
            try:
                info = path.stat()
            except OSError:
                out.append((str(path), -1, -1))
                continue
            out.append((str(path), info.st_size, info.st_mtime_ns))
        return tuple(out)

    def judge(self) -> None:
        """Read, schedule to the end and publish; InputError if the snapshot is bad."""
        objects = self.load()
        now = self.now or datetime.now(UTC)
        result, scheduler = settle(objects, self.config, now)
        preemptions = plan_preemptions(result.evictions, scheduler.state, now, objects.pods)
        version = self.publisher.next_version()
        source = f"snapshot {self.source}"
        board = build_board(scheduler, version, now, source, result.unschedulable, preemptions)
        self.publisher.publish(board)

    def changed(self) -> bool:
        """Whether the files changed since the last look."""
        stamp = self.stamp()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        return True

    def rejudge(self) -> None:
        """Judge again; a snapshot that no longer reads keeps the last board, with the error
        on every page."""
        try:
            self.judge()
        except InputError as err:
            board = self.publisher.take()
            if board is not None:
                notice = f"the snapshot changed but cannot be read: {err}; showing the last one"
                version = self.publisher.next_version()
                self.publisher.publish(replace(board, version=version, notice=notice))
            log.warning("snapshot not judged again: %s", err)

    def watch(self, stop: threading.Event, every: float = 1.0) -> None:
        """Judge again whenever the files change, until `stop`."""
        while not stop.wait(every):
            if self.changed():
                self.rejudge()


def serve(
    judge: SnapshotJudge,
    address: str,
    port: int,
    anonymous_from: tuple[Network, ...],
    poll_seconds: float,
) -> int:
    """Judge the snapshot, then serve its pages until SIGINT or SIGTERM."""
    if not 0 <= port <= 65535:
        raise InputError(f"--port: {port} is not a port (0-65535)")
    judge.judge()
    host = f"[{address}]" if ":" in address else address
    site = Site(judge.publisher, Access(anonymous_from), poll_seconds)
    server = HealthServer(
        f"{host}:{port}", None, lambda: True, lambda: True, flag="--address/--port", pages=site
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    print(f"batchsched ui: serving {server.describe()}/ (Ctrl-C to stop)", file=sys.stderr)
    try:
        judge.watch(stop)
    finally:
        server.stop()
    return 0
