"""Broken promises (docs/backfill.md#broken-promises), one rule per test: a pod running past
the runtime it stated by label or annotation is evicted for a reservation whose start has
come, whatever its priority; nothing else is."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Decision, Evict, Nominate, Unschedulable
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod_group, priority_class
from tests.conftest import NOW, objects_of
from tests.unit.plugins.backfill.pods import running, waiting


def _running(
    name: str,
    on: str,
    count: int,
    started: str = "2026-11-22T08:30:00Z",
    runtime: str | None = "1h",
    **extra: Any,
) -> dict[str, Any]:
    """A pod on `on` since `started` (by default it stated 1 h: 30 minutes past it at NOW)."""
    return running(name, count, runtime, on=on, started=started, **extra)


def _waiting(name: str = "big", count: int = 8, **extra: Any) -> dict[str, Any]:
    return waiting(name, count, **extra)


def _pass(*manifests: dict[str, Any], at: timedelta = timedelta()) -> list[Decision]:
    state = build_state(objects_of(*manifests))
    return Scheduler(state, default_config()).schedule_pass(NOW + at)


def _evicted(decisions: list[Decision]) -> list[str]:
    return sorted(d.pod for d in decisions if isinstance(d, Evict))


def _message(decisions: list[Decision], key: str) -> str:
    return next(d.message for d in decisions if isinstance(d, Unschedulable) and d.pod == key)


def test_a_pod_past_its_stated_runtime_goes_whatever_its_priority() -> None:
    decisions = _pass(
        node("n1", nvidia_com__gpu="8"),
        priority_class("important", 100000),
        _running("late", "n1", 8, priority_class="important"),
        _waiting(),
    )
    (evict,) = [d for d in decisions if isinstance(d, Evict)]
    assert evict.pod == "default/late"
    assert evict.broken_promise == "Pod default/big"
    assert evict.reason == (
        "Backfill: broken promise: ran 30m past its stated runtime 1h; evicted for the "
        "reservation of Pod default/big (expected start 2026-11-22T10:00:00Z) on node n1"
    )
    assert Nominate("default/big", "n1") in decisions
    assert _message(decisions, "default/big").endswith(
        "reserved n1; expected start 2026-11-22T10:00:00Z. broken promise: evicting "
        "default/late (30m past its stated runtime 1h) so that it starts."
    )


def test_the_kueue_label_and_the_podgroup_annotation_are_promises_too() -> None:
    group = pod_group("old", 1, namespace="default")
    group["metadata"]["annotations"] = {"batchsched.io/max-runtime": "1h"}
    member = _running(
        "member", "n2", 8, runtime=None, labels={"scheduling.x-k8s.io/pod-group": "old"}
    )
    labelled = _running(
        "labelled", "n1", 8, runtime=None, labels={"kueue.x-k8s.io/max-exec-time-seconds": "3600"}
    )
    decisions = _pass(
        node("n1", nvidia_com__gpu="8"),
        node("n2", nvidia_com__gpu="8"),
        group,
        member,
        labelled,
        _waiting("a"),
        _waiting("b", created="2026-11-22T09:00:01Z"),
    )
    assert _evicted(decisions) == ["default/labelled", "default/member"]


@pytest.mark.parametrize(
    ("victim", "why"),
    [
        (_running("kept", "n1", 8, runtime=None), "no stated runtime"),
        (_running("kept", "n1", 8, started="2026-11-22T09:30:00Z"), "within its runtime"),
        (
            _running("kept", "n1", 8, runtime=None, activeDeadlineSeconds=3600),
            "the kubelet enforces activeDeadlineSeconds",
        ),
    ],
)
def test_only_a_broken_promise_is_evicted(victim: dict[str, Any], why: str) -> None:
    decisions = _pass(node("n1", nvidia_com__gpu="8"), victim, _waiting())
    assert _evicted(decisions) == [], why
    assert "broken promise" not in _message(decisions, "default/big")


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"priority_class": "system-cluster-critical"}, "of system-critical priority"),
        ({"priority_class": "guarded"}, "inside PriorityClass guarded's toleration window"),
        (
            {"labels": {"app": "x"}, "owner": "DaemonSet"},
            "a DaemonSet pod",
        ),
    ],
)
def test_protected_pods_stay(extra: dict[str, Any], why: str) -> None:
    owner = extra.pop("owner", None)
    victim = _running("kept", "n1", 8, **extra)
    if owner:
        victim["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner, "name": "ds", "uid": "u1", "controller": True}
        ]
    guarded = priority_class("guarded", 10)
    guarded["metadata"]["annotations"] = {
        "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "1000",
        "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "7200",
    }
    decisions = _pass(node("n1", nvidia_com__gpu="8"), guarded, victim, _waiting())
    assert _evicted(decisions) == []
    assert (
        "broken promise: evicting the pods past their stated runtime would not make room "
        f"(default/kept is {why})." in _message(decisions, "default/big")
    )


def test_the_fewest_go() -> None:
    decisions = _pass(
        node("n1", nvidia_com__gpu="8"),
        _running("a", "n1", 2),
        _running("b", "n1", 2),
        _running("c", "n1", 4),
        _waiting(count=4),
    )
    assert _evicted(decisions) == ["default/c"]


def test_a_pod_a_budget_covers_is_kept_when_another_will_do() -> None:
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "kept"}}},
        "status": {"disruptionsAllowed": 0},
    }
    decisions = _pass(
        node("n1", nvidia_com__gpu="8"),
        budget,
        _running("a", "n1", 4, labels={"app": "kept"}),
        _running("b", "n1", 4),
        _waiting(count=4),
    )
    assert _evicted(decisions) == ["default/b"]


def test_only_pods_on_the_reserved_nodes_go() -> None:
    decisions = _pass(
        node("n1", nvidia_com__gpu="8"),
        node("n2", nvidia_com__gpu="8"),
        _running("here", "n1", 8),
        _running("elsewhere", "n2", 8, started="2026-11-22T08:00:00Z", runtime=None),
        _waiting(),
    )
    assert _evicted(decisions) == ["default/here"]


def test_a_holder_that_never_preempts_evicts_nothing() -> None:
    decisions = _pass(
        node("n1", nvidia_com__gpu="8"),
        _running("late", "n1", 8),
        _waiting(preemptionPolicy="Never"),
    )
    assert _evicted(decisions) == []
    assert "broken promise: not evicting for preemptionPolicy=Never." in _message(
        decisions, "default/big"
    )


def test_the_holder_is_tried_again_at_its_start() -> None:
    """Reserved at 10:00 for 10:02 (a pod stated 1 h at 09:02): nothing changes in the
    cluster, yet at 10:02 the holder is tried again and the overrunning pod goes."""
    state = build_state(
        objects_of(
            node("n1", nvidia_com__gpu="8"),
            _running("late", "n1", 8, started="2026-11-22T09:02:00Z"),
            _waiting(),
        )
    )
    scheduler = Scheduler(state, default_config())
    first = scheduler.schedule_pass(NOW)
    assert "expected start 2026-11-22T10:02:00Z" in _message(first, "default/big")
    assert _evicted(first) == []
    assert _evicted(scheduler.schedule_pass(NOW + timedelta(minutes=1))) == []
    assert _evicted(scheduler.schedule_pass(NOW + timedelta(minutes=2))) == ["default/late"]
    # The victims going: nothing more is evicted while they terminate.
    assert _evicted(scheduler.schedule_pass(NOW + timedelta(minutes=2, seconds=1))) == []
