"""DRA against a real control plane: a driver's ResourceSlice for a (fake) node, a claim made
from a template by the real resourceclaim controller of kube-controller-manager, allocated by
batchsched (PreBind writes status.allocation and reservedFor) and the pod bound; and an
extended resource a DeviceClass maps, served by devices on a node that does not advertise it
(PreBind creates the pod's claim for it and names it in the pod's status); and a claim
allocated from a pool published for the nodes of a selector, whose allocation records that
selector, so a second pod sharing it binds to another of those nodes; and a gang whose members'
claims are allocated on two nodes together."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from batchsched.live.client import ApiError
from tests.e2e.cluster import Cluster, wait

pytestmark = pytest.mark.e2e

RESOURCE = "/apis/resource.k8s.io/v1"


def _publish(
    cluster: Cluster, name: str, node: str, spec: dict[str, Any], devices: list[dict[str, Any]]
) -> tuple[str, str]:
    """A DeviceClass (`spec`) and the ResourceSlice a DRA driver's kubelet plugin would
    publish for its node; their paths, to delete after the test."""
    cluster.create(f"{RESOURCE}/deviceclasses", {"metadata": {"name": name}, "spec": spec})
    return f"{RESOURCE}/deviceclasses/{name}", _slice(cluster, name, node, devices)


def _slice(cluster: Cluster, name: str, node: str, devices: list[dict[str, Any]]) -> str:
    """The ResourceSlice of class `name`'s driver for a node; its path."""
    cluster.create(
        f"{RESOURCE}/resourceslices",
        {
            "metadata": {"name": f"{node}-{name}"},
            "spec": {
                "driver": f"{name}.e2e.example.com",
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        },
    )
    return f"{RESOURCE}/resourceslices/{node}-{name}"


def _delete(cluster: Cluster, paths: tuple[str, str]) -> None:
    for path in filter(None, paths):
        with contextlib.suppress(ApiError):
            cluster.admin.request("DELETE", path)


def test_a_template_claim_is_allocated_from_a_published_slice_and_the_pod_bound(
    cluster: Cluster,
) -> None:
    suffix = cluster.namespace[-6:]
    device_class = f"gpu-{suffix}"
    driver = f"{device_class}.e2e.example.com"
    gpu_node, plain_node = f"g-{suffix}", f"c-{suffix}"
    cluster.node(plain_node, cpu="4")
    cluster.node(gpu_node, cpu="4")
    expression = f'device.driver == "{driver}" && device.attributes["{driver}"].model == "H100"'
    devices = [
        {"name": "gpu-0", "attributes": {"model": {"string": "A100"}}},
        {"name": "gpu-1", "attributes": {"model": {"string": "H100"}}},
    ]
    spec = {"selectors": [{"cel": {"expression": expression}}]}
    published = _publish(cluster, device_class, gpu_node, spec, devices)
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class}}
    cluster.create(
        f"{RESOURCE}/namespaces/{cluster.namespace}/resourceclaimtemplates",
        {
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        },
    )
    plane = cluster.plane
    plane.start_controller_manager("resourceclaim-controller")
    try:
        cluster.run_scheduler()
        body = cluster.pod_body("trainer", cpu="1")
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", body)
        # The controller manager starts first (slow on a loaded machine), then makes the claim.
        try:
            wait(lambda: cluster.node_of("trainer") == gpu_node, timeout=180, what="bound")
        except AssertionError:
            status = (cluster.get_pod("trainer") or {}).get("status")
            raise AssertionError(
                f"trainer not bound; its status: {status}; "
                f"kube-controller-manager: {plane.log('kube-controller-manager')[-1500:]}"
            ) from None
        pod = cluster.get_pod("trainer") or {}
        [made] = pod["status"]["resourceClaimStatuses"]
        claim = cluster.admin.json(
            "GET",
            f"{RESOURCE}/namespaces/{cluster.namespace}/resourceclaims/{made['resourceClaimName']}",
        )
        allocation = claim["status"]["allocation"]
        assert [
            (r["request"], r["driver"], r["pool"], r["device"])
            for r in allocation["devices"]["results"]
        ] == [("gpu", driver, gpu_node, "gpu-1")]
        [term] = allocation["nodeSelector"]["nodeSelectorTerms"]
        assert term["matchFields"] == [
            {"key": "metadata.name", "operator": "In", "values": [gpu_node]}
        ]
        assert [(r["resource"], r["name"], r["uid"]) for r in claim["status"]["reservedFor"]] == [
            ("pods", "trainer", pod["metadata"]["uid"])
        ]
        assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
        cluster.stop_schedulers()  # and checks that RBAC refused nothing
    finally:
        plane.stop_controller_manager()
        _delete(cluster, published)


def test_an_extended_resource_is_served_by_devices_on_a_node_without_it(
    cluster: Cluster,
) -> None:
    suffix = cluster.namespace[-6:]
    device_class = f"x-{suffix}"
    driver = f"{device_class}.e2e.example.com"
    node = f"x-{suffix}"
    cluster.node(node, cpu="4")
    resource = f"{driver}/gpu"
    spec = {
        "extendedResourceName": resource,
        "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
    }
    published = _publish(cluster, device_class, node, spec, [{"name": "gpu-0"}, {"name": "gpu-1"}])
    try:
        cluster.run_scheduler()
        body = cluster.pod_body("worker", cpu="1")
        body["spec"]["containers"][0]["resources"]["limits"] = {resource: "2"}
        cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", body)
        wait(lambda: cluster.node_of("worker") == node, timeout=90, what="worker bound")
        pod = cluster.get_pod("worker") or {}
        status = pod["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"] == [
            {"containerName": "c", "resourceName": resource, "requestName": "container-0-request-1"}
        ]
        name = status["resourceClaimName"]
        assert name.startswith("worker-extended-resources-")
        claim = cluster.admin.json(
            "GET", f"{RESOURCE}/namespaces/{cluster.namespace}/resourceclaims/{name}"
        )
        results = claim["status"]["allocation"]["devices"]["results"]
        assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
        assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
        cluster.stop_schedulers()  # and checks that RBAC refused nothing
    finally:
        _delete(cluster, published)


