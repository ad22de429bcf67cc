"""Shared fixtures: tests build their own small manifests (see builders.py)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import settings

from batchsched.commands.schedule import OneShotResult, run
from batchsched.config import SchedulerConfig, default_config, parse_config
from batchsched.objects.load import Objects, load_text

# `make test` runs a fixed set of hypothesis examples, so that whether a change lands does not
# hinge on which random cases one run draws; `make explore` (HYPOTHESIS_EXPLORE=1) draws new
# ones and keeps what fails in .hypothesis/ for the next run.
settings.register_profile("fixed", derandomize=True, database=None)
if not os.environ.get("HYPOTHESIS_EXPLORE"):
    settings.load_profile("fixed")

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
# kube-scheduler's LeastAllocated (spread), pinned for tests whose ties between equally good
# nodes were written against spreading, whatever the default profile becomes.
LEAST_ALLOCATED_ARGS: dict[str, Any] = {"scoringStrategy": {"type": "LeastAllocated"}}


def least_allocated(**plugin_args: dict[str, Any]) -> SchedulerConfig:
    config = [{"name": name, "args": args} for name, args in plugin_args.items()]
    config.append({"name": "NodeResourcesFit", "args": LEAST_ALLOCATED_ARGS})
    return parse_config({"profiles": [{"pluginConfig": config}]})


def objects_of(*manifests: dict[str, Any]) -> Objects:
    import orjson

    return load_text(orjson.dumps({"kind": "List", "items": list(manifests)}).decode(), "test")


def schedule(
    *manifests: dict[str, Any], config: SchedulerConfig | None = None, now: datetime = NOW
) -> OneShotResult:
    return run(objects_of(*manifests), config or default_config(), now)


@pytest.fixture(autouse=True)
def _default_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text output at its default width, whatever COLUMNS the shell running the tests has."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def now() -> datetime:
    return NOW


def same_decisions_whatever_the_order(manifests: list[dict[str, Any]], seed: int) -> bool:
    """Whether scheduling the manifests in a shuffled order decides exactly the same."""
    import random

    shuffled = list(manifests)
    random.Random(seed).shuffle(shuffled)
    return schedule(*manifests).to_json() == schedule(*shuffled).to_json()
