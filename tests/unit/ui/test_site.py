"""The web UI's routes: pages for a reader by what it may see, quick 4xx for bad requests,
304 for a reader who has the current page, and nothing of a pod's spec beyond what the UI
shows (docs/ui.md)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from batchsched.config import default_config
from batchsched.objects.load import load_files
from batchsched.ui.access import Access
from batchsched.ui.board import Board
from batchsched.ui.offline import SnapshotJudge
from batchsched.ui.publisher import Publisher
from batchsched.ui.site import MAX_TARGET, Answer, Site
from tests.unit.ui.conftest import CLUSTER, NOW
from tests.unit.ui.test_access import Reviews

LOCAL = "127.0.0.1"


def site_for(board: Board, reviews: Reviews | None = None) -> Site:
    publisher = Publisher()
    publisher.publish(board)
    return Site(publisher, Access(reviews=reviews), first_board_wait=0.0)


def get(site: Site, target: str, client: str = LOCAL, **headers: str) -> Answer:
    return site.get(target, {k.replace("_", "-"): v for k, v in headers.items()}, client)


def text(answer: Answer) -> str:
    return answer.body.decode()


def test_every_page_is_served_to_loopback(board: Board) -> None:
    site = site_for(board)
    for target in ("/", "/queues/vision", "/gangs/vision/pretrain", "/pods/vision/sweep-1",
                   "/pods/vision/pretrain-1", "/nodes", "/nodes?by=example.com%2Frack",
                   "/preemptions", "/?part=main"):  # fmt: skip
        answer = get(site, target)
        assert answer.status == 200, target
        assert answer.content_type.startswith("text/html")
        assert ("Content-Security-Policy", answer.headers[2][1]) in answer.headers
    page = text(get(site, "/gangs/vision/pretrain"))
    assert "Position in its queue</dt><dd>1 of 4 in" in page
    assert "Position overall</dt><dd>5 waiting; the next queue is chosen by fair share" in page
    assert "largest fit is rack-2 with 10 of 16 nvidia.com/gpu free" in page
    assert "Expected start</dt><dd>reserved gpu-1a, gpu-1b; waits for pods without" in page
    # A member's page is its gang's.
    assert "<h1>Gang vision/pretrain</h1>" in text(get(site, "/pods/vision/pretrain-1"))
    main = text(get(site, "/?part=main"))
    assert main.startswith('<p class="status">') and "<html" not in main


def test_reserved_room_is_shown_with_when_it_is_held(board: Board) -> None:
    """Backfill's reservation on a workload's page and on the GPU map: when it holds which
    room on each node (docs/ui.md)."""
    site = site_for(board)
    page = text(get(site, "/gangs/vision/pretrain"))
    held = "from now on, open (until the pods it waits for end and its holder starts)"
    room = "cpu 4, memory 32Gi, nvidia.com/gpu 8, pods 1"
    assert f"Room held</dt><dd>{held}: gpu-1a: {room}; gpu-1b: {room}</dd>" in page
    nodes = text(get(site, "/nodes"))
    used = "gpu-2b: 2 of 8 nvidia.com/gpu in use"
    label = f"{used}, reserved for vision/sweep-1; vision/sweep-1 holds {held}: {room}"
    assert f'title="{label}"' in nodes


def test_static_files_are_served_from_the_package(board: Board) -> None:
    site = site_for(board)
    assert get(site, "/static/ui.js").content_type.startswith("text/javascript")
    assert b"part" in get(site, "/static/ui.js").body
    assert get(site, "/static/ui.css").status == 200
    assert get(site, "/static/../site.py").status == 404


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("/nope", 404),
        ("/queues/nope", 404),
        ("/pods/vision/nope", 404),
        ("/gangs/vision/sweep-0", 404),  # a pod, not a gang
        ("/pods/vision", 404),
        ("/?" + "a=1&" * 20, 400),
        ("/?a=%%", 200),  # percent-decoding errors are not fatal to parse_qs; ignored
        ("/?by", 400),  # a field without a value
        ("/?" + "x" * MAX_TARGET, 414),
    ],
)
def test_bad_requests_get_4xx(board: Board, target: str, status: int) -> None:
    assert get(site_for(board), target).status == status


def test_a_reader_with_the_current_page_gets_304(board: Board) -> None:
    site = site_for(board)
    first = get(site, "/")
    tag = dict(first.headers)["ETag"]
    again = get(site, "/", If_None_Match=tag)
    assert again.status == 304 and again.body == b""
    publisher = site.publisher
    publisher.publish(replace(board, version=board.version + 1))
    assert get(site, "/", If_None_Match=tag).status == 200


def test_without_a_board_yet_the_answer_is_503_with_retry_after() -> None:
    site = Site(Publisher(), Access(), first_board_wait=0.0)
    answer = get(site, "/")
    assert answer.status == 503 and ("Retry-After", "1") in answer.headers


def test_a_user_sees_only_the_workloads_of_its_namespaces(board: Board) -> None:
    site = site_for(board, Reviews({"ops"}))
    token = {"Authorization": "Bearer alice-token"}
    home = text(get(site, "/", client="10.0.0.7", **token))
    assert "signed in as alice, seeing ops" in home
    assert "ops/eval" in home and "vision/sweep-0" not in home
    assert "4 more in namespaces you cannot see" in home
    assert 'aria-label="queue vision"' in home  # queue totals for every reader
    assert get(site, "/gangs/vision/pretrain", client="10.0.0.7", **token).status == 404
    assert get(site, "/pods/ops/eval", client="10.0.0.7", **token).status == 200
    queue = text(get(site, "/queues/vision", client="10.0.0.7", **token))
    assert "No pending workload you can see" in queue and "4 more in namespaces" in queue
    preemptions = text(get(site, "/preemptions", client="10.0.0.7", **token))
    assert "nlp/serve-0" not in preemptions and "nlp/urgent" not in preemptions
    assert preemptions.count("a pod in a namespace you cannot see") == 3  # the rule names one
    # Pages differ by reader: another tag.
    tags = {dict(get(site, "/", client=c, **h).headers)["ETag"] for c, h in
            ((LOCAL, {}), ("10.0.0.7", token))}  # fmt: skip
    assert len(tags) == 2


def test_without_a_token_from_elsewhere_401(board: Board) -> None:
    site = site_for(board, Reviews({""}))
    assert get(site, "/", client="10.0.0.7").status == 401
    assert get(site, "/", client="10.0.0.7", Authorization="Bearer stolen").status == 401
    assert get(site, "/static/ui.css", client="10.0.0.7").status == 200  # no cluster data


def test_nothing_of_a_pods_spec_beyond_the_ui_fields_is_shown(tmp_path: Path) -> None:
    secret = """---
