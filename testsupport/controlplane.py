"""A real control plane for the end-to-end tests and the LiveReal benchmark: etcd,
kube-apiserver and, on demand, kube-controller-manager, from a folder in envtest's layout
(KUBEBUILDER_ASSETS holding `etcd`, `kube-apiserver` and `kubectl`; `kube-controller-manager`
is looked for there and in KUBE_SCHEDULER_BIN's folder).

The API server can be stopped and started again on the same port and etcd (a restart), and
etcd's history compacted, so tests can drive the scheduler through what a cluster does to it.
Missing binaries raise MissingAssets, saying what to build: the tests skip on it, the benchmark
prints a skipped line.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import urllib3

from batchsched.live.client import KubeClient
from batchsched.live.credentials import load_credentials

TOKEN = "batchsched-e2e-token"
REPO = Path(__file__).parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MissingAssets(Exception):
    """A binary the control plane needs is not there (the message says how to get it)."""


def assets() -> Path:
    """The folder of binaries; MissingAssets saying what is missing."""
    raw = os.environ.get("KUBEBUILDER_ASSETS", "")
    if not raw:
        raise MissingAssets(
            "KUBEBUILDER_ASSETS is not set: a real control plane needs etcd, kube-apiserver and "
            "kubectl "
            "(build them with build-kube-assets.sh, see docs/live.md, or "
            "KUBEBUILDER_ASSETS=$(setup-envtest use -p path))"
        )
    folder = Path(raw)
    missing = [b for b in ("etcd", "kube-apiserver", "kubectl") if not (folder / b).is_file()]
    if missing:
        raise MissingAssets(f"KUBEBUILDER_ASSETS={raw} lacks {', '.join(missing)}")
    if shutil.which("openssl") is None:
        raise MissingAssets("openssl is needed to make the service account signing key")
    return folder


def controller_manager() -> Path:
    for folder in (
        Path(os.environ.get("KUBEBUILDER_ASSETS", "")),
        Path(os.environ.get("KUBE_SCHEDULER_BIN", "/nonexistent")).parent,
    ):
        if (folder / "kube-controller-manager").is_file():
            return folder / "kube-controller-manager"
    raise MissingAssets(
        "kube-controller-manager not found next to KUBEBUILDER_ASSETS or KUBE_SCHEDULER_BIN "
        "(build-kube-assets.sh GIT_DIR DEST kube-controller-manager builds it)"
    )


def write_kubeconfig(path: Path, server: str, token: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        # The API server's certificate is self-signed for this run; the client warns once.
        "clusters": [
            {"name": "e2e", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "e2e", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
        "current-context": "e2e",
    }
    path.write_bytes(orjson.dumps(config))  # JSON is YAML
    return path


def terminate(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `grace` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ControlPlane:
    def __init__(self, work: Path, extra_flags: tuple[str, ...] = ()) -> None:
        self.bin = assets()
        self.work = work
        self.extra_flags = extra_flags
        self.etcd_port, self.peer_port, self.api_port = free_port(), free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.api_port}"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.admin_kubeconfig = write_kubeconfig(work / "admin.kubeconfig", self.url, TOKEN)
        self.service_account_kubeconfig: Path | None = None
        self.service_account_token = ""
        self.kubelet: Any = None  # the fake kubelet the fixtures run beside it

    # ---- processes -------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.work / f"{name}.log").open("ab")
        self._procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def log(self, name: str) -> str:
        return (self.work / f"{name}.log").read_text(errors="replace")[-3000:]

    def start(self) -> ControlPlane:
        key, pub = self.work / "sa.key", self.work / "sa.pub"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
        )
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)],
            check=True,
            capture_output=True,
        )
        (self.work / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n")
        self._spawn(
            "etcd",
            [
                str(self.bin / "etcd"),
                f"--data-dir={self.work / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{self.peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{self.peer_port}",
                "--unsafe-no-fsync=true",
            ],
        )
        self.start_apiserver()
        return self

    def start_apiserver(self) -> None:
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--cert-dir={self.work / 'certs'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--service-account-issuer=https://batchsched.e2e",
                f"--service-account-key-file={self.work / 'sa.pub'}",
                f"--service-account-signing-key-file={self.work / 'sa.key'}",
                f"--token-auth-file={self.work / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                *self.extra_flags,
            ],
        )
        self._wait_ready()

    def stop_apiserver(self) -> None:
        self._stop("kube-apiserver")

    def start_controller_manager(self, controllers: str) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                str(controller_manager()),
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--controllers={controllers}",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
            ],
        )

    def stop_controller_manager(self) -> None:
        self._stop("kube-controller-manager")

    def _stop(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        if proc is not None:
            terminate(proc)

    def stop(self) -> None:
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            self._stop(name)

    def _wait_ready(self) -> None:
        # Ready probes of the harness, not the client under test: no warning per probe.
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        http = urllib3.PoolManager(cert_reqs="CERT_NONE", retries=False)
        proc = self._procs["kube-apiserver"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"kube-apiserver exited: {self.log('kube-apiserver')}")
            try:
                response = http.request(
                    "GET",
                    f"{self.url}/readyz",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=2,
                )
                if response.status == 200:
                    return
            except urllib3.exceptions.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"kube-apiserver not ready in 120s: {self.log('kube-apiserver')}")

    # ---- clients and tools -----------------------------------------------------------

    def admin(self) -> KubeClient:
        return KubeClient(load_credentials(self.admin_kubeconfig))

    def kubectl(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.bin / "kubectl"), f"--kubeconfig={self.admin_kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr}")
        return done.stdout

    def deploy(self) -> Path:
        """The PodGroup CRD's optional component, `kubectl apply -k deploy/`, then a
        kubeconfig for its ServiceAccount (a token from the TokenRequest API), as the
        Deployment's pods would get."""
        if self.service_account_kubeconfig is not None:
            return self.service_account_kubeconfig
        self.kubectl("apply", "-k", str(REPO / "deploy" / "components" / "podgroup-crd"))
        self.kubectl("apply", "-k", str(REPO / "deploy"))
        self.kubectl(
            "wait",
            "--for=condition=Established",
            "crd/podgroups.scheduling.x-k8s.io",
            "crd/queues.batchsched.io",
            "--timeout=60s",
        )
        admin = self.admin()
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 7200},
        }
        answer = admin.json(
            "POST",
            "/api/v1/namespaces/batchsched-system/serviceaccounts/batchsched/token",
            body=request,
        )
        self.service_account_token = str(answer["status"]["token"])
        path = self.work / "batchsched.kubeconfig"
        self.service_account_kubeconfig = write_kubeconfig(
            path, self.url, self.service_account_token
        )
        return path

    def etcd(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """etcd's v3 JSON gateway (keys are base64)."""
        http = urllib3.PoolManager()
        response = http.request(
            "POST",
            f"http://127.0.0.1:{self.etcd_port}/v3/{method}",
            body=orjson.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        if response.status != 200:
            raise RuntimeError(f"etcd {method}: {response.status} {response.data[:300]!r}")
        return dict(orjson.loads(response.data))

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now; returns the revision compacted to."""
        key = base64.b64encode(b"/").decode()
        revision = int(self.etcd("kv/range", {"key": key, "limit": 1})["header"]["revision"])
        self.etcd("kv/compaction", {"revision": revision, "physical": True})
        return revision


PlaneFactory = Callable[..., ControlPlane]  # extra kube-apiserver flags -> a running plane
