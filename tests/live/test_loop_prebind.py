"""VolumeBinding's PreBind in live mode: WaitForFirstConsumer claims are bound at scheduling
time (a PV's claimRef, or a claim's selected node), the Binding waits for the PV controller
(played here by a thread), and a PreBind that fails is undone and tried again."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.live.conftest import Launcher, condition, config, node_of, pod
from tests.live.fake_apiserver import WAIT_SECONDS, ApiFailure, FakeApiServer
from tests.live.test_loop_volumes import _claim_pod, _labelled, _local_pv

SELECTED = "volume.kubernetes.io/selected-node"
COMPLETED = "pv.kubernetes.io/bind-completed"


class PvController:
    """Binds claims as kube-controller-manager's PV controller does, once `running` is set:
    a PV whose claimRef names an unbound claim gets it; a claim with a selected node gets
    a new local PV there (the provisioner), unless `refuse_provisioning` (then the
    provisioner drops the annotation, asking the scheduler to choose again); if
    `provision_elsewhere`, the new PV is on another node than the one selected."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api
        self.running = threading.Event()
        self.refuse_provisioning = False
        self.provision_elsewhere = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_SECONDS)

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            if self.running.is_set():
                with contextlib.suppress(ApiFailure):  # a conflict: read again next time
                    self._sync()

    def _sync(self) -> None:
        for pv in self.api.objects("persistentvolumes"):
            ref = pv["spec"].get("claimRef")
            if ref and pv.get("status", {}).get("phase") != "Bound":
                self._bind(pv, ref["name"])
        for claim in self.api.objects("persistentvolumeclaims"):
            annotations = claim["metadata"].get("annotations") or {}
            node = annotations.get(SELECTED)
            if node is None or claim["spec"].get("volumeName"):
                continue
            if self.refuse_provisioning:
                del annotations[SELECTED]
                self.api.update("persistentvolumeclaims", claim)
                continue
            name = f"pvc-{claim['metadata']['name']}"
            if self.provision_elsewhere:
                node = "n1" if node != "n1" else "n2"
            made = _local_pv(name, node)
            made["spec"]["claimRef"] = {"name": claim["metadata"]["name"], "namespace": "default"}
            self._bind(self.api.create("persistentvolumes", made), claim["metadata"]["name"])

    def _bind(self, pv: dict[str, Any], claim_name: str) -> None:
        claim = self.api.get("persistentvolumeclaims", claim_name)
        assert claim is not None
        pv["status"] = {"phase": "Bound"}
        self.api.update("persistentvolumes", pv)
        claim["spec"]["volumeName"] = pv["metadata"]["name"]
        claim["metadata"].setdefault("annotations", {})[COMPLETED] = "yes"
        claim["status"] = {"phase": "Bound"}
        self.api.update("persistentvolumeclaims", claim)


@pytest.fixture
def controller(api: FakeApiServer) -> Iterator[PvController]:
    running = PvController(api)
    yield running
    running.stop()


