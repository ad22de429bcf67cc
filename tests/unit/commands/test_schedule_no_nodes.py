"""A cluster without nodes (a live scheduler before its first node, a snapshot of pods only):
pending pods are told why, not failed with an internal error."""

from __future__ import annotations

from datetime import UTC, datetime

from batchsched.commands.schedule import run
from batchsched.config import default_config
from batchsched.objects.load import Objects
from batchsched.objects.records import Pod

NOW = datetime(2026, 11, 24, 12, tzinfo=UTC)


def _pod(name: str) -> Pod:
    return Pod(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        requests={"cpu": 1000, "memory": 2**30, "pods": 1},
        scheduler_name="batchsched",
        phase="Pending",
        creation_timestamp=NOW,
    )


def test_pods_without_any_node_are_unschedulable_with_a_reason() -> None:
    # Two pods of one shape: the second is placed from the shape's kept (empty) results.
    result = run(Objects(pods=[_pod("a"), _pod("b")]), default_config(), NOW)
    assert result.bindings == []
    assert set(result.unschedulable) == {"default/a", "default/b"}
    for message in result.unschedulable.values():
        assert message.startswith("0/0 nodes are available"), message
        assert "internal error" not in message
