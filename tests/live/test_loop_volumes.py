"""Claims and volumes in live mode: watched, and honoured when a pod's claims are bound."""

from __future__ import annotations

from typing import Any

from tests.live.conftest import Launcher, condition, config, node, node_of, pod
from tests.live.fake_apiserver import FakeApiServer


def _labelled(name: str) -> dict[str, Any]:
    manifest = node(name)
    manifest["metadata"]["labels"] = {"kubernetes.io/hostname": name}
    return manifest


def _local_pv(name: str, hostname: str) -> dict[str, Any]:
    term = {
        "matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]}
        ]
    }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}},
    }


def _bound_claim(name: str, volume: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"storageClassName": "", "volumeName": volume},
    }


def _claim_pod(name: str, claim: str) -> dict[str, Any]:
    manifest = pod(name)
    manifest["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return manifest


def test_a_pod_follows_its_bound_volume_and_waits_for_a_missing_claim(
    api: FakeApiServer, launch: Launcher
) -> None:
    for name in ("n1", "n2", "n3"):
        api.create("nodes", _labelled(name))
    api.create("persistentvolumes", _local_pv("local-n3", "n3"))
    api.create("persistentvolumeclaims", _bound_claim("data", "local-n3"))
    api.create("pods", _claim_pod("reader", "data"))
    api.create("pods", _claim_pod("early", "later"))
    run = launch(config(podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.1))
    assert api.wait_for(lambda s: node_of(s, "reader") == "n3")
    assert api.wait_for(lambda s: condition(s, "early") is not None)
    cond = condition(api, "early")
    assert cond is not None and cond["message"] == 'persistentvolumeclaim "later" not found'
    # The claim appears, bound to a volume on n2: the waiting pod is tried again and follows.
    api.create("persistentvolumes", _local_pv("local-n2", "n2"))
    api.create("persistentvolumeclaims", _bound_claim("later", "local-n2"))
    assert api.wait_for(lambda s: node_of(s, "early") == "n2")
    assert run.halt() == 0