apiVersion: v1
kind: Pod
metadata:
  name: leaky
  namespace: vision
  annotations: {example.com/token: hunter2-annotation}
  labels: {example.com/team: hunter2-label}
spec:
  containers:
  - name: main
    image: registry.example.com/hunter2-image:1
    args: [--password=hunter2-arg]
    env: [{name: TOKEN, value: hunter2-env}]
    volumeMounts: [{name: v, mountPath: /hunter2-mount}]
    resources: {requests: {nvidia.com/gpu: '8'}, limits: {nvidia.com/gpu: '8'}}
  volumes: [{name: v, emptyDir: {}}]
"""
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(CLUSTER.read_text() + secret)
    judge = SnapshotJudge(
        lambda: load_files([snapshot]), default_config(), NOW, [snapshot], False, Publisher()
    )
    judge.judge()
    site = Site(judge.publisher, Access())
    pages = ["/", "/queues/vision", "/pods/vision/leaky", "/nodes", "/preemptions"]
    bodies = [text(get(site, p)) for p in pages]
    assert "vision/leaky" in bodies[2]
    assert not [p for p, body in zip(pages, bodies, strict=True) if "hunter2" in body]


def test_text_from_the_cluster_is_escaped(board: Board) -> None:
    workload = board.workloads[0]
    hostile = replace(workload, reason='<script>alert("x")</script>')
    site = site_for(replace(board, workloads=(hostile, *board.workloads[1:])))
    page = text(get(site, "/gangs/vision/pretrain"))
    assert "<script>alert" not in page and "&lt;script&gt;alert(&quot;x&quot;)" in page


def test_the_snapshot_is_judged_again_when_its_file_changes(tmp_path: Path) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(CLUSTER.read_text())
    judge = SnapshotJudge(
        lambda: load_files([snapshot]), default_config(), NOW, [snapshot], False, Publisher()
    )
    judge.judge()
    assert judge.changed() is False
    snapshot.write_text(CLUSTER.read_text().replace("name: sweep-2,", "name: sweep-9,"))
    assert judge.changed() is True
    judge.judge()
    board = judge.publisher.take()
    assert board is not None and board.version == 2 and board.workload("vision/sweep-9")
    snapshot.write_text("kind: [")
    judge.rejudge()
    broken = judge.publisher.take()
    assert broken is not None and broken.version == 3 and "cannot be read" in broken.notice
    assert broken.workload("vision/sweep-9") is not None  # the last good one stays
