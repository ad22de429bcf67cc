"""A board of examples/ui/cluster.yaml, judged as `batchsched ui` judges it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from batchsched.config import default_config
from batchsched.objects.load import load_files
from batchsched.ui.board import Board
from batchsched.ui.offline import SnapshotJudge
from batchsched.ui.publisher import Publisher
from tests.paths import ROOT

CLUSTER = ROOT / "examples" / "ui" / "cluster.yaml"
NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def judged(publisher: Publisher | None = None) -> SnapshotJudge:
    load = lambda: load_files([CLUSTER])  # noqa: E731
    judge = SnapshotJudge(load, default_config(), NOW, [CLUSTER], False, publisher or Publisher())
    judge.judge()
    return judge


@pytest.fixture(scope="module")
def board() -> Board:
    found = judged().publisher.take()
    assert found is not None
    return found
