"""Properties of DRA allocation through `batchsched schedule`: a device is never given to two
claims, every device given satisfies its request, and matchAttribute holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.objects.load import Objects
from batchsched.oneshot import run
from tests.conftest import NOW

SETTINGS = settings(max_examples=40, deadline=None)
DOMAIN = "gpu.example.com"

NODES = st.lists(
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2)), max_size=5),
    min_size=1,
    max_size=3,
)
PODS = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from(["", "a", "b"]), st.booleans()),
    min_size=1,
    max_size=8,
)


def _objects(nodes: list[list[tuple[str, int]]], pods: list[tuple[int, str, bool]]) -> Objects:
    objects = Objects()
    objects.add("DeviceClass", {"metadata": {"name": "gpu"}, "spec": {}})
    for n, devices in enumerate(nodes):
        name = f"n{n}"
        objects.add(
            "Node",
            {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "64", "pods": "110"}}},
        )
        objects.add(
            "ResourceSlice",
            {
                "metadata": {"name": name},
                "spec": {
                    "driver": DOMAIN,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"d{i}",
                            "attributes": {"model": {"string": model}, "link": {"int": link}},
                        }
                        for i, (model, link) in enumerate(devices)
                    ],
                },
            },
        )
    for p, (count, model, linked) in enumerate(pods):
        selectors = [{"cel": {"expression": f'device.attributes["{DOMAIN}"].model == "{model}"'}}]
        spec: dict[str, Any] = {
            "requests": [
                {
                    "name": "r",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "count": count,
                        "selectors": selectors if model else [],
                    },
                }
            ]
        }
        if linked:
            spec["constraints"] = [{"matchAttribute": f"{DOMAIN}/link"}]
        objects.add(
            "ResourceClaim",
            {"metadata": {"name": f"c{p}", "namespace": "ml"}, "spec": {"devices": spec}},
        )
        objects.add(
            "Pod",
            {
                "metadata": {"name": f"p{p}", "namespace": "ml"},
                "spec": {
                    "containers": [{"name": "c"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": f"c{p}"}],
                },
            },
        )
    return objects


@SETTINGS
@given(nodes=NODES, pods=PODS)
def test_allocations_are_exclusive_and_satisfy_their_requests(
    nodes: list[list[tuple[str, int]]], pods: list[tuple[int, str, bool]]
) -> None:
    output = run(_objects(nodes, pods), default_config(), NOW).to_json()
    bound = {b["pod"]: b["node"] for b in output["bindings"]}
    seen: set[str] = set()
    for entry in output["claims"]:
        p = int(entry["claim"].removeprefix("ml/c"))
        count, model, linked = pods[p]
        node = bound[f"ml/p{p}"]
        results = entry["status"]["allocation"]["devices"]["results"]
        assert len(results) == count
        links = set()
        for result in results:
            device_id = f"{result['pool']}/{result['device']}"
            assert device_id not in seen
            seen.add(device_id)
            assert result["pool"] == node
            device_model, link = nodes[int(node[1:])][int(result["device"][1:])]
            assert not model or device_model == model
            links.add(link)
        assert not linked or len(links) == 1
    # Every pod with a claim is either bound with its claim allocated, or pending.
    assert set(bound) == {f"ml/p{int(e['claim'].removeprefix('ml/c'))}" for e in output["claims"]}
