"""Tentative scopes: pods held on and off rows (`pods.hold` / `unhold`) within
`nodes.tentative()`, and what the log of changed rows keeps of them."""

from dataclasses import replace

import pytest

from batchsched.state import nodes
from tests.unit.state.builders import GI, on_a, on_two_nodes, pending


def test_a_tentative_scope_nobody_read_leaves_no_trace() -> None:
    state = on_a("x", "y", "z")
    mark = state.nodes.change_mark()
    with state.nodes.tentative():
        state.pods.unhold("ns/x", 0)
        state.pods.unhold("ns/y", 0)
        state.pods.hold("ns/x", 0)  # back, but after z
        state.pods.hold("ns/y", 0)
    assert list(state.nodes.pods_on[0]) == ["ns/x", "ns/y", "ns/z"]
    assert state.nodes.rows_changed_since(mark) == []
    assert state.nodes.change_mark() == mark


def test_a_tentative_scope_someone_read_keeps_its_changes_logged() -> None:
    state = on_a("x", "y")
    mark = state.nodes.change_mark()
    with state.nodes.tentative():
        state.pods.unhold("ns/x", 0)
        seen = state.nodes.change_mark()  # e.g. a cache refreshed on the changed row meanwhile
        state.pods.hold("ns/x", 0)
    assert seen == mark + 1
    assert state.nodes.rows_changed_since(mark) == [0, 0]  # the reader must see the row go back
    assert list(state.nodes.pods_on[0]) == ["ns/x", "ns/y"]


def test_a_tentative_scope_left_by_an_error_keeps_its_changes_logged() -> None:
    state = on_a("x")
    mark = state.nodes.change_mark()
    try:
        with state.nodes.tentative():
            state.pods.unhold("ns/x", 0)
            raise RuntimeError("a plugin failed")
    except RuntimeError:
        pass
    assert state.nodes.rows_changed_since(mark) == [0]
    assert "ns/x" not in state.nodes.pods_on[0]


