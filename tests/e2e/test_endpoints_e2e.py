"""deploy/ under the `restricted` Pod Security Standard, and `batchsched run`'s HTTPS endpoints
with /metrics authorized by the real API server (TokenReview and SubjectAccessReview made with
deploy/'s ServiceAccount)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.live.client import ApiError
from tests.e2e.cluster import Cluster, Process, wait
from tests.live.conftest import get
from testsupport.controlplane import REPO, ControlPlane

pytestmark = pytest.mark.e2e

NAMESPACE = "batchsched-system"


def _deployment_pod() -> dict[str, Any]:
    """A Pod made from deploy/'s Deployment template, as the ReplicaSet controller makes it."""
    [deployment] = [
        d for d in yaml.safe_load_all((REPO / "deploy" / "deployment.yaml").read_text()) if d
    ]
    template = deployment["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "batchsched-", **template["metadata"]},
        "spec": template["spec"],
    }


def _admitted(plane: ControlPlane, pod: dict[str, Any]) -> ApiError | None:
    """Create the pod in batchsched-system as a dry run (admission runs, nothing is stored)."""
    try:
        plane.admin().request(
            "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", query={"dryRun": "All"}, body=pod
        )
    except ApiError as err:
        return err
    return None


def test_the_deployments_pods_are_admitted_under_the_restricted_standard(
    plane: ControlPlane,
) -> None:
    plane.deploy()
    namespace = plane.admin().json("GET", f"/api/v1/namespaces/{NAMESPACE}")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert _admitted(plane, _deployment_pod()) is None
    # The label is enforced: without the seccomp profile the same pod is refused.
    weaker = copy.deepcopy(_deployment_pod())
    del weaker["spec"]["securityContext"]["seccompProfile"]
    refused = _admitted(plane, weaker)
    assert refused is not None and refused.status == 403
    assert 'violates PodSecurity "restricted' in refused.message
    assert "seccompProfile" in refused.message


def _service_account_token(cluster: Cluster, name: str) -> str:
    base = f"/api/v1/namespaces/{cluster.namespace}/serviceaccounts"
    cluster.create(base, {"metadata": {"name": name}})
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    answer = cluster.admin.json("POST", f"{base}/{name}/token", body=request)
    return str(answer["status"]["token"])


@pytest.fixture
def serving(cluster: Cluster, tmp_path: Path) -> Iterator[int]:
    """`batchsched run` as deploy/'s ServiceAccount, its HTTPS endpoints on a free port."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"leaderElection": {"leaderElect": False}}))
    process = Process(tmp_path, cluster.plane.deploy(), config, "endpoints", https=True)
    try:
        wait(
            lambda: _reachable(process.port) or process.proc.poll() is not None,
            timeout=60,
            what="the HTTPS endpoints",
        )
        assert process.proc.poll() is None, process.log()
        yield process.port
    finally:
        process.stop()
    assert "Forbidden" not in process.log(), process.log()  # RBAC in deploy/


def _reachable(port: int) -> bool:
    try:
        return get(f"https://127.0.0.1:{port}/healthz")[0] == 200
    except OSError:
        return False


def test_metrics_are_read_by_whom_the_api_server_allows(cluster: Cluster, serving: int) -> None:
    base = f"https://127.0.0.1:{serving}"
    wait(lambda: get(f"{base}/readyz")[0] == 200, what="caches synced")
    assert get(f"{base}/livez") == (200, b"ok\n")
    # Anonymous: authenticated as system:anonymous, not allowed.
    code, body = get(f"{base}/metrics")
    assert code == 403 and b"system:anonymous" in body
    assert get(f"{base}/metrics", token="not-a-token")[0] == 401
    # A ServiceAccount of its own: known, but allowed nothing until bound to the reader role.
    nobody = _service_account_token(cluster, "nobody")
    code, body = get(f"{base}/metrics", token=nobody)
    assert code == 403 and f"system:serviceaccount:{cluster.namespace}:nobody".encode() in body
    reader = _service_account_token(cluster, "prometheus")
    binding = {
        "metadata": {"name": f"{cluster.namespace}-metrics"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "batchsched-metrics-reader",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": "prometheus", "namespace": cluster.namespace}
        ],
    }
    path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    cluster.create(path, binding)
    try:
        code, body = get(f"{base}/metrics", token=reader)
        assert code == 200 and b"batchsched_pending_pods" in body
    finally:
        cluster.admin.request("DELETE", f"{path}/{cluster.namespace}-metrics")
