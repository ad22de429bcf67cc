"""KeptAnswers: per-node gang-victim answers kept in rank order for one kind of preemptor."""

from __future__ import annotations

from batchsched.preemption.gang_victims import KeptAnswers
from batchsched.preemption.victims import NodeVictims


def _answer(
    row: int, rank: int, reads: set[int]
) -> tuple[NodeVictims, tuple[int, ...], frozenset[int]]:
    return (NodeVictims(row, (), 0), (rank, row), frozenset(reads))


def test_best_is_the_lowest_rank_on_a_usable_row() -> None:
    kept = KeptAnswers()
    kept.put(3, _answer(3, 5, {3}))
    kept.put(1, _answer(1, 2, {1}))
    kept.put(7, (None, None, frozenset({7})))  # cannot host the preemptor
    found = kept.best(lambda row: True)
    assert found is not None and found[1].row == 1
    found = kept.best(lambda row: row != 1)
    assert found is not None and found[1].row == 3
    assert kept.best(lambda row: row == 7) is None
    assert kept.known.tolist() == [False, True, False, True, False, False, False, True]
    assert kept.works.tolist() == [False, True, False, True, False, False, False, False]


def test_an_answer_goes_when_a_row_it_read_changes() -> None:
    kept = KeptAnswers()
    kept.put(1, _answer(1, 2, {1, 4}))  # a gang with a member on row 4
    kept.put(3, _answer(3, 5, {3}))
    kept.drop({4})
    assert set(kept.rows) == {3} and not kept.known[1] and not kept.works[1]
    found = kept.best(lambda row: True)
    assert found is not None and found[1].row == 3


def test_a_replaced_answer_ranks_by_its_new_rank() -> None:
    kept = KeptAnswers()
    kept.put(1, _answer(1, 2, {1}))
    kept.put(3, _answer(3, 5, {3}))
    kept.drop({1})
    kept.put(1, _answer(1, 9, {1}))
    found = kept.best(lambda row: True)
    assert found is not None and found[1].row == 3
    for _ in range(100):  # stale entries are compacted, the order stays right
        kept.drop({3})
        kept.put(3, _answer(3, 5, {3}))
    found = kept.best(lambda row: row != 3)
    assert found is not None and found[0] == (9, 1)
