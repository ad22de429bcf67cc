"""The web UI of `batchsched run` on a real API server (docs/ui.md): a user whose token may list
pods in one namespace sees that namespace's workloads only, the reviews made with deploy/'s
ServiceAccount (its RBAC grants tokenreviews and subjectaccessreviews)."""

from __future__ import annotations

import contextlib

import pytest

from batchsched.live.client import ApiError, KubeClient
from batchsched.live.credentials import load_credentials
from batchsched.live.metrics import Metrics
from batchsched.live.serving import Probes, ServingOptions, endpoints
from batchsched.ui.publisher import Publisher
from tests.e2e.cluster import Cluster, wait
from tests.live.conftest import free_port, get

pytestmark = pytest.mark.e2e


def _token_for_pod_lister(cluster: Cluster, name: str) -> str:
    """A ServiceAccount allowed to list pods in the test's namespace only, and its token."""
    ns = cluster.namespace
    cluster.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": name}})
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    cluster.create(f"{rbac}/roles", {"metadata": {"name": name}, "rules": [rule]})
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
    }
    cluster.create(f"{rbac}/rolebindings", binding)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    path = f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token"
    return str(cluster.admin.json("POST", path, body=request)["status"]["token"])


def test_a_user_sees_only_the_namespaces_where_it_may_list_pods(cluster: Cluster) -> None:
    other = f"{cluster.namespace}-other"
    cluster.admin.request("POST", "/api/v1/namespaces", body={"metadata": {"name": other}})
    try:
        cluster.node("ui-n1", cpu="2")
        cluster.pod("waits-here", cpu="64")
        elsewhere = cluster.pod_body("waits-there", cpu="64")
        elsewhere["metadata"]["namespace"] = other
        cluster.create(f"/api/v1/namespaces/{other}/pods", elsewhere)
        token = _token_for_pod_lister(cluster, "viewer")
        scheduler = cluster.run_scheduler(identity="e2e-ui")
        boards = Publisher(interval=0.2)
        scheduler.serve_ui(boards)
        port = free_port()
        # As deploy/'s ServiceAccount: its RBAC must allow the reviews.
        client = KubeClient(load_credentials(cluster.plane.deploy()))
        probes = Probes(Metrics().exposition, lambda: True, lambda: True)
        options = ServingOptions(secure_port=0, listen=f"127.0.0.1:{port}")
        (server,) = endpoints(options, probes, client, boards)
        server.start()
        base = f"http://127.0.0.1:{port}"
        here, there = f"{cluster.namespace}/waits-here", f"{other}/waits-there"
        try:
            # Loopback without a token sees everything (port-forward).
            wait(
                lambda: all(k.encode() in get(base + "/")[1] for k in (here, there)),
                timeout=60,
                what="both pending pods on the page",
            )
            code, body = get(base + "/", token=token)
            assert code == 200, body
            assert here.encode() in body and there.encode() not in body
            viewer = f"system:serviceaccount:{cluster.namespace}:viewer"
            assert f"signed in as {viewer}, seeing {cluster.namespace}".encode() in body
            # The board can be published before the pod's first attempt ("not attempted
            # yet"): wait for the reason rather than read the first page.
            wait(
                lambda: b"Insufficient cpu" in get(f"{base}/pods/{here}", token=token)[1],
                timeout=60,
                what="the pod's reason on its page",
            )
            code, body = get(f"{base}/pods/{here}", token=token)
            assert code == 200 and b"0/" in body and b"Insufficient cpu" in body
            assert get(f"{base}/pods/{there}", token=token)[0] == 404
            assert get(base + "/", token="not-a-token")[0] == 401
        finally:
            server.stop()
    finally:
        # No namespace controller runs here: the pod goes first, or it would stay pending.
        with contextlib.suppress(ApiError):
            cluster.admin.request(
                "DELETE",
                f"/api/v1/namespaces/{other}/pods/waits-there",
                body={"gracePeriodSeconds": 0},
            )
        with contextlib.suppress(ApiError):
            cluster.admin.request("DELETE", f"/api/v1/namespaces/{other}")
