"""The manifests in deploy/: the shipped config loads, and RBAC grants exactly what a live
run uses (every request allowed, every granted verb needed)."""

from __future__ import annotations

import queue
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.config import parse_config
from batchsched.decisions import BindVolumes, Evict, PodGroupUpdate, Unschedulable
from batchsched.live.actuator import Actuator
from batchsched.live.claims import Consumer
from batchsched.live.events import EventRecorder
from batchsched.live.facts import Fact
from batchsched.live.metrics import Metrics
from batchsched.live.prebind import PreBinder, PreBindError
from batchsched.live.runner import LiveScheduler
from batchsched.live.serving import SECURE_PORT, Probes, ServingOptions, endpoints
from batchsched.live.settings import LiveSettings
from batchsched.objects.parse import read_node, read_pod, read_pod_group
from batchsched.objects.records import PodCondition, PodGroupStatus
from batchsched.objects.workload_api import read_upstream_pod_group
from batchsched.plugins.noderesources.fit import GPU_PACKING
from batchsched.state.cluster import ClusterState
from batchsched.state.volumes import ClaimBinding
from tests.live.conftest import (
    FAST_LEASE,
    Launcher,
    client_for,
    free_port,
    get,
    node,
    node_of,
    pod,
)
from tests.live.dra_objects import claim_pod, device_class, resource_claim, resource_slice
from tests.live.fake_apiserver import UPSTREAM_BETA, FakeApiServer, parse_path

DEPLOY = Path(__file__).parents[2] / "deploy"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _shipped_config() -> dict[str, Any]:
    [configmap] = _docs("config.yaml")
    return dict(yaml.safe_load(configmap["data"]["config.yaml"]))


def test_the_shipped_config_loads_and_packs_gpus() -> None:
    config = parse_config(_shipped_config())
    settings = LiveSettings.from_config(config)
    assert settings.leader_election.namespace == "batchsched-system"
    [fit] = [
        c["args"]
        for c in _shipped_config()["profiles"][0]["pluginConfig"]
        if c["name"] == "NodeResourcesFit"
    ]
    assert fit["scoringStrategy"]["type"] == "MostAllocated"
    # The deployed scoring is the built-in default, written out for administrators to edit.
    assert fit["scoringStrategy"] == GPU_PACKING
    [deployment] = _docs("deployment.yaml")
    assert deployment["spec"]["replicas"] == 2


def test_the_kustomization_applies_every_manifest_and_names_nothing_system() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    on_disk = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == on_disk
    assert [i["name"] for i in kustomization["images"]] == ["batchsched"]
    kinds = set()
    for name in kustomization["resources"]:
        for doc in _docs(name):
            kinds.add(doc["kind"])
            # Names starting `system-` are reserved (a real API server refuses them).
            assert not doc["metadata"]["name"].startswith("system-"), (name, doc["metadata"])
    assert "PriorityClass" not in kinds  # cluster-wide examples are opt-in
    assert {"Service", "PodDisruptionBudget", "Deployment"} <= kinds


