"""UILoad: whether readers of the web UI slow scheduling (docs/ui.md, docs/benchmarks.md).

A cluster of 5000 nodes (16 CPU, 64Gi) in 4 queues holding 20,000 pods: 19,800 running and 200
that never fit (the line the pages show). Scheduling runs as the live loop runs it: 20 rounds,
each 500 new pods created, one pass binding them (the UI's feed recording its decisions and,
between steps, publishing a board when one is due), and the 500 oldest running pods
completing. The same work runs without readers and with 50 readers served by the UI's HTTP
server on loopback: 50 page loads at once when the work starts, then each reader polls its
page every second as ui.js does (If-None-Match, a full load every fifth time), over the
queue tree, the GPU map, a queue's page, a workload's page and the preemptions page.

Three runs of each, interleaved; `pods_per_second` are the medians of wall-clock throughput
(what readers take from the loop, holding the interpreter's lock, shows there) and
`pods_per_loop_cpu_second` of the loop thread's own CPU (where building boards shows, less
noisy on a loaded machine); `ratio` is with readers over without (target >= 0.9 for the wall
clock). The decision hashes must be equal: readers change no decision.
"""

from __future__ import annotations

import http.client
import statistics
import threading
import time
from datetime import UTC, datetime, timedelta

from batchsched.config import default_config
from batchsched.decisions import Bind
from batchsched.live.health import HealthServer
from batchsched.objects.queues import Queue, QueueQuota
from batchsched.objects.records import Namespace, Node, Pod
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.ui.access import Access
from batchsched.ui.feed import Feed
from batchsched.ui.publisher import Publisher
from batchsched.ui.site import Site
from benchmarks.harness import Metrics, decision_hash, workload

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 2**30
MI = 2**20
NODES = 5000
PODS = 20_000
UNFIT = 200
ROUNDS = 20
PER_ROUND = 500
READERS = 50
TEAMS = ("team-0", "team-1", "team-2", "team-3")
PAGES = ("/", "/nodes", "/queues/team-1", "/pods/team-0/unfit-00000", "/preemptions")


def _pod(name: str, i: int, cpu: int = 100) -> Pod:
    return Pod(
        namespace=TEAMS[i % len(TEAMS)],
        name=name,
        scheduler_name="batchsched",
        requests={"cpu": cpu, "memory": 500 * MI, "pods": 1},
        creation_timestamp=NOW + timedelta(seconds=i),
    )


def _build() -> Scheduler:
    state = ClusterState()
    for i in range(NODES):
        zone = {"topology.kubernetes.io/zone": f"zone-{i % 8}"}
        node = Node(f"node-{i:05d}", {"cpu": 16_000, "memory": 64 * GI, "pods": 110}, zone)
        state.upsert_node(node)
    state.apply("Queue", Queue("all", "batchsched.io/v1alpha1"))
    for team in TEAMS:
        quota = QueueQuota(guaranteed=8_000_000, nominal=16_000_000)
        queue = Queue(team, "batchsched.io/v1alpha1", "all", {"cpu": quota})
        state.apply("Queue", queue)
        state.upsert_namespace(Namespace(team, {"batchsched.io/queue": team}))
    for i in range(PODS - UNFIT):
        pod = _pod(f"running-{i:05d}", i)
        pod.node_name = f"node-{i % NODES:05d}"
        pod.phase = "Running"
        state.upsert_pod(pod)
    for i in range(UNFIT):
        state.upsert_pod(_pod(f"unfit-{i:05d}", i, cpu=64_000))
    return Scheduler(state, default_config())


def _reader(port: int, page: str, stop: threading.Event, loads: list[int]) -> None:
    """One open page: loaded, then polled every second (If-None-Match), reloaded every fifth."""
    tag = ""
    polls = 0
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        target = page if polls % 5 == 0 else page + ("&" if "?" in page else "?") + "part=main"
        headers = {"If-None-Match": tag} if tag and polls % 5 else {}
        connection.request("GET", target, headers=headers)
        answer = connection.getresponse()
        answer.read()
        connection.close()
        if answer.status not in (200, 304):
            raise RuntimeError(f"{target}: {answer.status}")
        tag = answer.getheader("ETag") or tag
        loads.append(answer.status)
        polls += 1
        if stop.wait(1.0):
            return


