"""The live loop against a real kube-apiserver: nodes and pods created, pods bound, pending
pods told why, the leader lease taken and released."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from batchsched.config import parse_config
from batchsched.live.client import STRATEGIC_PATCH, ApiError, KubeClient
from batchsched.live.runner import LiveOptions, LiveScheduler

pytestmark = pytest.mark.e2e


def _wait(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _node(client: KubeClient, name: str, cpu: str) -> None:
    client.request("POST", "/api/v1/nodes", body={"metadata": {"name": name}})
    # Node status is set by its kubelet; here through the status subresource.
    allocatable = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    client.request(
        "PATCH",
        f"/api/v1/nodes/{name}/status",
        body={"status": {"allocatable": allocatable, "capacity": allocatable}},
        content_type=STRATEGIC_PATCH,
    )


def _pod(client: KubeClient, namespace: str, name: str, cpu: str) -> None:
    body = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "batchsched",
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }
    client.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body)


def _get_pod(client: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return dict(orjson.loads(client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")))


def test_pods_are_bound_and_the_unschedulable_one_is_told_why(client: KubeClient) -> None:
    namespace = f"e2e-{uuid.uuid4().hex[:6]}"
    client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    suffix = namespace[-6:]
    _node(client, f"n1-{suffix}", "2")
    config = parse_config(
        {
            "leaderElection": {
                "leaseDuration": "4s",
                "renewDeadline": "3s",
                "retryPeriod": "500ms",
                "resourceName": f"batchsched-{suffix}",
                "resourceNamespace": namespace,
            }
        }
    )
    scheduler = LiveScheduler(client, config, LiveOptions(identity="e2e", watch_timeout=10))
    stop = threading.Event()
    thread = threading.Thread(target=scheduler.run, args=(stop,), daemon=True)
    thread.start()
    try:
        for i in range(2):
            _pod(client, namespace, f"p{i}", "1")
        _pod(client, namespace, "too-big", "8")

        def bound() -> bool:
            return all(_get_pod(client, namespace, f"p{i}")["spec"].get("nodeName") for i in (0, 1))

        assert _wait(bound)

        def told() -> bool:
            conditions = _get_pod(client, namespace, "too-big")["status"].get("conditions") or []
            return any(
                c["type"] == "PodScheduled" and c["reason"] == "Unschedulable" for c in conditions
            )

        assert _wait(told)
        assert scheduler.ready()
    finally:
        stop.set()
        thread.join(30)
    try:
        lease = orjson.loads(
            client.request(
                "GET",
                f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/batchsched-{suffix}",
            )
        )
    except ApiError as err:
        pytest.fail(f"no lease: {err}")
    assert lease["spec"]["holderIdentity"] == ""  # released on stop