def test_a_tentative_scope_longer_than_the_log_still_leaves_no_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log does not roll over within a scope (a rollover would make every cache
    following the log rebuild from scratch)."""
    monkeypatch.setattr(nodes, "_CHANGE_LOG_LIMIT", 4)
    state = on_a("x")
    mark = state.nodes.change_mark()
    with state.nodes.tentative():
        for _ in range(5):
            state.pods.unhold("ns/x", 0)
            state.pods.hold("ns/x", 0)
    assert state.nodes.rows_changed_since(mark) == []


def test_a_tentative_scope_puts_back_each_row_as_it_found_it() -> None:
    """Victims taken off and put back in one call each, a pending pod shown on a row and
    taken off again: every row ends with its pods in their order and its non-zero defaults,
    and within the scope the defaults follow each pod as it moves."""
    state = on_two_nodes()
    gaps = state.nodes.nonzero_gap[:2].tolist()
    default_memory = 200 * 2**20  # every pod here but y and w requests cpu only
    assert gaps == [[100, 3 * default_memory], [200, GI + default_memory]]
    state.upsert_pod(pending("member", 100, 0))
    with state.nodes.tentative():
        state.pods.unhold_all([("ns/x", 0), ("ns/y", 0), ("ns/w", 1), ("ns/v", 1)])
        assert state.nodes.nonzero_gap[:2].tolist() == [[0, default_memory], [0, 0]]
        state.pods.hold("ns/member", 1)
        state.pods.hold_all([("ns/v", 1), ("ns/w", 1), ("ns/y", 0)])
        assert state.nodes.nonzero_gap[:2].tolist() == [
            [100, 2 * default_memory],
            [200, GI + 2 * default_memory],
        ]
        assert list(state.nodes.pods_on[0]) == ["ns/z", "ns/y"]
        assert list(state.nodes.pods_on[1]) == ["ns/member", "ns/v", "ns/w"]
        state.pods.hold("ns/x", 0)
        state.pods.hold("ns/x", 0)  # already there: it stays where it is
        state.pods.unhold("ns/member", 1)
    assert [list(pods) for pods in state.nodes.pods_on] == [
        ["ns/x", "ns/y", "ns/z"],
        ["ns/v", "ns/w"],
    ]
    assert state.nodes.nonzero_gap[:2].tolist() == gaps
    assert all(
        state.nodes.pods_on[state.pods.bound[key]][key] is state.pods.by_key[key]
        for key in state.pods.bound
    )


def test_a_pod_reported_anew_counts_the_non_zero_defaults_of_its_new_report() -> None:
    """A running pod re-reported with requests, then without, then gone: its node's
    non-zero defaults follow each report, and a tentative scope moves the ones it has now."""
    state = on_two_nodes()
    default_memory = 200 * 2**20
    a = state.nodes.nonzero_gap[0].tolist()
    assert a == [100, 3 * default_memory]
    requested = replace(state.pods.by_key["ns/y"], requests={"cpu": 100, "memory": GI})
    state.upsert_pod(requested)
    assert state.nodes.nonzero_gap[0].tolist() == [0, 2 * default_memory]
    with state.nodes.tentative():
        state.pods.unhold_all([("ns/y", 0), ("ns/x", 0)])
        assert state.nodes.nonzero_gap[0].tolist() == [0, default_memory]
        state.pods.hold_all([("ns/x", 0), ("ns/y", 0)])
    state.upsert_pod(replace(requested, requests={}))
    assert state.nodes.nonzero_gap[0].tolist() == a
    with state.nodes.tentative():
        state.pods.unhold("ns/y", 0)
        assert state.nodes.nonzero_gap[0].tolist() == [0, 2 * default_memory]
        state.pods.hold("ns/y", 0)
    state.remove_pod("ns/y")
    assert state.nodes.nonzero_gap[0].tolist() == [0, 2 * default_memory]
    state.upsert_pod(replace(requested, node_name=""))  # pending again, with requests
    state.pods.hold("ns/y", 0)
    assert state.nodes.nonzero_gap[0].tolist() == [0, 2 * default_memory]


@pytest.mark.parametrize("left", ["a pod off", "another pod on", "a pod swapped"])
def test_a_tentative_scope_that_leaves_a_row_changed_says_so(left: str) -> None:
    state = on_two_nodes()
    state.upsert_pod(pending("member", 100, 0))
    raised = pytest.raises(AssertionError, match="row 0's pods were not restored")
    with raised, state.nodes.tentative():
        state.pods.unhold("ns/y", 1)  # not there: changes nothing
        state.pods.unhold("ns/v", 1)
        state.pods.hold("ns/v", 1)
        if left != "another pod on":
            state.pods.unhold("ns/x", 0)
        if left != "a pod off":
            state.pods.hold("ns/member", 0)  # the same number of pods, another one among them


def test_moves_logged_together_roll_the_log_over_as_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Out of a tentative scope, a call moving several pods logs each as `hold` would, and
    the log rolls over where it would have: a mark from before then reaches back no more."""
    monkeypatch.setattr(nodes, "_CHANGE_LOG_LIMIT", 8)
    for calls in ("one by one", "together"):
        state = on_two_nodes()  # 7 rows logged: 2 nodes and 5 pods
        mark = state.nodes.change_mark()
        placed = [("ns/x", 0), ("ns/v", 1)]
        if calls == "together":
            state.pods.unhold_all(placed)
        else:
            for key, idx in placed:
                state.pods.unhold(key, idx)
        assert state.nodes.rows_changed_since(mark) is None
        mark = state.nodes.change_mark()
        state.pods.hold_all(placed)
        assert state.nodes.rows_changed_since(mark) == [0, 1]
        assert [pod.key if pod else None for pod in state.nodes.pods_changed_since(mark) or ()] == [
            "ns/x",
            "ns/v",
        ]
