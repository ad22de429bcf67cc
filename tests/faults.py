"""Plugins that raise for the pods they are told to, for tests of fault isolation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from batchsched.config import SchedulerConfig, parse_config
from batchsched.framework.interface import Cycle, FilterPlugin, Rejection, ReservePlugin
from batchsched.objects.records import Pod
from batchsched.plugins.registry import REGISTRY
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray

NAME = "Exploding"
RESERVE_NAME = "ExplodingReserve"


class Exploding(FilterPlugin):
    name = NAME

    def __init__(self, pods: frozenset[str]) -> None:
        self.pods = pods

    def filter(self, cycle: Cycle, candidates: BoolArray) -> Sequence[Rejection]:
        if cycle.pod.name in self.pods:
            raise RuntimeError(f"boom for {cycle.pod.name}")
        return []


def exploding_for(monkeypatch: pytest.MonkeyPatch, *pod_names: str, **top: Any) -> SchedulerConfig:
    """A config whose profile ends its filters with `Exploding` (registered for the test)."""

    def build(args: Mapping[str, Any] | None) -> Exploding:
        return Exploding(frozenset(pod_names))

    monkeypatch.setitem(REGISTRY, NAME, build)
    plugins = {"filter": {"enabled": [{"name": NAME}]}}
    return parse_config({**top, "profiles": [{"schedulerName": "batchsched", "plugins": plugins}]})


class ExplodingReserve(ReservePlugin):
    """Raises at Reserve for its pods, after the default Reserve plugins held theirs."""

    name = RESERVE_NAME

    def __init__(self, pods: frozenset[str]) -> None:
        self.pods = pods
        self.unreserved: list[str] = []

    def reserve(self, cycle: Cycle, row: int) -> None:
        if cycle.pod.name in self.pods:
            raise RuntimeError(f"reserve failed for {cycle.pod.name}")

    def unreserve(self, state: ClusterState, pod: Pod) -> None:
        self.unreserved.append(pod.name)


def exploding_reserve_for(
    monkeypatch: pytest.MonkeyPatch, *pod_names: str
) -> tuple[SchedulerConfig, ExplodingReserve]:
    """A config whose Reserve plugins end with `ExplodingReserve`, and the plugin."""
    plugin = ExplodingReserve(frozenset(pod_names))
    monkeypatch.setitem(REGISTRY, RESERVE_NAME, lambda args: plugin)
    plugins = {"reserve": {"enabled": [{"name": RESERVE_NAME}]}}
    config = parse_config({"profiles": [{"schedulerName": "batchsched", "plugins": plugins}]})
    return config, plugin
