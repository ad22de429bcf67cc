"""Per-node gang-victim searches kept between preemptors decide as searching afresh, on
issue 18's contended clusters (gangs running on every tenth node pair, PDBs, tolerations)."""

from __future__ import annotations

from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.schedule import run
from batchsched.config import default_config
from batchsched.preemption.gang_victims import GangSearchMemo, KeptAnswers
from benchmarks.workloads import contended


def fresh(self: GangSearchMemo, *args: object) -> KeptAnswers:
    return KeptAnswers()


@settings(max_examples=6, deadline=None)
@given(st.integers(10, 60), st.integers(0, 2**32 - 1))
def test_kept_answers_decide_as_fresh_searches(nodes: int, seed: int) -> None:
    kept = run(contended.generate(nodes, seed), default_config(), contended.NOW).to_json()
    with patch.object(GangSearchMemo, "answers", fresh):
        searched = run(contended.generate(nodes, seed), default_config(), contended.NOW)
    assert kept == searched.to_json()