def test_the_podgroup_crd_is_an_optional_component_never_in_the_default() -> None:
    """Applying deploy/ over a scheduler-plugins install must not replace its PodGroup schema,
    and `kubectl delete -k deploy/` must not delete the CRD with every PodGroup in it."""
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    crds = [d for name in kustomization["resources"] for d in _docs(name)]
    crds = [d["metadata"]["name"] for d in crds if d["kind"] == "CustomResourceDefinition"]
    assert crds == ["queues.batchsched.io"]  # batchsched's own CRD only
    assert "components" not in kustomization
    component = DEPLOY / "components" / "podgroup-crd"
    spec = yaml.safe_load((component / "kustomization.yaml").read_text())
    assert (spec["apiVersion"], spec["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    [crd] = [d for name in spec["resources"] for d in _docs(f"components/podgroup-crd/{name}")]
    assert crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (its kustomize) not on PATH")
def test_kubectl_renders_deploy_without_the_crd_and_the_component_alone() -> None:
    def kinds(path: Path) -> list[str]:
        done = subprocess.run(
            ["kubectl", "kustomize", str(path)], capture_output=True, text=True, check=True
        )
        return [d["kind"] for d in yaml.safe_load_all(done.stdout) if d]

    assert kinds(DEPLOY).count("CustomResourceDefinition") == 1  # the Queue CRD
    assert kinds(DEPLOY / "components" / "podgroup-crd") == ["CustomResourceDefinition"]


def test_the_example_priority_classes_load_with_prefixed_names() -> None:
    from batchsched.objects.parse import read_priority_class

    docs = _docs("examples/priorityclasses/priorityclasses.yaml")
    classes = {pc.name: pc for pc in map(read_priority_class, docs)}
    assert {name: pc.value for name, pc in classes.items()} == {
        "batchsched-critical": 10000,
        "batchsched-high": 9000,
        "batchsched-low-non-preempted": 8000,
        "batchsched-low-non-preempted-10min": 8000,
        "batchsched-low": 8000,
    }
    prefix = "preemption-toleration.scheduling.x-k8s.io/"
    ten_minutes = classes["batchsched-low-non-preempted-10min"]
    assert ten_minutes.annotations[f"{prefix}toleration-seconds"] == "600"


def _grants() -> set[tuple[str, str, str, str, str]]:
    """(namespace or '*', group, resource, verb, name or '*') granted to the ServiceAccount."""
    out = set()
    for doc in _docs("rbac.yaml"):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        scope = doc["metadata"].get("namespace", "*")
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames", ["*"]):
                            out.add((scope, group, resource, verb, name))
    return out


def _allowed(grants: set[tuple[str, str, str, str, str]], request: tuple[str, ...]) -> bool:
    namespace, group, resource, verb, name = request
    return any(
        g[1:4] == (group, resource, verb) and g[0] in ("*", namespace) and g[4] in ("*", name)
        for g in grants
    )


# Grants the API server checks on a request to another path: changing a claim's allocation or
# reservedFor (a patch of resourceclaims/status) needs `patch` on resourceclaims/binding.
SYNTHETIC = {("resource.k8s.io", "resourceclaims/binding", "patch")}


def test_rbac_grants_exactly_what_a_live_run_uses(api: FakeApiServer, launch: Launcher) -> None:
    shipped = _shipped_config()
    shipped["leaderElection"] = {**FAST_LEASE, "resourceNamespace": "batchsched-system"}
    api.missing.discard(UPSTREAM_BETA)  # a 1.37 cluster serving upstream's PodGroups
    api.create("nodes", node("n1", cpu="1"))
    api.create("pods", pod("fits"))
    api.create("pods", pod("too-big", cpu="4"))
    queue = {"apiVersion": "batchsched.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}}
    api.create("queues", queue)  # its status is written
    gpu = device_class()
    gpu["spec"]["extendedResourceName"] = "example.com/gpu"
    api.create("deviceclasses", gpu)
    api.create("resourceslices", resource_slice("n1", "gpu-0", "gpu-1"))
    api.create("resourceclaims", resource_claim("gpu"))
    dra = claim_pod("dra", claim="gpu")
    dra["spec"]["containers"][0]["resources"]["requests"] = {}
    api.create("pods", dra)  # PreBind writes the claim
    extended = pod("extended", cpu="0")
    extended["spec"]["containers"][0]["resources"]["limits"] = {"example.com/gpu": "1"}
    api.create("pods", extended)  # PreBind creates its claim, deleted when the Binding fails
    api.inject(403, count=1, method="POST", path="/pods/extended/binding")
    run = launch(parse_config(shipped), identity="a")
    assert api.wait_for(lambda s: node_of(s, "fits") == "n1")
    assert api.wait_for(lambda s: node_of(s, "dra") == "n1")
    assert api.wait_for(lambda s: node_of(s, "extended") == "n1")
    assert api.wait_for(lambda s: s.get("pods", "too-big")["status"].get("conditions"))  # type: ignore[index]
    assert api.wait_for(lambda s: s.get("queues", "q").get("status"))  # type: ignore[union-attr]
    _scrape_metrics(api, run.scheduler)
    assert run.halt() == 0
    _preempt_and_update_a_group(api)
    _bind_volumes_in_vain(api)

    grants = _grants()
    used = set()
    for verb, path in api.verbs:
        parts = parse_path(path)
        assert parts is not None
        resource = parts["plural"] + (f"/{parts['sub']}" if parts["sub"] else "")  # type: ignore[operator]
        request = (parts["ns"] or "*", parts["group"], resource, verb, parts["name"] or "*")
        assert _allowed(grants, request), f"not granted: {verb} {path}"  # type: ignore[arg-type]
        used.add((parts["group"], resource, verb))
    unused = {g[1:4] for g in grants} - used - SYNTHETIC
    assert not unused, f"granted but never used: {sorted(unused)}"


def _scrape_metrics(api: FakeApiServer, scheduler: LiveScheduler) -> None:
    """A Prometheus reads /metrics over HTTPS: its token and grant are reviewed."""
    api.tokens["prometheus"] = {"username": "system:serviceaccount:monitoring:prometheus"}
    api.grants.add(("system:serviceaccount:monitoring:prometheus", "/metrics", "get"))
    probes = Probes(scheduler.metrics.exposition, scheduler.healthy, scheduler.ready)
    options = ServingOptions("127.0.0.1", free_port())
    [server] = endpoints(options, probes, scheduler.client)
    server.start()
    try:
        url = f"https://127.0.0.1:{server.port}/metrics"
        assert get(url, token="prometheus")[0] == 200
    finally:
        server.stop()


def _bind_volumes_in_vain(api: FakeApiServer) -> None:
    """VolumeBinding's PreBind writes a PV's claimRef and a claim's selected node, waits for
    a PV controller that never comes (no wait: bindTimeoutSeconds 0) and undoes both."""
    for name in ("data", "scratch"):
        api.create("persistentvolumeclaims", {"metadata": {"name": name, "namespace": "default"}})
    api.create("persistentvolumes", {"metadata": {"name": "pv"}, "spec": {}})
    bindings = (
        ClaimBinding("default/p", "default/data", "n1", "pv"),
        ClaimBinding("default/p", "default/scratch", "n1", ""),
    )
    with pytest.raises(PreBindError, match="timed out"):
        pod = Consumer("default", "p", "uid-p")
        PreBinder(client_for(api), lambda: True).run([BindVolumes(bindings, 0)], pod)


def _preempt_and_update_a_group(api: FakeApiServer) -> None:
    client = client_for(api)
    state = ClusterState()
    state.upsert_node(read_node(api.get("nodes", "n1")))  # type: ignore[arg-type]
    state.upsert_pod(read_pod(api.get("pods", "fits")))  # type: ignore[arg-type]
    state.upsert_pod(read_pod(api.get("pods", "too-big")))  # type: ignore[arg-type]
    group = {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 1}}
    state.upsert_pod_group(read_pod_group(api.create("podgroups", group)))
    upstream = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}},
    }
    state.upsert_pod_group(read_upstream_pod_group(api.create(UPSTREAM_BETA, upstream)))
    scheduled = PodCondition("PodGroupInitiallyScheduled", "True", None, "Scheduled")
    events = EventRecorder(client, "batchsched", "a", series_interval=0.0)
    feedback: queue.Queue[Fact] = queue.Queue()
    actuator = Actuator(client, events, feedback, Metrics(), lambda: True)
    decisions = [
        Evict("default/fits", "n1", "default/too-big", "preempted"),
        PodGroupUpdate("default/g", PodGroupStatus(phase="Scheduling")),
        PodGroupUpdate("default/w", PodGroupStatus(conditions=(scheduled,))),
        Unschedulable("default/too-big", "0/1 nodes are available: 1 Insufficient cpu."),
    ]
    actuator.apply(decisions, state, {})  # type: ignore[arg-type]
    actuator.apply(decisions[-1:], state, {})  # a repeat updates the event series
    actuator.wait()
    actuator.shutdown()
    events.close()


def test_the_deployment_serves_https_and_meets_the_restricted_standard() -> None:
    [namespace] = _docs("namespace.yaml")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    [deployment] = _docs("deployment.yaml")
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    [container] = pod_spec["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["ports"] == [{"name": "https", "containerPort": SECURE_PORT}]
    assert f"--secure-port={SECURE_PORT}" in container["args"]
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    [service] = _docs("service.yaml")
    assert service["spec"]["ports"] == [{"name": "https", "port": 10259, "targetPort": "https"}]
    [reader] = _docs("metrics-reader.yaml")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
