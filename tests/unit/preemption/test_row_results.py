"""`RowResults`' per-row bookkeeping on hand-made rows: the reason counts a failing search
reports, and which recomputed rows a `Ranking` must rank apart."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np

from batchsched.objects.parse import format_time
from batchsched.preemption.nodes import RowResults
from batchsched.preemption.reasons import HELD_BY_TOLERATION, NO_VICTIMS, Reasons

_EARLY = datetime(2026, 1, 1, 12, tzinfo=UTC).timestamp()
_LATE = datetime(2026, 1, 1, 13, tzinfo=UTC).timestamp()


def _failing(reasons: Reasons) -> RowResults:
    """Eight rows: 0 and 5 work; the others fail for nothing to take, a missing class, or
    tolerations that end at different times."""
    results = RowResults.empty(8, 1)
    nothing = reasons.id(Reasons.NOTHING)
    missing = reasons.id(Reasons.MISSING, ("gone",))
    tolerated = reasons.id(Reasons.TOLERATED, ("tolerant",))
    results.works[[0, 5]] = True
    results.reason[:] = [-1, nothing, missing, tolerated, tolerated, -1, tolerated, nothing]
    results.unlock[[3, 4, 6]] = [_LATE, math.inf, _EARLY]
    return results


def test_failure_counts_count_candidates_per_reason_with_their_first_unlock() -> None:
    reasons = Reasons()
    results = _failing(reasons)
    candidates = np.ones(8, dtype=np.bool_)
    early = format_time(datetime.fromtimestamp(_EARLY, UTC))
    assert results.failure_counts(candidates, reasons) == {
        NO_VICTIMS: 2,
        "victims' PriorityClass not found (gone)": 1,
        f"{HELD_BY_TOLERATION} (tolerant, until {early})": 3,
    }
    # Without row 6 (the earliest unlock) and row 7, the unlock time is row 3's: the earliest
    # among candidate rows, not among all rows.
    candidates[[6, 7]] = False
    late = format_time(datetime.fromtimestamp(_LATE, UTC))
    assert results.failure_counts(candidates, reasons) == {
        NO_VICTIMS: 1,
        "victims' PriorityClass not found (gone)": 1,
        f"{HELD_BY_TOLERATION} (tolerant, until {late})": 2,
    }
    # Tolerations that never end show no time; candidates past the rows are ignored.
    wider = np.zeros(10, dtype=np.bool_)
    wider[[4, 9]] = True
    assert results.failure_counts(wider, reasons) == {f"{HELD_BY_TOLERATION} (tolerant)": 1}
    assert results.failure_counts(np.zeros(8, dtype=np.bool_), reasons) == {}


def test_rank_moved_names_rows_that_start_stop_or_change_criteria() -> None:
    results = RowResults.empty(6, 1)
    results.works[:] = [True, True, True, False, False, True]
    results.total[:] = 5
    at = np.arange(6, dtype=np.intp)
    fresh = RowResults.empty(6, 1)
    fresh.works[:] = [True, True, False, True, False, True]
    fresh.total[:] = 5
    fresh.total[4] = 9  # a failing row's criteria do not matter
    fresh.latest[1] = -3.0  # a working row's later criterion does
    fresh.victims[5] = True  # other victims, same criteria: the place holds
    assert results.rank_moved(at, fresh).tolist() == [False, True, True, True, False, False]
    for name in ("violations", "highest", "total", "count", "latest"):
        other = RowResults.empty(6, 1)
        other.works[:] = results.works
        other.total[:] = 5
        getattr(other, name)[0] += 1
        assert results.rank_moved(at, other).tolist() == [True] + [False] * 5, name
