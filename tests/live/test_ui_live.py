"""The web UI of a running scheduler (docs/ui.md): pages from the boards its loop publishes,
a token's user seeing only the namespaces where the API server lets it list pods, each pod's
events, and nothing but GET."""

from __future__ import annotations

import urllib.request

from batchsched.live.metrics import Metrics
from batchsched.live.serving import Probes, ServingOptions, endpoints
from batchsched.ui.publisher import Publisher
from tests.live.conftest import Launcher, client_for, free_port, get, node, node_of, pod
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer

ALICE = {"username": "alice", "uid": "u-alice", "groups": ["system:authenticated"]}


def test_pages_of_a_running_scheduler_by_reader(api: FakeApiServer, launch: Launcher) -> None:
    api.tokens["alice-token"] = ALICE
    api.grants.add(("alice", "pods:team-a", "list"))
    api.create("nodes", node("n1", cpu="2"))
    api.create("pods", pod("small", cpu="1", namespace="team-a"))
    api.create("pods", pod("big", cpu="64", namespace="team-a"))
    api.create("pods", pod("big", cpu="64", namespace="team-b"))
    boards = Publisher(interval=0.05)
    run = launch()
    run.scheduler.serve_ui(boards)
    metrics = Metrics()
    probes = Probes(metrics.exposition, lambda: True, lambda: True)
    port = free_port()
    options = ServingOptions(secure_port=0, listen=f"127.0.0.1:{port}")
    (server,) = endpoints(options, probes, client_for(api), boards)
    server.start()
    base = f"http://127.0.0.1:{port}"
    try:
        assert api.wait_for(lambda s: node_of(s, "small", "team-a") == "n1")

        def shows(text: bytes, token: str = "", path: str = "/") -> bool:
            code, body = get(base + path, token=token)
            return code == 200 and text in body

        assert api.wait_for(lambda s: shows(b"team-b/big") and shows(b"team-a/big"))
        # Alice may list pods in team-a only: team-b's workload is hidden, counted.
        code, body = get(base + "/", token="alice-token")
        assert code == 200 and b"signed in as alice, seeing team-a" in body
        assert b"team-a/big" in body and b"team-b/big" not in body
        assert b"1 more in namespaces you cannot see" in body
        assert get(base + "/pods/team-b/big", token="alice-token")[0] == 404
        code, body = get(base + "/pods/team-a/big", token="alice-token")
        assert code == 200 and b"0/1 nodes are available: 1 Insufficient cpu" in body
        assert b"FailedScheduling" in body  # its history, live
        assert shows(
            b"Successfully assigned team-a/small to n1", "alice-token", "/pods/team-a/small"
        )
        # A token the API server does not know, a write: refused.
        assert get(base + "/", token="stolen")[0] == 401
        request = urllib.request.Request(base + "/", data=b"x", method="POST")
        try:
            urllib.request.urlopen(request, timeout=WAIT_SECONDS)
            raise AssertionError("POST was served")
        except urllib.error.HTTPError as err:
            assert err.code == 405
        kinds = {r["kind"] for r in api.reviews}
        assert kinds == {"TokenReview", "SubjectAccessReview"}
        # Cluster-wide first, then each namespace the board names; kept 10 s.
        asked = [r["spec"].get("resourceAttributes") for r in api.reviews]
        assert asked == [
            None,  # the TokenReview
            {"verb": "list", "resource": "pods", "version": "v1"},
            {"verb": "list", "resource": "pods", "version": "v1", "namespace": "team-a"},
            {"verb": "list", "resource": "pods", "version": "v1", "namespace": "team-b"},
            None,  # the stolen token's TokenReview
        ]
    finally:
        server.stop()
    assert run.halt() == 0
