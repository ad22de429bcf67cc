"""The HTTPS endpoints: probes for anyone, /metrics for a user the API server allows (TokenReview
then SubjectAccessReview, answered by the fake API server), a self-signed or mounted
certificate (a changed one served from the next connection), plain HTTP for `--listen`."""

from __future__ import annotations

import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchsched.commands.cli import main
from batchsched.live.delegated_auth import DelegatedAuth
from batchsched.live.health import HealthServer
from batchsched.live.metrics import Metrics
from batchsched.live.serving import Probes, ServingOptions, endpoints
from batchsched.live.tls import ServingCertificate, self_signed
from tests.live.conftest import FakeClock, client_for, free_port, get
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer

PROMETHEUS = {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u-1"}
PROMETHEUS_TOKEN = "prometheus-token"


def served_certificate(port: int) -> str:
    return ssl.get_server_certificate(("127.0.0.1", port))


def probes(ready: list[bool] | None = None) -> Probes:
    """Probes of a scheduler that is healthy, ready while `ready[0]` (default: always)."""
    metrics = Metrics()
    metrics.victims.inc()
    flag = ready or [True]
    return Probes(metrics.exposition, lambda: True, lambda: flag[0])


@pytest.fixture
def secure(api: FakeApiServer) -> Iterator[tuple[str, FakeClock, FakeApiServer]]:
    """An HTTPS server with a self-signed certificate and reviews by the fake API server,
    its answers kept on a clock the test moves."""
    api.tokens[PROMETHEUS_TOKEN] = {**PROMETHEUS, "groups": ["system:serviceaccounts"]}
    clock = FakeClock()
    server = HealthServer(
        "127.0.0.1:0",
        *vars(probes()).values(),
        certificate=ServingCertificate(),
        auth=DelegatedAuth(client_for(api), clock=clock),
    )
    server.start()
    try:
        yield f"https://127.0.0.1:{server.port}", clock, api
    finally:
        server.stop()


def test_probes_are_served_to_anyone_over_https_with_a_self_signed_certificate(
    secure: tuple[str, FakeClock, FakeApiServer],
) -> None:
    base, _, api = secure
    trust = served_certificate(int(base.rsplit(":", 1)[1]))
    for path in ("/healthz", "/livez", "/readyz"):
        assert get(base + path, trust=trust) == (200, b"ok\n")
    assert api.reviews == []  # no review for a probe
    # Plain HTTP on the HTTPS port gets no answer.
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(base.replace("https", "http") + "/healthz", timeout=5)


def test_metrics_need_a_token_the_api_server_knows_and_a_grant(
    secure: tuple[str, FakeClock, FakeApiServer],
) -> None:
    base, clock, api = secure
    url = base + "/metrics"
    code, body = get(url)
    assert code == 403 and b'user "system:anonymous" cannot get path "/metrics"' in body
    assert get(url, token="stolen")[0] == 401
    code, body = get(url, token=PROMETHEUS_TOKEN)
    assert code == 403 and PROMETHEUS["username"].encode() in body
    api.grants.add((PROMETHEUS["username"], "/metrics", "get"))
    clock.advance(11)  # the denial was kept for 10 s
    code, body = get(url, token=PROMETHEUS_TOKEN)
    assert code == 200 and b"batchsched_preemption_victims_total 1.0" in body
    assert api.reviews[-1]["spec"] == {
        "user": PROMETHEUS["username"],
        "uid": "u-1",
        "groups": ["system:serviceaccounts"],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


def test_a_group_grant_and_the_anonymous_user(
    secure: tuple[str, FakeClock, FakeApiServer],
) -> None:
    base, clock, api = secure
    api.grants.add(("group:system:serviceaccounts", "/metric*", "get"))
    api.grants.add(("system:anonymous", "/healthz", "get"))  # not /metrics
    assert get(base + "/metrics", token=PROMETHEUS_TOKEN)[0] == 200
    assert get(base + "/metrics")[0] == 403
    api.grants.add(("group:system:unauthenticated", "/metrics", "get"))
    clock.advance(11)
    assert get(base + "/metrics?x=1")[0] == 200


def test_answers_are_kept_ten_seconds(secure: tuple[str, FakeClock, FakeApiServer]) -> None:
    base, clock, api = secure
    api.grants.add((PROMETHEUS["username"], "/metrics", "get"))
    for _ in range(3):
        assert get(base + "/metrics", token=PROMETHEUS_TOKEN)[0] == 200
    kinds = [r["kind"] for r in api.reviews]
    assert kinds == ["TokenReview", "SubjectAccessReview"]
    clock.advance(10.5)
    assert get(base + "/metrics", token=PROMETHEUS_TOKEN)[0] == 200
    assert len(api.reviews) == 4
    # A revoked grant is in force once the kept answer expires.
    api.grants.clear()
    clock.advance(10.5)
    assert get(base + "/metrics", token=PROMETHEUS_TOKEN)[0] == 403


def test_a_review_that_fails_refuses_and_is_not_kept(
    secure: tuple[str, FakeClock, FakeApiServer],
) -> None:
    base, _, api = secure
    api.grants.add((PROMETHEUS["username"], "/metrics", "get"))
    api.inject(500, count=6, path="tokenreviews")  # the first try and its 5 retries
    assert get(base + "/metrics", token=PROMETHEUS_TOKEN)[0] == 401
    api.inject(503, count=6, path="subjectaccessreviews")
    assert get(base + "/metrics", token=PROMETHEUS_TOKEN)[0] == 500
    assert get(base + "/metrics", token=PROMETHEUS_TOKEN)[0] == 200


def test_a_mounted_certificate_is_served_and_read_again_when_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = self_signed("first.example")
    cert.write_bytes(first[0])
    key.write_bytes(first[1])
    server = HealthServer(
        "127.0.0.1:0",
        *vars(probes()).values(),
        certificate=ServingCertificate(cert, key, recheck=0.0),
    )
    server.start()
    try:
        base = f"https://127.0.0.1:{server.port}"
        assert get(base + "/healthz", trust=first[0].decode()) == (200, b"ok\n")
        # The Secret is rotated: the next connection gets the new pair.
        second = self_signed("second.example")
        cert.write_bytes(second[0])
        key.write_bytes(second[1])
        assert served_certificate(server.port).encode() == second[0]
        assert get(base + "/healthz", trust=second[0].decode()) == (200, b"ok\n")
        # A half-written pair is reported and the last good one kept.
        cert.write_bytes(first[0])
        assert served_certificate(server.port).encode() == second[0]
        assert "cannot load the changed files" in caplog.text
    finally:
        server.stop()


def test_listen_serves_plain_http_without_authentication(api: FakeApiServer) -> None:
    options = ServingOptions(listen="127.0.0.1:0")
    ready = [False]
    [server] = endpoints(options, probes(ready), client_for(api))
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert get(base + "/healthz") == (200, b"ok\n")
        assert get(base + "/readyz")[0] == 503
        ready[0] = True
        assert get(base + "/readyz") == (200, b"ok\n")
        assert get(base + "/metrics")[0] == 200
        assert get(base + "/nope")[0] == 404
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("options", "ports"),
    [
        (ServingOptions(), [10259]),
        (ServingOptions(listen="127.0.0.1:10251"), [0]),
        (ServingOptions(secure_port=8443, listen="127.0.0.1:10251"), [8443]),
        (ServingOptions(secure_port=0), [0]),
    ],
)
def test_https_is_the_default_and_listen_replaces_it(
    options: ServingOptions, ports: list[int]
) -> None:
    assert [options.https_port] == ports


def test_both_servers_when_both_are_asked(api: FakeApiServer) -> None:
    port = free_port()
    options = ServingOptions("127.0.0.1", port, listen="127.0.0.1:0")
    servers = endpoints(options, probes(), client_for(api))
    for server in servers:
        server.start()
    try:
        assert servers[0].describe() == f"https://127.0.0.1:{port}"
        assert get(f"https://127.0.0.1:{port}/metrics")[0] == 403
        assert get(f"http://127.0.0.1:{servers[1].port}/metrics")[0] == 200
    finally:
        for server in servers:
            server.stop()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-cert-file", "x.crt"], "--tls-cert-file and --tls-private-key-file must be"),
        (
            ["--tls-cert-file", "nope.crt", "--tls-private-key-file", "nope.key"],
            "--tls-cert-file nope.crt / --tls-private-key-file nope.key: cannot load",
        ),
        (["--secure-port", "70000"], "--secure-port: 70000 is not a port"),
        (["--listen", "nowhere"], "--listen: 'nowhere' must be HOST:PORT"),
    ],
)
def test_bad_endpoint_flags_are_clear_errors(
    api: FakeApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    assert main(["run", "--kubeconfig", str(kubeconfig), *flags]) == 2
    assert message in capsys.readouterr().err


def test_a_server_stopped_while_its_certificate_is_made_stops() -> None:
    server = HealthServer("127.0.0.1:0", *vars(probes()).values(), certificate=ServingCertificate())
    server.start()
    stopper = threading.Thread(target=server.stop, daemon=True)
    stopper.start()  # at once: the certificate is still being made
    stopper.join(WAIT_SECONDS)
    assert not stopper.is_alive()