def test_a_claim_from_a_node_selector_pool_records_the_selector_and_is_shared_across_nodes(
    cluster: Cluster,
) -> None:
    suffix = cluster.namespace[-6:]
    device_class = f"rack-{suffix}"
    driver = f"{device_class}.e2e.example.com"
    outside, *rack = (f"{n}-{suffix}" for n in ("a", "b", "c"))
    for node in (outside, *rack):
        cluster.node(node, cpu="4")
    term = {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": rack}]
    }
    cluster.create(
        f"{RESOURCE}/deviceclasses",
        {
            "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    slice_path = f"{RESOURCE}/resourceslices/{device_class}"
    cluster.create(
        f"{RESOURCE}/resourceslices",
        {
            "metadata": {"name": device_class},
            "spec": {
                "driver": driver,
                "nodeSelector": {"nodeSelectorTerms": [term]},
                "pool": {"name": "rack", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "switch-0"}],
            },
        },
    )
    claims = f"{RESOURCE}/namespaces/{cluster.namespace}/resourceclaims"
    request = {"name": "switch", "exactly": {"deviceClassName": device_class}}
    cluster.create(
        claims, {"metadata": {"name": "switch"}, "spec": {"devices": {"requests": [request]}}}
    )
    try:
        cluster.run_scheduler()

        def pod(name: str, node: str = "") -> None:
            body = cluster.pod_body(name, cpu="1")
            body["spec"]["resourceClaims"] = [{"name": "switch", "resourceClaimName": "switch"}]
            if node:
                fields = [{"key": "metadata.name", "operator": "In", "values": [node]}]
                body["spec"]["affinity"] = {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchFields": fields}]
                        }
                    }
                }
            cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods", body)

        pod("first")
        wait(lambda: cluster.node_of("first") in rack, timeout=90, what="first bound in the rack")
        claim = cluster.admin.json("GET", f"{claims}/switch")
        allocation = claim["status"]["allocation"]
        assert [r["device"] for r in allocation["devices"]["results"]] == ["switch-0"]
        assert allocation["nodeSelector"] == {"nodeSelectorTerms": [term]}
        other = next(n for n in rack if n != cluster.node_of("first"))
        pod("second", other)  # shares the claim on another node the selector allows
        wait(lambda: cluster.node_of("second") == other, timeout=90, what="second bound")
        claim = cluster.admin.json("GET", f"{claims}/switch")
        assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["first", "second"]
        cluster.stop_schedulers()  # and checks that RBAC refused nothing
    finally:
        _delete(cluster, (f"{RESOURCE}/deviceclasses/{device_class}", slice_path))


def test_a_gangs_members_get_devices_on_two_nodes_and_bind_together(cluster: Cluster) -> None:
    # Two nodes with one GPU each and a gang of two members, each with its own claim: CPU
    # would fit both on one node, the devices do not; both claims are allocated and written
    # before the members' Bindings, one per node.
    suffix = cluster.namespace[-6:]
    device_class = f"gg-{suffix}"
    driver = f"{device_class}.e2e.example.com"
    nodes = [f"ga-{suffix}", f"gb-{suffix}"]
    spec = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    published = [_publish(cluster, device_class, nodes[0], spec, [{"name": "gpu-0"}])]
    for node in nodes:
        cluster.node(node, cpu="8")
    published.append((_slice(cluster, device_class, nodes[1], [{"name": "gpu-0"}]), ""))
    ns = cluster.namespace
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class}}
    for i in range(2):
        cluster.create(
            f"{RESOURCE}/namespaces/{ns}/resourceclaims",
            {"metadata": {"name": f"m{i}-gpu"}, "spec": {"devices": {"requests": [request]}}},
        )
    try:
        cluster.run_scheduler()  # applies deploy/, the PodGroup CRD with it
        cluster.create(
            f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "pair"},
                "spec": {"minMember": 2},
            },
        )
        for i in range(2):
            body = cluster.pod_body(f"m{i}", labels={"scheduling.x-k8s.io/pod-group": "pair"})
            body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"m{i}-gpu"}]
            body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
            cluster.create(f"/api/v1/namespaces/{ns}/pods", body)
        wait(lambda: all(cluster.node_of(f"m{i}") for i in range(2)), timeout=90, what="bound")
        assert sorted(cluster.node_of(f"m{i}") for i in range(2)) == sorted(nodes)
        for i in range(2):
            claim = cluster.admin.json("GET", f"{RESOURCE}/namespaces/{ns}/resourceclaims/m{i}-gpu")
            [result] = claim["status"]["allocation"]["devices"]["results"]
            assert result["pool"] == cluster.node_of(f"m{i}")
            assert [r["name"] for r in claim["status"]["reservedFor"]] == [f"m{i}"]
        cluster.stop_schedulers()
    finally:
        for paths in published:
            _delete(cluster, paths)
