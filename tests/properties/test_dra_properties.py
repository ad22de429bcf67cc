"""Properties of DRA allocation through `batchsched schedule`: a device is never given to two
claims (also one of a pool every node shares), every device given satisfies its request and
is usable on the pod's node, and matchAttribute and distinctAttribute hold; gangs whose members
have claims bind all or none, and devices are given back when they do not."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import run
from batchsched.config import default_config
from batchsched.objects.load import Objects
from batchsched.objects.podgroup import GROUP_LABEL
from tests.conftest import NOW

SETTINGS = settings(max_examples=40, deadline=None)
DOMAIN = "gpu.example.com"
CONSTRAINTS = ["", "matchAttribute", "distinctAttribute"]

DEVICES = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2)), max_size=5)
# Per node its devices; the last entry is the pool every node shares (allNodes).
NODES = st.lists(DEVICES, min_size=2, max_size=4)
PODS = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from(["", "a", "b"]), st.sampled_from(CONSTRAINTS)),
    min_size=1,
    max_size=8,
)
SHARED = "shared"


def _slice(name: str, where: dict[str, Any], devices: list[tuple[str, int]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": DOMAIN,
            **where,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"d{i}", "attributes": {"model": {"string": model}, "link": {"int": link}}}
                for i, (model, link) in enumerate(devices)
            ],
        },
    }


def _objects(
    nodes: list[list[tuple[str, int]]],
    pods: list[tuple[int, str, str]],
    groups: list[int] | None = None,
    sharing: frozenset[int] = frozenset(),
) -> Objects:
    """Pod p asks for claim c{p}; with `groups`, pod p is a member of PodGroup g{groups[p]}
    (0: none; each group needs all its members), and the pods in `sharing` also share the
    claim `s` (one device)."""
    objects = Objects()
    members = Counter(g for g in groups or () if g)
    for g, count in sorted(members.items()):
        objects.add(
            "PodGroup",
            {"metadata": {"name": f"g{g}", "namespace": "ml"}, "spec": {"minMember": count}},
        )
    if sharing:
        objects.add(
            "ResourceClaim",
            {
                "metadata": {"name": "s", "namespace": "ml"},
                "spec": {
                    "devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}
                },
            },
        )
    objects.add("DeviceClass", {"metadata": {"name": "gpu"}, "spec": {}})
    *local, shared = nodes
    for n, devices in enumerate(local):
        name = f"n{n}"
        objects.add(
            "Node",
            {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "64", "pods": "110"}}},
        )
        objects.add("ResourceSlice", _slice(name, {"nodeName": name}, devices))
    objects.add("ResourceSlice", _slice(SHARED, {"allNodes": True}, shared))
    for p, (count, model, constraint) in enumerate(pods):
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
        if constraint:
            spec["constraints"] = [{constraint: f"{DOMAIN}/link"}]
        objects.add(
            "ResourceClaim",
            {"metadata": {"name": f"c{p}", "namespace": "ml"}, "spec": {"devices": spec}},
        )
        claims = [{"name": "gpu", "resourceClaimName": f"c{p}"}]
        if p in sharing:
            claims.append({"name": "shared", "resourceClaimName": "s"})
        metadata: dict[str, Any] = {"name": f"p{p}", "namespace": "ml"}
        if groups and groups[p]:
            metadata["labels"] = {GROUP_LABEL: f"g{groups[p]}"}
        objects.add(
            "Pod",
            {
                "metadata": metadata,
                "spec": {"containers": [{"name": "c"}], "resourceClaims": claims},
            },
        )
    return objects


@SETTINGS
@given(nodes=NODES, pods=PODS)
def test_allocations_are_exclusive_and_satisfy_their_requests(
    nodes: list[list[tuple[str, int]]], pods: list[tuple[int, str, str]]
) -> None:
    output = run(_objects(nodes, pods), default_config(), NOW).to_json()
    bound = {b["pod"]: b["node"] for b in output["bindings"]}
    seen: set[str] = set()
    for entry in output["claims"]:
        p = int(entry["claim"].removeprefix("ml/c"))
        count, model, constraint = pods[p]
        node = bound[f"ml/p{p}"]
        allocation = entry["status"]["allocation"]
        results = allocation["devices"]["results"]
        assert len(results) == count
        links = set()
        for result in results:
            device_id = f"{result['pool']}/{result['device']}"
            assert device_id not in seen
            seen.add(device_id)
            assert result["pool"] in (node, SHARED)
            pool = nodes[-1] if result["pool"] == SHARED else nodes[int(node[1:])]
            device_model, link = pool[int(result["device"][1:])]
            assert not model or device_model == model
            links.add(link)
        assert constraint != "matchAttribute" or len(links) == 1
        assert constraint != "distinctAttribute" or len(links) == count
        # Pinned to the node exactly when a device is the node's own.
        local = any(r["pool"] == node for r in results)
        assert ("nodeSelector" in allocation) == local
    # Every pod with a claim is either bound with its claim allocated, or pending.
    assert set(bound) == {f"ml/p{int(e['claim'].removeprefix('ml/c'))}" for e in output["claims"]}


@SETTINGS
@given(
    nodes=NODES,
    pods=PODS,
    groups=st.lists(st.integers(0, 2), min_size=8, max_size=8),
    sharing=st.frozensets(st.integers(0, 7), max_size=3),
)
def test_gangs_with_claims_bind_all_or_none_and_never_share_a_device(
    nodes: list[list[tuple[str, int]]],
    pods: list[tuple[int, str, str]],
    groups: list[int],
    sharing: frozenset[int],
) -> None:
    groups = groups[: len(pods)]
    sharing = frozenset(p for p in sharing if p < len(pods))
    output = run(_objects(nodes, pods, groups, sharing), default_config(), NOW).to_json()
    bound = {b["pod"]: b["node"] for b in output["bindings"]}
    for g in set(groups) - {0}:
        members = {f"ml/p{p}" for p, group in enumerate(groups) if group == g}
        assert members <= set(bound) or not members & set(bound), f"gang g{g} bound partly"
    seen: set[str] = set()
    holders: dict[str, list[str]] = {}
    for entry in output["claims"]:
        status = entry["status"]
        reserved = [f"ml/{r['name']}" for r in status["reservedFor"]]
        assert reserved and all(pod in bound for pod in reserved), "devices held for no bound pod"
        for result in status["allocation"]["devices"]["results"]:
            device_id = f"{result['pool']}/{result['device']}"
            assert device_id not in seen, f"{device_id} allocated twice"
            seen.add(device_id)
            # A node's own device serves only pods on that node (the shared pool any node).
            assert result["pool"] == SHARED or all(bound[pod] == result["pool"] for pod in reserved)
        holders[entry["claim"]] = reserved
    # A pod bound has every claim it names allocated; the shared one once, for all its pods.
    for pod in bound:
        p = int(pod.removeprefix("ml/p"))
        assert f"ml/c{p}" in holders
        if p in sharing:
            assert pod in holders["ml/s"]
