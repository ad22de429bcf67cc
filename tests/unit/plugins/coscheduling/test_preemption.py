"""Gang preemption, pass by pass: victims for the whole group or none, then a whole bind."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest

from batchsched.commands.cli import main
from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Bind, Evict, Nominate
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod, priority_class
from tests.builders import pod_group as group
from tests.conftest import NOW, objects_of
from tests.paths import ROOT


def cluster(**member_spec: Any) -> Scheduler:
    manifests = [
        priority_class("low", 10),
        priority_class("high", 1000),
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        pod("l-1", cpu="3", namespace="ml", node_name="n1", priority_class="low"),
        pod("l-2", cpu="3", namespace="ml", node_name="n2", priority_class="low"),
        group("big", 2),
    ]
    for i in range(2):
        manifests.append(
            pod(
                f"b-{i}",
                cpu="4",
                namespace="ml",
                labels={GROUP_LABEL: "big"},
                priority_class="high",
                **member_spec,
            )
        )
    return Scheduler(build_state(objects_of(*manifests)), default_config())


def test_victims_first_then_the_whole_group_binds() -> None:
    sched = cluster()
    first = sched.schedule_pass(NOW)
    assert sorted(d.pod for d in first if isinstance(d, Evict)) == ["ml/l-1", "ml/l-2"]
    assert sorted((d.pod, d.node) for d in first if isinstance(d, Nominate)) == [
        ("ml/b-0", "n1"),
        ("ml/b-1", "n2"),
    ]
    assert not [d for d in first if isinstance(d, Bind)]
    # The victims are still terminating: the group waits for them, nothing more is evicted.
    sched.queue.flush()
    second = sched.schedule_pass(NOW)
    assert not [d for d in second if isinstance(d, Evict | Bind)]
    assert "waiting for the victims of an earlier preemption" in sched.messages["ml/b-0"]
    for key in ("ml/l-1", "ml/l-2"):
        sched.state.remove_pod(key)
    third = sched.schedule_pass(NOW + timedelta(seconds=10))  # after the queue's backoff
    assert sorted((d.pod, d.node) for d in third if isinstance(d, Bind)) == [
        ("ml/b-0", "n1"),
        ("ml/b-1", "n2"),
    ]


def test_a_group_with_a_never_preempting_member_does_not_preempt() -> None:
    sched = cluster(preemptionPolicy="Never")
    decisions = sched.schedule_pass(NOW)
    assert not [d for d in decisions if isinstance(d, Evict)]
    # It has waited, so it reserves too (docs/backfill.md): its message ends with that.
    assert (
        "preemption: not eligible due to preemptionPolicy=Never. reserved "
        in (sched.messages["ml/b-1"])
    )


def test_without_a_preemption_plugin_a_group_only_waits() -> None:
    from batchsched.config import parse_config

    config = parse_config(
        {"profiles": [{"plugins": {"postFilter": {"disabled": [{"name": "*"}]}}}]}
    )
    sched = cluster()
    sched = Scheduler(sched.state, config)
    decisions = sched.schedule_pass(NOW)
    assert not [d for d in decisions if isinstance(d, Evict)]
    assert "preemption" not in sched.messages["ml/b-0"]


def test_preemption_example_takes_the_cheaper_single_pods(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = ROOT / "examples" / "gang" / "preemption.yaml"
    assert main(["schedule", str(example), "--now", "2026-11-22T10:00:00Z", "-o", "json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert {e["pod"]: e["node"] for e in out["evictions"]} == {"ml/s-4": "n4", "ml/s-5": "n5"}
    assert {b["pod"]: b["node"] for b in out["bindings"]} == {"ml/b-0": "n4", "ml/b-1": "n5"}
