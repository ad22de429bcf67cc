"""The simulator runs the very same core: one snapshot through `batchsched schedule` and
through one simulator step gives the same bindings and evictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.config import default_config
from batchsched.decisions import Bind, Evict
from batchsched.objects.load import load_files
from batchsched.objects.parse import parse_time
from batchsched.sim.engine import Simulation
from tests.builders import node, pod, priority_class

NOW = "2026-11-22T10:00:00Z"
TOLERANT = {
    "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "10000",
    "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "600",
}


def gpu_pod(name: str, gpus: str, cls: str, **kw: Any) -> dict[str, Any]:
    return pod(
        name,
        cpu="4",
        memory="8Gi",
        priority_class=cls,
        extra_requests={"nvidia.com/gpu": gpus},
        **kw,
    )


def running_gpu_pod(name: str, gpus: str, cls: str, node_name: str, since: str) -> dict[str, Any]:
    return gpu_pod(name, gpus, cls, node_name=node_name, phase="Running", scheduled_at=since)


SNAPSHOTS = {
    "ordinary": [
        priority_class("high", 9000),
        priority_class("low", 8000),
        node("gpu-a", cpu="32", memory="256Gi", nvidia__com_gpu="8"),
        node(
            "gpu-b",
            cpu="32",
            memory="256Gi",
            nvidia__com_gpu="8",
            taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        ),
        node("cpu-1", cpu="16", memory="64Gi"),
        running_gpu_pod("running", "4", "low", "gpu-a", "2026-11-22T09:00:00Z"),
        gpu_pod("fits", "4", "low"),
        gpu_pod("too-big", "16", "high"),
        gpu_pod("tolerates", "8", "low", tolerations=[{"key": "gpu", "operator": "Exists"}]),
        pod("web", cpu="2", memory="1Gi", priority_class="high"),
    ],
    "preemption": [
        priority_class("high", 9000),
        priority_class("low", 8000),
        priority_class("low-non-preempted-10min", 8000, annotations=TOLERANT),
        node("gpu-a", cpu="32", memory="256Gi", nvidia__com_gpu="8"),
        node("gpu-b", cpu="32", memory="256Gi", nvidia__com_gpu="8"),
        running_gpu_pod("old-low", "8", "low", "gpu-a", "2026-11-22T09:00:00Z"),
        running_gpu_pod(
            "fresh-tolerant", "8", "low-non-preempted-10min", "gpu-b", "2026-11-22T09:55:00Z"
        ),
        gpu_pod("urgent", "8", "high"),
    ],
}


@pytest.mark.parametrize("snapshot", sorted(SNAPSHOTS))
def test_schedule_and_one_simulator_step_agree(
    snapshot: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": SNAPSHOTS[snapshot]})
    )
    assert main(["schedule", str(path), "--now", NOW, "-o", "json"]) == 0
    live = orjson.loads(capsys.readouterr().out)

    objects = load_files([path])
    sim = Simulation(
        "agree", objects.nodes, objects.priority_classes, [], default_config(), parse_time(NOW)
    )
    for p in objects.pods:
        sim.add_pod(p)
    decisions = sim.step()

    evictions = sorted((d.pod, d.node, d.preemptor) for d in decisions if isinstance(d, Evict))
    assert evictions == sorted((e["pod"], e["node"], e["preemptor"]) for e in live["evictions"])
    # One-shot removes victims at once and binds their preemptors in a later pass; the simulator
    # binds them once the victims' grace period is over.
    preemptors = {e["preemptor"] for e in live["evictions"]}
    bindings = sorted((d.pod, d.node) for d in decisions if isinstance(d, Bind))
    assert bindings == sorted(
        (b["pod"], b["node"]) for b in live["bindings"] if b["pod"] not in preemptors
    )
    if not evictions:
        # With nothing evicted the two worlds are in the same place: same pods left, same words.
        messages = {key: sim.scheduler.messages[key] for key in sim.state.pods.pending}
        assert messages == {u["pod"]: u["message"] for u in live["unschedulable"]}
