"""Extended resources served by DRA (KEP-5004): the device requests and mappings made from a
pod's containers, as upstream's createRequestsAndMappings names them."""

from __future__ import annotations

from typing import Any

from batchsched.objects.parse import read_pod
from batchsched.plugins.dynamicresources.extended import extended_claim, mapped_requests

GPU = "example.com/gpu"
CLASSES = {GPU: "gpu", "example.com/nic": "nic"}


def _container(name: str, gpus: int, sidecar: bool = False, nics: int = 0) -> dict[str, Any]:
    requests = {"cpu": "100m", GPU: str(gpus)} | ({"example.com/nic": str(nics)} if nics else {})
    out: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def _pod(inits: list[dict[str, Any]], containers: list[dict[str, Any]]) -> Any:
    spec = {"initContainers": inits, "containers": containers}
    return read_pod({"metadata": {"name": "p", "namespace": "ml"}, "spec": spec})


def _requests(pod: Any, resources: set[str]) -> list[tuple[str, str, int]]:
    found = extended_claim(pod, resources, CLASSES)
    assert found is not None
    return [
        (r.name, r.alternatives[0].device_class, r.alternatives[0].count)
        for r in found.claim.requests
    ]


def _mappings(pod: Any, resources: set[str]) -> list[tuple[str, str, str]]:
    found = extended_claim(pod, resources, CLASSES)
    assert found is not None
    return [(m.container, m.resource, m.request) for m in found.mappings]


def test_a_request_per_container_named_by_positions() -> None:
    pod = _pod([], [_container("a", 1), _container("b", 2, nics=1)])
    assert pod.requests[GPU] == 3
    assert mapped_requests(pod, CLASSES) == {GPU, "example.com/nic"}
    # b's requests sorted: cpu, example.com/gpu, example.com/nic.
    assert _requests(pod, {GPU, "example.com/nic"}) == [
        ("container-0-request-1", "gpu", 1),
        ("container-1-request-1", "gpu", 2),
        ("container-1-request-2", "nic", 1),
    ]
    # Only the resources the node leaves to DRA become requests.
    assert _requests(pod, {"example.com/nic"}) == [("container-1-request-2", "nic", 1)]
    assert extended_claim(pod, set(), CLASSES) is None


def test_init_containers_reuse_later_devices_and_share_the_largest_request() -> None:
    pod = _pod(
        [_container("setup", 3), _container("warm", 1), _container("side", 1, sidecar=True)],
        [_container("main", 2)],
    )
    # setup (index 0) may use the sidecar's and main's devices (1 + 2 = 3): no request of
    # its own. warm (index 1) is covered by the sidecar's one. The long-lived ones ask.
    assert _requests(pod, {GPU}) == [
        ("container-2-request-1", "gpu", 1),
        ("container-3-request-1", "gpu", 2),
    ]
    assert _mappings(pod, {GPU}) == [
        ("side", GPU, "container-2-request-1"),
        ("main", GPU, "container-3-request-1"),
        ("setup", GPU, "container-2-request-1"),
        ("setup", GPU, "container-3-request-1"),
        ("warm", GPU, "container-2-request-1"),
    ]


def test_init_containers_needing_more_than_the_rest_share_one_request() -> None:
    pod = _pod([_container("big", 4), _container("small", 2)], [_container("main", 1)])
    # big needs 4 - 1 = 3 more, small 2 - 1 = 1 more; they run one after another, so one
    # request of 3 serves both.
    assert _requests(pod, {GPU}) == [
        ("container-0-request-1", "gpu", 3),
        ("container-2-request-1", "gpu", 1),
    ]
    assert _mappings(pod, {GPU}) == [
        ("main", GPU, "container-2-request-1"),
        ("big", GPU, "container-2-request-1"),
        ("big", GPU, "container-0-request-1"),
        ("small", GPU, "container-2-request-1"),
        ("small", GPU, "container-0-request-1"),
    ]