def _run(readers: int) -> tuple[float, str, dict[str, float]]:
    """Wall seconds to schedule the rounds, their decision hash, and what the UI did."""
    scheduler = _build()
    state = scheduler.state
    publisher = Publisher()
    feed = Feed(scheduler, publisher)
    server = HealthServer(
        "127.0.0.1:0", None, lambda: True, lambda: True, pages=Site(publisher, Access())
    )
    server.start()
    stop = threading.Event()
    loads: list[int] = []
    threads = [
        threading.Thread(
            target=_reader, args=(server.port, PAGES[i % len(PAGES)], stop, loads), daemon=True
        )
        for i in range(readers)
    ]
    lines: list[object] = []
    builds = 0
    running = [f"{TEAMS[i % len(TEAMS)]}/running-{i:05d}" for i in range(PODS - UNFIT)]
    created = 0
    started = time.perf_counter()
    cpu_started = time.thread_time()
    for thread in threads:
        thread.start()
    for round_ in range(ROUNDS):
        now = NOW + timedelta(seconds=round_)
        for _ in range(PER_ROUND):
            pod = _pod(f"new-{created:05d}", created)
            state.upsert_pod(pod)
            created += 1
        for step in scheduler.pass_steps(now):
            if step:
                feed.record(step, now)
                lines.extend(step)
                running.extend(d.pod for d in step if isinstance(d, Bind))
            before = publisher.version
            feed.publish_if_due(now)
            builds += publisher.version - before
        for key in running[:PER_ROUND]:
            state.remove_pod(key)
        del running[:PER_ROUND]
    seconds = time.perf_counter() - started
    loop_cpu = time.thread_time() - cpu_started
    stop.set()
    for thread in threads:
        thread.join(60)
    server.stop()
    bound = sum(isinstance(line, Bind) for line in lines)
    if bound != ROUNDS * PER_ROUND:
        raise RuntimeError(f"expected {ROUNDS * PER_ROUND} bindings, got {bound}")
    ui = {"page_loads": len(loads), "boards": builds, "loop_cpu_seconds": loop_cpu}
    return seconds, decision_hash(lines), ui


@workload("UILoad/5000Nodes_20000Pods_50Readers")
def ui_load() -> Metrics:
    wall: dict[int, list[float]] = {0: [], READERS: []}
    cpu: dict[int, list[float]] = {0: [], READERS: []}
    hashes: set[str] = set()
    loads: list[int] = []
    boards: list[int] = []
    for _ in range(3):
        for readers in (0, READERS):
            seconds, digest, ui = _run(readers)
            wall[readers].append(seconds)
            cpu[readers].append(ui["loop_cpu_seconds"])
            hashes.add(digest)
            if readers:
                loads.append(int(ui["page_loads"]))
                boards.append(int(ui["boards"]))
    if len(hashes) != 1:
        raise RuntimeError(f"readers changed the decisions: {sorted(hashes)}")
    pods = ROUNDS * PER_ROUND

    def rate(runs: list[float]) -> int:
        return round(pods / statistics.median(runs))

    return {
        "nodes": NODES,
        "pods": PODS,
        "readers": READERS,
        "pods_per_second_without_readers": rate(wall[0]),
        "pods_per_second_with_readers": rate(wall[READERS]),
        "ratio": round(rate(wall[READERS]) / rate(wall[0]), 3),
        "pods_per_loop_cpu_second_without_readers": rate(cpu[0]),
        "pods_per_loop_cpu_second_with_readers": rate(cpu[READERS]),
        "loop_cpu_ratio": round(rate(cpu[READERS]) / rate(cpu[0]), 3),
        "wall_seconds_without": [round(s, 2) for s in wall[0]],
        "wall_seconds_with": [round(s, 2) for s in wall[READERS]],
        "page_loads_per_run": loads,
        "boards_per_run": boards,
        "decision_hash": hashes.pop(),
    }
