"""Queueing hints change how fast, never what: the same clusters scheduled with hints on and
off (every waiting pod retried after every change) bind, evict, reserve and leave pending the
same pods. Only a message may differ: a pod no change could help is not tried again, so it
keeps the diagnosis of its last attempt (as kube-scheduler's PodScheduled condition does)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.objects.load import Objects
from batchsched.oneshot import run
from benchmarks.workloads import contended
from tests.conftest import NOW, objects_of
from tests.properties.strategies import clusters
from tests.properties.test_gang_properties import gang_clusters, preemption_clusters

SETTINGS = settings(max_examples=60, deadline=None)


def same_with_and_without_hints(manifests: list[dict[str, Any]]) -> None:
    same_output(lambda: objects_of(*manifests))


def same_output(objects: Callable[[], Objects], now: datetime = NOW) -> None:
    outputs = []
    for hints in (True, False):
        output = run(objects(), default_config(), now, queueing_hints=hints)
        decided = output.to_json()
        decided["unschedulable"] = sorted(output.unschedulable)
        outputs.append(decided)
    assert outputs[0] == outputs[1]


@SETTINGS
@given(clusters(max_nodes=8, max_pods=30))
def test_hints_decide_as_retrying_everything(manifests: list[dict[str, Any]]) -> None:
    same_with_and_without_hints(manifests)


@SETTINGS
@given(st.one_of(gang_clusters(), preemption_clusters(), preemption_clusters(False)))
def test_hints_decide_as_retrying_everything_with_gangs(manifests: list[dict[str, Any]]) -> None:
    same_with_and_without_hints(manifests)


@settings(max_examples=6, deadline=None)
@given(st.integers(10, 60), st.integers(0, 2**32 - 1))
def test_hints_decide_as_retrying_everything_on_contended_clusters(nodes: int, seed: int) -> None:
    """Issue 18's mixed, nearly full clusters: priorities, a tolerating class, gangs running
    and pending, PDBs."""
    same_output(lambda: contended.generate(nodes, seed), contended.NOW)
