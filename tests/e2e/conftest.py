"""A real etcd + kube-apiserver for end-to-end tests (envtest's KUBEBUILDER_ASSETS convention).

Skipped, with the reason, unless KUBEBUILDER_ASSETS names a folder holding `etcd` and
`kube-apiserver` (e.g. from `setup-envtest use -p path`) and `openssl` is on PATH.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import urllib3

from batchsched.live.client import KubeClient, load_configuration

TOKEN = "batchsched-e2e-token"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _assets() -> Path:
    raw = os.environ.get("KUBEBUILDER_ASSETS", "")
    if not raw:
        pytest.skip(
            "KUBEBUILDER_ASSETS is not set: the e2e tests need the etcd and kube-apiserver "
            "binaries (e.g. KUBEBUILDER_ASSETS=$(setup-envtest use -p path))"
        )
    assets = Path(raw)
    missing = [b for b in ("etcd", "kube-apiserver") if not (assets / b).is_file()]
    if missing:
        pytest.skip(f"KUBEBUILDER_ASSETS={raw} lacks {', '.join(missing)}")
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the service account signing key")
    return assets


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    http = urllib3.PoolManager(cert_reqs="CERT_NONE")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kube-apiserver exited: {log.read_text()[-2000:]}")
        try:
            response = http.request(
                "GET", f"{url}/readyz", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=2
            )
            if response.status == 200:
                return
        except urllib3.exceptions.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"kube-apiserver not ready in 90s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    assets = _assets()
    work = tmp_path_factory.mktemp("envtest")
    etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
    subprocess.run(
        ["openssl", "genrsa", "-out", str(work / "sa.key"), "2048"], check=True, capture_output=True
    )
    subprocess.run(
        ["openssl", "rsa", "-in", str(work / "sa.key"), "-pubout", "-out", str(work / "sa.pub")],
        check=True,
        capture_output=True,
    )
    (work / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n")
    etcd_log = (work / "etcd.log").open("wb")
    etcd = subprocess.Popen(
        [
            str(assets / "etcd"),
            f"--data-dir={work / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true",
        ],
        stdout=etcd_log,
        stderr=subprocess.STDOUT,
    )
    api_log_path = work / "kube-apiserver.log"
    api_log = api_log_path.open("wb")
    api = subprocess.Popen(
        [
            str(assets / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            f"--cert-dir={work / 'certs'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={api_port}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--service-account-issuer=https://batchsched.e2e",
            f"--service-account-key-file={work / 'sa.pub'}",
            f"--service-account-signing-key-file={work / 'sa.key'}",
            f"--token-auth-file={work / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
        ],
        stdout=api_log,
        stderr=subprocess.STDOUT,
    )
    url = f"https://127.0.0.1:{api_port}"
    try:
        _wait_ready(url, api, api_log_path)
        path = work / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "e2e", "cluster": {"server": url, "insecure-skip-tls-verify": True}}
            ],
            "users": [{"name": "e2e", "user": {"token": TOKEN}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
            "current-context": "e2e",
        }
        path.write_bytes(orjson.dumps(config))  # JSON is YAML
        yield path
    finally:
        for proc in (api, etcd):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        etcd_log.close()
        api_log.close()


@pytest.fixture
def client(kubeconfig: Path) -> KubeClient:
    return KubeClient(load_configuration(kubeconfig))
