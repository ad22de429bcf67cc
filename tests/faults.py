"""A filter plugin that raises for the pods it is told to, for tests of fault isolation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from batchsched.config import SchedulerConfig, parse_config
from batchsched.plugins.base import Cycle, FilterPlugin, Rejection
from batchsched.plugins.registry import REGISTRY
from batchsched.state.cluster import BoolArray

NAME = "Exploding"


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