def _cluster(api: FakeApiServer, provisioner: str, pv_on: str = "") -> None:
    """Nodes n1-n3, a WaitForFirstConsumer class, the claim `data`, a pod `train` using it
    and, if `pv_on`, a local PV `local-<node>` of the class there."""
    for name in ("n1", "n2", "n3"):
        api.create("nodes", _labelled(name))
    storage_class = {
        "metadata": {"name": "local"},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    api.create("storageclasses", storage_class)
    claim = {
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {
            "storageClassName": "local",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    api.create("persistentvolumeclaims", claim)
    if pv_on:
        pv = _local_pv(f"local-{pv_on}", pv_on)
        pv["spec"].update(
            storageClassName="local", accessModes=["ReadWriteOnce"], capacity={"storage": "1Gi"}
        )
        api.create("persistentvolumes", pv)
    api.create("pods", _claim_pod("train", "data"))


def _claim(api: FakeApiServer) -> dict[str, Any]:
    claim = api.get("persistentvolumeclaims", "data")
    assert claim is not None
    return claim


def _failure(api: FakeApiServer, text: str) -> str:
    """The message of the pod's PodScheduled condition, once it says `text`: as it said then,
    since the pod is tried again at once and its condition moves on (read again later, it
    may already say that the pod was bound)."""
    said: list[str] = []

    def failed(s: FakeApiServer) -> bool:
        cond = condition(s, "train")
        if cond is None or text not in cond.get("message", ""):
            return False
        said.append(str(cond["message"]))
        return True

    assert api.wait_for(failed)
    return said[-1]


def test_a_claim_is_bound_to_the_chosen_nodes_pv_while_the_loop_goes_on(
    api: FakeApiServer, launch: Launcher, controller: PvController
) -> None:
    _cluster(api, "kubernetes.io/no-provisioner", pv_on="n2")
    run = launch(config(podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.1))
    # PreBind wrote the claimRef and waits for the PV controller: the pod is not bound yet,
    # and another pod is scheduled meanwhile.
    assert api.wait_for(lambda s: s.get("persistentvolumes", "local-n2")["spec"].get("claimRef"))  # type: ignore[index]
    api.create("pods", pod("other"))
    assert api.wait_for(lambda s: node_of(s, "other") != "")
    assert node_of(api, "train") == ""
    ref = api.get("persistentvolumes", "local-n2")["spec"]["claimRef"]  # type: ignore[index]
    assert (ref["namespace"], ref["name"], ref["uid"]) == (
        "default",
        "data",
        _claim(api)["metadata"]["uid"],
    )
    controller.running.set()
    assert api.wait_for(lambda s: node_of(s, "train") == "n2")
    assert _claim(api)["spec"]["volumeName"] == "local-n2"
    assert run.halt() == 0


def test_a_claim_to_provision_gets_the_chosen_node(
    api: FakeApiServer, launch: Launcher, controller: PvController
) -> None:
    controller.running.set()
    _cluster(api, "example.com/local-csi")
    run = launch()
    assert api.wait_for(lambda s: node_of(s, "train") != "")
    claim = _claim(api)
    assert claim["metadata"]["annotations"][SELECTED] == node_of(api, "train")
    assert claim["spec"]["volumeName"] == "pvc-data"
    assert run.halt() == 0


def test_a_prebind_that_times_out_is_undone_and_tried_again(
    api: FakeApiServer, launch: Launcher, controller: PvController
) -> None:
    _cluster(api, "kubernetes.io/no-provisioner", pv_on="n3")
    volume_binding = {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 1}}
    cfg = config(profiles=[{"schedulerName": "batchsched", "pluginConfig": [volume_binding]}])
    run = launch(cfg)
    assert api.wait_for(lambda s: condition(s, "train") is not None)
    cond = condition(api, "train")
    assert cond is not None and cond["reason"] == "SchedulerError"
    assert cond["message"] == (
        'running PreBind plugin "VolumeBinding": binding volumes: timed out after 1s waiting '
        "for the PV controller to bind the claims (bindTimeoutSeconds)"
    )
    assert node_of(api, "train") == ""
    # The claimRef written was taken back (the pod is tried again and writes it anew).
    versions = {"set": 0, "cleared": 0}

    def watch(s: FakeApiServer) -> bool:
        ref = s.get("persistentvolumes", "local-n3")["spec"].get("claimRef")  # type: ignore[index]
        versions["cleared" if ref is None else "set"] += 1
        return versions["cleared"] > 0 and versions["set"] > 0

    assert api.wait_for(watch)
    controller.running.set()
    assert api.wait_for(lambda s: node_of(s, "train") == "n3")  # after its backoff
    assert run.halt() == 0


def test_a_provisioner_that_drops_the_node_makes_the_pod_try_again(
    api: FakeApiServer, launch: Launcher, controller: PvController
) -> None:
    controller.refuse_provisioning = True
    controller.running.set()
    _cluster(api, "example.com/local-csi")
    run = launch()
    assert _failure(api, "provisioning failed") == (
        'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for '
        'persistentvolumeclaim "default/data"'
    )
    assert node_of(api, "train") == ""
    controller.refuse_provisioning = False
    assert api.wait_for(lambda s: node_of(s, "train") != "")
    assert run.halt() == 0


def test_a_pv_provisioned_on_another_node_fails_the_prebind(
    api: FakeApiServer, launch: Launcher, controller: PvController
) -> None:
    controller.provision_elsewhere = True
    controller.running.set()
    _cluster(api, "example.com/local-csi")
    run = launch(config(podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.1))
    message = _failure(api, "node affinity")
    selected = _claim(api)["metadata"]["annotations"][SELECTED]
    assert message == (
        'running PreBind plugin "VolumeBinding": binding volumes: pv "pvc-data" node affinity '
        f'doesn\'t match node "{selected}": no matching NodeSelectorTerms'
    )
    # The claim stays bound to its PV, so the pod follows the PV when it is tried again.
    pv_node = "n1" if selected != "n1" else "n2"
    assert api.wait_for(lambda s: node_of(s, "train") == pv_node)
    assert run.halt() == 0


def test_provisioning_waits_for_published_capacity(
    api: FakeApiServer, launch: Launcher, controller: PvController
) -> None:
    controller.running.set()
    csi_driver = {"metadata": {"name": "local.csi.example.com"}, "spec": {"storageCapacity": True}}
    api.create("csidrivers", csi_driver)
    _cluster(api, "local.csi.example.com")
    run = launch(config(podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.1))
    assert api.wait_for(lambda s: condition(s, "train") is not None)
    cond = condition(api, "train")
    assert cond is not None and "3 node(s) did not have enough free storage" in cond["message"]
    capacity = {
        "metadata": {"name": "n2-pool", "namespace": "kube-system"},
        "storageClassName": "local",
        "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": "n2"}},
        "capacity": "10Gi",
    }
    api.create("csistoragecapacities", capacity)
    assert api.wait_for(lambda s: node_of(s, "train") == "n2")
    assert _claim(api)["metadata"]["annotations"][SELECTED] == "n2"
    assert run.halt() == 0
