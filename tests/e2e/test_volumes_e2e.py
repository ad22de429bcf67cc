"""VolumeBinding's PreBind against a real API server and kube-controller-manager's PV
controller: a WaitForFirstConsumer claim is bound to the local PV of the node chosen."""

from __future__ import annotations

import contextlib

from batchsched.live.client import ApiError
from tests.e2e.cluster import Cluster, require, shipped_config, wait
from testsupport.controlplane import controller_manager


def test_a_wait_for_first_consumer_claim_is_bound_to_the_chosen_nodes_pv(
    cluster: Cluster,
) -> None:
    require(controller_manager)  # the PV controller runs only where it was built
    plane = cluster.plane
    ns = cluster.namespace
    suffix = ns[-6:]
    storage_class, volume = f"local-{suffix}", f"local-{suffix}"
    for name in (f"v1-{suffix}", f"v2-{suffix}"):
        cluster.node(name)
    holder = f"v2-{suffix}"
    cluster.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "metadata": {"name": storage_class},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    term = {
        "matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [holder]}
        ]
    }
    cluster.create(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": storage_class,
                "local": {"path": "/mnt/data"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
            },
        },
    )
    claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    cluster.create(
        claims,
        {
            "metadata": {"name": "data", "namespace": ns},
            "spec": {
                "storageClassName": storage_class,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    body = cluster.pod_body("train", cpu="1")
    body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    cluster.create(f"/api/v1/namespaces/{ns}/pods", body)
    plane.start_controller_manager("persistentvolume-binder")  # the real PV controller
    try:
        cluster.run_scheduler(shipped_config())
        wait(lambda: cluster.node_of("train") != "", timeout=90, what="the pod bound")
        assert cluster.node_of("train") == holder
        claim = cluster.admin.json("GET", f"{claims}/data")
        assert claim["spec"]["volumeName"] == volume
        assert claim["status"]["phase"] == "Bound"
        pv = cluster.admin.json("GET", f"/api/v1/persistentvolumes/{volume}")
        assert pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    finally:
        plane.stop_controller_manager()
        cluster.stop_schedulers()
        with contextlib.suppress(ApiError):
            cluster.admin.request("DELETE", f"/api/v1/persistentvolumes/{volume}")
            cluster.admin.request(
                "DELETE", f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}"
            )
