"""Credentials read as kubectl reads them: tokens, client certificates, exec plugins and the
pod's service account, without the kubernetes package except for exec and auth providers."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from batchsched.live import credentials as creds
from batchsched.live.client import KubeClient
from batchsched.live.credentials import ConnectError, TokenFile, in_cluster, load_credentials


def _write(path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://k.example:6443/", **(cluster or {})}}
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_bytes(orjson.dumps(config))
    return path


def _key_pair(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate and its key (openssl, as the control plane tests use)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a client certificate")
    cert, key = folder / "client.crt", folder / "client.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=batchsched", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_an_inline_token_beats_a_token_file_and_the_server_loses_its_slash(
    tmp_path: Path,
) -> None:
    (tmp_path / "t").write_text("from-file\n")
    both = load_credentials(_write(tmp_path / "k", {"token": "inline", "tokenFile": "t"}))
    assert both.host == "https://k.example:6443"
    assert both.auth_headers() == {"Authorization": "Bearer inline"}
    only_file = load_credentials(_write(tmp_path / "k", {"tokenFile": "t"}))
    # A relative tokenFile is relative to the kubeconfig's folder.
    assert only_file.auth_headers() == {"Authorization": "Bearer from-file"}


def test_a_token_file_is_read_again_after_a_minute(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    now = [0.0]
    token = TokenFile(path, clock=lambda: now[0])
    path.write_text("two")
    assert token() == "one"
    now[0] = creds.TOKEN_REFRESH
    assert token() == "two"
    path.unlink()  # gone: the last good token is kept, the server judges it
    now[0] *= 2
    assert token() == "two"


def test_basic_auth(tmp_path: Path) -> None:
    got = load_credentials(_write(tmp_path / "k", {"username": "ann", "password": "pw"}))
    expected = base64.b64encode(b"ann:pw").decode()
    assert got.auth_headers() == {"Authorization": f"Basic {expected}"}


def test_client_certificate_files_and_inline_data_load_into_the_tls_context(
    tmp_path: Path,
) -> None:
    cert, key = _key_pair(tmp_path)
    ca = {"certificate-authority": "client.crt"}  # any PEM certificate will do as a CA
    files = load_credentials(
        _write(tmp_path / "k", {"client-certificate": "client.crt", "client-key": str(key)}, ca)
    )
    assert (files.cert_file, files.key_file, files.ca_file) == (str(cert), str(key), str(cert))
    assert files.auth_headers() == {}
    KubeClient(files)  # loads the chain and the CA; a bad pair would raise ConnectError
    inline = {
        "client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
        "client-key-data": base64.b64encode(key.read_bytes()).decode(),
    }
    ca_data = {"certificate-authority-data": base64.b64encode(cert.read_bytes()).decode()}
    data = load_credentials(_write(tmp_path / "k", inline, ca_data))
    assert data.cert_data == cert.read_bytes() and data.ca_data == cert.read_text()
    KubeClient(data)
    swapped = {**inline, "client-key-data": inline["client-certificate-data"]}
    with pytest.raises(ConnectError, match="cannot load the TLS certificates"):
        KubeClient(load_credentials(_write(tmp_path / "k", swapped)))


def test_a_certificate_without_its_key_or_bad_base64_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConnectError, match="needs both certificate and key"):
        load_credentials(_write(tmp_path / "k", {"client-certificate": "c.crt"}))
    with pytest.raises(ConnectError, match="client-key-data is not base64"):
        load_credentials(
            _write(tmp_path / "k", {"client-certificate-data": "QQ==", "client-key-data": "%%"})
        )


def test_an_exec_plugin_runs_through_the_kubernetes_package(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    status = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-exec"},
    }
    plugin.write_text(f"print({orjson.dumps(status).decode()!r})\n")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    got = load_credentials(_write(tmp_path / "k", user))
    assert got.host == "https://k.example:6443"
    assert got.auth_headers() == {"Authorization": "Bearer from-exec"}


def test_in_cluster_reads_the_service_account(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("pem")
    (tmp_path / "token").write_text("sa-token\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    got = in_cluster(env, tmp_path)
    assert (got.host, got.ca_file) == ("https://10.0.0.1:443", str(tmp_path / "ca.crt"))
    assert got.auth_headers() == {"Authorization": "Bearer sa-token"}
    v6 = in_cluster({**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}, tmp_path)
    assert v6.host == "https://[fd00::1]:443"
    with pytest.raises(ConnectError, match="KUBERNETES_SERVICE_HOST"):
        in_cluster({}, tmp_path)
    (tmp_path / "token").unlink()
    with pytest.raises(ConnectError, match="cannot read the token"):
        in_cluster(env, tmp_path)


def test_missing_pieces_are_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "k", {"token": "t"})
    config = orjson.loads(path.read_bytes())
    config["contexts"][0]["context"]["user"] = "nobody"
    path.write_bytes(orjson.dumps(config))
    with pytest.raises(ConnectError, match="context 'x' names user 'nobody', not defined"):
        load_credentials(path)
    del config["current-context"]
    path.write_bytes(orjson.dumps(config))
    with pytest.raises(ConnectError, match="no current-context"):
        load_credentials(path)


def test_the_run_command_starts_without_the_kubernetes_package() -> None:
    code = (
        "import sys, batchsched.commands.cli, batchsched.live.runner;"
        " print('kubernetes' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"
