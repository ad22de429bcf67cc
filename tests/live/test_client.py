"""The client finds credentials as kubectl does and lists in pages."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest

from batchsched.live.client import KubeClient
from batchsched.live.credentials import ConnectError, load_credentials
from tests.live.conftest import client_for, node
from tests.live.fake_apiserver import FakeApiServer


def _kubeconfig(path: Path, contexts: dict[str, str], current: str, insecure: bool = False) -> Path:
    """A kubeconfig with one cluster per context (context name -> server URL)."""
    cluster: dict[str, Any] = {"insecure-skip-tls-verify": True} if insecure else {}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {**cluster, "server": s}} for n, s in contexts.items()],
        "users": [{"name": n, "user": {"token": f"token-{n}"}} for n in contexts],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in contexts],
        "current-context": current,
    }
    path.write_bytes(orjson.dumps(config))
    return path


@pytest.fixture
def no_ambient(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.usefixtures("no_ambient")
def test_kubeconfig_list_merges_files_and_context_picks_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _kubeconfig(tmp_path / "a", {"a": "https://a.example:6443"}, "a")
    second = _kubeconfig(tmp_path / "b", {"b": "https://b.example:6443"}, "b")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    # The first file's current-context wins; the second file's context is there to pick.
    assert load_credentials(None).host == "https://a.example:6443"
    picked = load_credentials(None, context="b")
    assert picked.host == "https://b.example:6443"
    assert picked.auth_headers() == {"Authorization": "Bearer token-b"}
    # --kubeconfig beats KUBECONFIG.
    assert load_credentials(second).host == "https://b.example:6443"


@pytest.mark.usefixtures("no_ambient")
def test_home_kubeconfig_then_in_cluster_then_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConnectError, match="in-cluster config.*set KUBECONFIG"):
        load_credentials(None)
    with pytest.raises(ConnectError, match="--context x: no kubeconfig"):
        load_credentials(None, context="x")
    home = tmp_path / "home" / ".kube"
    home.mkdir(parents=True)
    _kubeconfig(home / "config", {"h": "https://h.example"}, "h")
    assert load_credentials(None).host == "https://h.example"
    with pytest.raises(ConnectError, match="nope"):
        load_credentials(None, context="nope")


@pytest.mark.usefixtures("no_ambient")
def test_an_insecure_kubeconfig_warns_once_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _kubeconfig(tmp_path / "k", {"i": "https://i.example"}, "i", insecure=True)
    with caplog.at_level(logging.WARNING):
        credentials = load_credentials(path)
    assert not credentials.verify
    [record] = [r for r in caplog.records if "verification is off" in r.getMessage()]
    assert "https://i.example" in record.getMessage()


@pytest.mark.usefixtures("no_ambient")
def test_an_unreadable_certificate_authority_is_a_connect_error(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "k", {"c": "https://c.example"}, "c")
    credentials = load_credentials(path)
    credentials.ca_file = str(tmp_path / "no-such-ca.crt")
    with pytest.raises(ConnectError, match=r"https://c.example: cannot load the TLS cert"):
        KubeClient(credentials)


def test_lists_come_in_pages_from_one_snapshot(api: FakeApiServer) -> None:
    for i in range(5):
        api.create("nodes", node(f"n{i}"))
    client = client_for(api)
    items, version = client.list("/api/v1/nodes", page_size=2)
    assert [o["metadata"]["name"] for o in items] == [f"n{i}" for i in range(5)]
    lists = [r for r in api.requests if r == ("GET", "/api/v1/nodes")]
    assert len(lists) == 3
    assert version == str(api.rv)


def test_pages_come_one_at_a_time_with_the_snapshot_version(api: FakeApiServer) -> None:
    for i in range(5):
        api.create("nodes", node(f"n{i}"))
    client = client_for(api)
    pages = client.pages("/api/v1/nodes", page_size=2)
    first = next(pages)
    assert [o["metadata"]["name"] for o in first.items] == ["n0", "n1"]
    api.create("nodes", node("n5"))  # after the snapshot: not in this list
    rest = list(pages)
    assert [[o["metadata"]["name"] for o in p.items] for p in rest] == [["n2", "n3"], ["n4"]]
    assert {p.version for p in (first, *rest)} == {first.version}
    assert not any(p.restarted for p in (first, *rest))


def test_an_expired_continue_token_lists_again_in_one_page(
    api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        api.create("nodes", node(f"n{i}"))
    client = client_for(api)
    queries: list[Any] = []
    real = client.json

    def json_then_compact(method: str, path: str, **kwargs: Any) -> Any:
        out = real(method, path, **kwargs)
        if not queries:
            api.compact()  # the first page's snapshot is gone before the second is asked
        queries.append(kwargs.get("query"))
        return out

    monkeypatch.setattr(client, "json", json_then_compact)
    items, _ = client.list("/api/v1/nodes", page_size=2)
    assert sorted(o["metadata"]["name"] for o in items) == ["n0", "n1", "n2"]
    assert queries[0] == {"limit": "2"}
    assert queries[-1] is None  # the fallback: one unpaginated list


def test_a_list_of_any_version_comes_whole_from_the_watch_cache(api: FakeApiServer) -> None:
    for i in range(5):
        api.create("nodes", node(f"n{i}"))
    client = client_for(api)
    [page] = list(client.pages("/api/v1/nodes", page_size=2, any_version=True))
    assert [o["metadata"]["name"] for o in page.items] == [f"n{i}" for i in range(5)]
    assert page.version == str(api.rv)
    assert [r for r in api.requests if r[1] == "/api/v1/nodes"] == [("GET", "/api/v1/nodes")]
