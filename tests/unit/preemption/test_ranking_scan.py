"""`Ranking.best` looks at the first ranked rows before the rest, and ranks rows recomputed
since apart: the answer must be the one the node-choice order gives over every usable candidate,
wherever in the ranking it lies (a guard for changes to how far and in what steps it looks)."""

from __future__ import annotations

import numpy as np

from batchsched.preemption.nodes import Ranking, RowResults


def _results(rows: int, rng: np.random.Generator) -> RowResults:
    results = RowResults.empty(rows, 1)
    results.works[:] = rng.random(rows) < 0.8
    results.violations[:] = rng.integers(0, 2, rows)
    results.highest[:] = rng.integers(0, 5, rows)
    results.total[:] = rng.integers(0, 50, rows)
    results.count[:] = rng.integers(1, 4, rows)
    results.latest[:] = -rng.integers(0, 10, rows).astype(np.float64)
    return results


def _ranked(rows: int, rng: np.random.Generator) -> tuple[RowResults, np.ndarray, Ranking]:
    """Random results, node-name ranks and the ranking made of them."""
    results = _results(rows, rng)
    rank = rng.permutation(rows).astype(np.int64)
    return results, rank, Ranking(results, rank)


def _expected(results: RowResults, candidates: np.ndarray, rank: np.ndarray) -> int | None:
    rows = np.flatnonzero(candidates & results.works)
    return None if rows.size == 0 else int(results.order(rows, rank)[0])


def test_best_is_the_first_usable_row_at_any_depth_of_the_ranking() -> None:
    rng = np.random.default_rng(18)
    rows = 3000
    results, rank, ranking = _ranked(rows, rng)
    # The first usable candidate at each depth: inside and at the edges of the first 64
    # rows, of the next 256 and of the next 1024, and the very last ranked row.
    depths = [0, 63, 64, 65, 319, 320, 321, 1343, 1344, ranking.sorted.shape[0] - 1]
    for depth in depths:
        candidates = np.zeros(rows, dtype=np.bool_)
        candidates[ranking.sorted[depth:]] = rng.random(ranking.sorted.shape[0] - depth) < 0.01
        candidates[ranking.sorted[depth]] = True
        assert ranking.best(results, candidates, rank) == int(ranking.sorted[depth])
        assert ranking.best(results, candidates, rank) == _expected(results, candidates, rank)
    assert ranking.best(results, np.zeros(rows, dtype=np.bool_), rank) is None


def test_best_weighs_rows_recomputed_since_against_the_clean_ones() -> None:
    rng = np.random.default_rng(7)
    rows = 2000
    results, rank, ranking = _ranked(rows, rng)
    changed = rng.choice(rows, 40, replace=False).astype(np.intp)
    fresh = _results(changed.size, rng)
    results.store(changed, fresh)
    ranking.mark(changed)
    for _ in range(20):
        candidates = rng.random(rows) < rng.choice([0.002, 0.02, 0.5])
        assert ranking.best(results, candidates, rank) == _expected(results, candidates, rank)


def test_ranking_marked_with_moved_rows_only_answers_as_a_fresh_sort() -> None:
    """Rows recomputed with their place unchanged stay clean; many rounds of changes (past
    the bound that re-sorts) keep `best` equal to the node-choice order over every candidate."""
    rng = np.random.default_rng(24)
    rows = 400
    results = _results(rows, rng)
    rank = rng.permutation(rows).astype(np.int64)
    ranking = Ranking(results, rank)
    for _ in range(60):
        at = np.unique(rng.choice(rows, int(rng.integers(1, 12)))).astype(np.intp)
        fresh = _results(at.size, rng)
        keep = rng.random(at.size) < 0.5  # half keep their criteria (and work or fail as before)
        for name in ("works", "violations", "highest", "total", "count", "latest"):
            getattr(fresh, name)[keep] = getattr(results, name)[at[keep]]
        moved = results.rank_moved(at, fresh)
        results.store(at, fresh)
        ranking.mark(at[moved])
        if ranking.worn:
            ranking = Ranking(results, rank)
        for share in (0.01, 0.1, 0.9):
            candidates = rng.random(rows) < share
            usable = np.flatnonzero(candidates & results.works)
            expected = None if usable.size == 0 else int(results.order(usable, rank)[0])
            assert ranking.best(results, candidates, rank) == expected
