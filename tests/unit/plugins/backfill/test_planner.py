"""The earliest start of a waiting pod or gang, from the expected ends of running pods."""

from __future__ import annotations

import math
from unittest.mock import patch

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from batchsched.plugins.backfill import planner
from batchsched.plugins.backfill.planner import Blocks, Endings, Plan, earliest_start

NOW = 1_000_000.0
MINUTE = 60.0

# A node: (name, free GPUs, free CPUs, running pods as (key, GPUs, CPUs, minutes or None)).
Running = tuple[str, int, int, int | None]
Node = tuple[str, int, int, list[Running]]


def _plan(
    nodes: list[Node],
    members: list[tuple[int, int]],
    length: float = math.inf,
    blocks: Blocks | None = None,
) -> Plan | None:
    free = np.array([[g, c] for _, g, c, _ in nodes], dtype=np.int64).reshape(-1, 2)
    order = sorted(range(len(nodes)), key=lambda i: nodes[i][0])
    rank = np.empty(len(nodes), dtype=np.int64)
    rank[order] = np.arange(len(nodes))
    node, at, requests, keys = [], [], [], []
    for i, (_, _, _, running) in enumerate(nodes):
        for key, gpus, cpus, minutes in running:
            node.append(i)
            at.append(math.inf if minutes is None else NOW + minutes * MINUTE)
            requests.append([gpus, cpus])
            keys.append(key)
    endings = Endings(
        np.array(node, dtype=np.intp),
        np.array(at, dtype=np.float64),
        np.array(requests, dtype=np.int64).reshape(-1, 2),
        keys,
    )
    wanted = np.array(members, dtype=np.int64).reshape(-1, 2)
    return earliest_start(free, rank, endings, wanted, NOW, length, blocks)


def _names(plan: Plan, nodes: list[Node]) -> list[str]:
    return [nodes[i][0] for i in plan.shares]


def test_fits_now() -> None:
    nodes: list[Node] = [("n1", 8, 8, [])]
    plan = _plan(nodes, [(8, 1)])
    assert plan is not None and plan.start == NOW and plan.waits_for == ()


def _block(start: float, until: float, gpus: int) -> Blocks:
    """An earlier reservation holding `gpus` on the first node from `start` to `until`."""
    return Blocks(
        np.array([0], dtype=np.intp),
        np.array([start]),
        np.array([until]),
        np.array([[gpus, 0]], dtype=np.int64),
    )


def test_a_start_that_ends_before_an_earlier_reservation_takes_the_room_now() -> None:
    nodes: list[Node] = [("n1", 8, 8, [])]
    later = _block(NOW + 30 * MINUTE, NOW + 90 * MINUTE, 8)
    plan = _plan(nodes, [(8, 1)], length=20 * MINUTE, blocks=later)
    assert plan is not None and plan.start == NOW


def test_a_stay_overlapping_an_earlier_reservation_starts_once_it_ends() -> None:
    nodes: list[Node] = [("n1", 8, 8, [])]
    later = _block(NOW + 30 * MINUTE, NOW + 90 * MINUTE, 8)
    plan = _plan(nodes, [(8, 1)], length=60 * MINUTE, blocks=later)
    assert plan is not None and plan.start == NOW + 90 * MINUTE
    # Room the earlier one leaves at the same time is open: it holds 4 of the 8 GPUs.
    half = _block(NOW + 30 * MINUTE, NOW + 90 * MINUTE, 4)
    plan = _plan(nodes, [(4, 1)], length=60 * MINUTE, blocks=half)
    assert plan is not None and plan.start == NOW


def test_a_reservation_for_good_leaves_only_its_node_s_other_room() -> None:
    nodes: list[Node] = [("n1", 8, 8, [])]
    for_good = _block(-math.inf, math.inf, 6)
    assert _plan(nodes, [(4, 1)], blocks=for_good) is None
    plan = _plan(nodes, [(2, 1)], blocks=for_good)
    assert plan is not None and plan.start == NOW


def test_a_plan_with_no_expected_start_holds_its_room_beside_every_earlier_one() -> None:
    # It fits only once `b` (stating no runtime) ends, so it holds n1 for good from now: not
    # the 4 GPUs an earlier reservation holds from 30 to 90 min, though it ends before then.
    nodes: list[Node] = [("n1", 0, 8, [("a", 4, 0, 30), ("b", 4, 0, None)])]
    alone = _plan(nodes, [(8, 1)])
    assert alone is not None and alone.start is None and alone.waits_for == ("a", "b")
    earlier = _block(NOW + 30 * MINUTE, NOW + 90 * MINUTE, 4)
    assert _plan(nodes, [(8, 1)], blocks=earlier) is None


def test_earliest_node_wins() -> None:
    nodes: list[Node] = [("n1", 0, 8, [("a", 8, 0, 60)]), ("n2", 0, 8, [("b", 8, 0, 30)])]
    plan = _plan(nodes, [(8, 1)])
    assert plan is not None
    assert plan.start == NOW + 30 * MINUTE and _names(plan, nodes) == ["n2"]
    assert plan.waits_for == ("b",)


def test_tie_goes_to_fewer_pods_then_names() -> None:
    nodes: list[Node] = [
        ("n1", 0, 8, [("a", 4, 0, 30), ("b", 4, 0, 30)]),
        ("n3", 0, 8, [("c", 8, 0, 30)]),
        ("n2", 0, 8, [("d", 8, 0, 30)]),
    ]
    plan = _plan(nodes, [(8, 1)])
    assert plan is not None and _names(plan, nodes) == ["n2"] and plan.waits_for == ("d",)


def test_gang_starts_when_all_members_fit() -> None:
    nodes: list[Node] = [
        ("n1", 0, 8, [("a", 8, 0, 30)]),
        ("n2", 0, 8, [("b", 8, 0, 90)]),
        ("n3", 8, 8, []),
    ]
    plan = _plan(nodes, [(8, 1), (8, 1)])
    assert plan is not None
    assert plan.start == NOW + 30 * MINUTE and sorted(_names(plan, nodes)) == ["n1", "n3"]


def test_unlike_members_move_on_until_they_pack() -> None:
    # At 10 min one 6-GPU and one 2-GPU slot exist (enough by each kind alone, not
    # together with 4 + 4 CPUs), the 6-GPU member fits only once n2 frees at 20.
    nodes: list[Node] = [("n1", 0, 4, [("a", 6, 0, 10)]), ("n2", 0, 4, [("b", 8, 0, 20)])]
    plan = _plan(nodes, [(6, 4), (2, 4)])
    assert plan is not None and plan.start == NOW + 20 * MINUTE


def test_waits_for_pods_without_a_runtime() -> None:
    nodes: list[Node] = [("n1", 0, 8, [("a", 8, 0, None)]), ("n2", 4, 8, [("b", 4, 0, 20)])]
    plan = _plan(nodes, [(8, 1), (8, 1)])
    assert plan is not None
    assert plan.start is None and sorted(_names(plan, nodes)) == ["n1", "n2"]
    assert plan.waits_for == ("a", "b")


def test_a_pod_past_its_end_ends_now() -> None:
    nodes: list[Node] = [("n1", 0, 8, [("late", 8, 0, -5)])]
    plan = _plan(nodes, [(8, 1)])
    assert plan is not None and plan.start == NOW and plan.waits_for == ("late",)


def test_never_fits() -> None:
    assert _plan([("n1", 4, 8, [])], [(8, 1)]) is None


def _reference(nodes: list[Node], members: list[tuple[int, int]]) -> float | None:
    """The first moment (now, an end, or inf) at which first-fit decreasing packs them."""
    times = sorted({NOW} | {NOW + m * MINUTE for *_, r in nodes for *_, m in r if m is not None})
    for when in [*times, math.inf]:
        rooms = []
        for name, gpus, cpus, running in nodes:
            gone = [r for r in running if r[3] is not None and NOW + r[3] * MINUTE <= when]
            if math.isinf(when):
                gone = running
            room = [gpus + sum(r[1] for r in gone), cpus + sum(r[2] for r in gone)]
            rooms.append((len(gone), name, room))
        rooms.sort(key=lambda r: (r[0], r[1]))
        placed = 0
        for g, c in sorted(members, reverse=True):
            for _, _, room in rooms:
                if room[0] >= g and room[1] >= c:
                    room[0] -= g
                    room[1] -= c
                    placed += 1
                    break
        if placed == len(members):
            return when
    return None


_RUNNING = st.lists(
    st.tuples(st.integers(1, 8), st.integers(0, 4), st.one_of(st.none(), st.integers(1, 240))),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), _RUNNING), min_size=1, max_size=5),
    st.lists(st.tuples(st.integers(1, 8), st.integers(0, 4)), min_size=1, max_size=4),
)
def test_plan_is_the_first_moment_the_members_pack(
    layout: list[tuple[int, int, list[tuple[int, int, int | None]]]],
    members: list[tuple[int, int]],
) -> None:
    nodes: list[Node] = [
        (f"n{i}", g, c, [(f"p{i}-{j}", *r) for j, r in enumerate(running)])
        for i, (g, c, running) in enumerate(layout)
    ]
    plan = _plan(nodes, members)
    expected = _reference(nodes, members)
    if expected is None:
        assert plan is None
        return
    assert plan is not None
    assert (math.inf if plan.start is None else plan.start) == expected
    # The shares fit on their nodes once every pod the plan waits for has ended.
    for i, share in plan.shares.items():
        _, gpus, cpus, running = nodes[i]
        gone = [r for r in running if r[0] in plan.waits_for]
        assert share[0] <= gpus + sum(r[1] for r in gone)
        assert share[1] <= cpus + sum(r[2] for r in gone)
    assert sum(int(s[0]) for s in plan.shares.values()) == sum(g for g, _ in members)


_BLOCKS = st.lists(
    st.tuples(
        st.integers(0, 4),  # node index (clipped to the nodes)
        st.one_of(st.none(), st.integers(0, 240)),  # start, minutes from now (None: already)
        st.one_of(st.none(), st.integers(1, 240)),  # length in minutes (None: for good)
        st.integers(1, 8),  # GPUs held
    ),
    max_size=5,
)


def _held(
    held: list[tuple[int, int | None, int | None, int]], nodes: int
) -> tuple[list[tuple[int, float, float, int]], Blocks]:
    """The drawn blocks as (node, start, until, GPUs), and as `Blocks`."""
    spans = [
        (
            min(i, nodes - 1),
            -math.inf if begin is None else NOW + begin * MINUTE,
            math.inf if length is None else NOW + ((begin or 0) + length) * MINUTE,
            gpus,
        )
        for i, begin, length, gpus in held
    ]
    blocks = Blocks(
        np.array([s[0] for s in spans], dtype=np.intp),
        np.array([s[1] for s in spans], dtype=np.float64),
        np.array([s[2] for s in spans], dtype=np.float64),
        np.array([[s[3], 0] for s in spans], dtype=np.int64).reshape(-1, 2),
    )
    return spans, blocks


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), _RUNNING), min_size=1, max_size=5),
    st.lists(st.tuples(st.integers(1, 8), st.integers(0, 4)), min_size=1, max_size=4),
    _BLOCKS,
    st.one_of(st.none(), st.integers(1, 240)),
)
def test_a_plan_never_takes_room_earlier_reservations_hold_during_its_stay(
    layout: list[tuple[int, int, list[tuple[int, int, int | None]]]],
    members: list[tuple[int, int]],
    held: list[tuple[int, int | None, int | None, int]],
    stay: int | None,
) -> None:
    nodes: list[Node] = [
        (f"n{i}", g, c, [(f"p{i}-{j}", *r) for j, r in enumerate(running)])
        for i, (g, c, running) in enumerate(layout)
    ]
    spans, blocks = _held(held, len(nodes))
    length = math.inf if stay is None else stay * MINUTE
    plan = _plan(nodes, members, length, blocks)
    if plan is None:
        return
    # At the start and wherever a block begins during the stay, each share fits the room
    # the pods ended by then leave, less what the blocks hold then. With no expected start
    # the room is held for good from now, the pods it waits for counted as gone.
    if plan.start is None:
        moments = {NOW, math.inf} | {b for _, b, _, _ in spans}
    else:
        moments = {plan.start} | {b for _, b, _, _ in spans if plan.start < b < plan.start + length}
    for when in moments:
        for i, share in plan.shares.items():
            _, gpus, _, running = nodes[i]
            ended = [
                r
                for r in running
                if plan.start is None or (r[3] is not None and NOW + r[3] * MINUTE <= when)
            ]
            holding = sum(
                g for n, b, u, g in spans if n == i and b <= when and (when < u or math.isinf(u))
            )
            assert share[0] <= gpus + sum(r[1] for r in ended) - holding, (when, i)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 8),
            st.integers(0, 8),
            st.lists(
                st.tuples(
                    st.integers(1, 8),
                    st.integers(0, 4),
                    st.one_of(st.none(), st.integers(-30, 240)),  # past its end: ends now
                ),
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.tuples(st.integers(1, 8), st.integers(0, 4)), min_size=1, max_size=4),
    _BLOCKS,
    st.one_of(st.none(), st.integers(1, 240)),
)
# A stay of 30 min ends before an earlier reservation takes the whole node for good an hour
# from now: the node can hold the member now.
@example(layout=[(8, 0, [])], members=[(8, 0)], held=[(0, 60, None, 8)], stay=30)
def test_a_plan_skipping_moments_nothing_could_fill_is_the_plan_looking_at_each(
    layout: list[tuple[int, int, list[tuple[int, int, int | None]]]],
    members: list[tuple[int, int]],
    held: list[tuple[int, int | None, int | None, int]],
    stay: int | None,
) -> None:
    """Where no moment before the pods stating no runtime end could hold the members, the
    planner goes straight to that last moment (docs/backfill.md#cost): the same plan as
    trying every moment."""
    nodes: list[Node] = [
        (f"n{i}", g, c, [(f"p{i}-{j}", *r) for j, r in enumerate(running)])
        for i, (g, c, running) in enumerate(layout)
    ]
    blocks = _held(held, len(nodes))[1] if held else None
    length = math.inf if stay is None else stay * MINUTE
    skipping = _plain(_plan(nodes, members, length, blocks))
    with patch.object(planner, "_never_before_all_end", return_value=False):
        assert skipping == _plain(_plan(nodes, members, length, blocks))


def _plain(plan: Plan | None) -> object:
    if plan is None:
        return None
    return plan.start, plan.waits_for, {i: share.tolist() for i, share in plan.shares.items()}


def test_members_asking_nothing_fit_now_on_many_nodes() -> None:
    # Each node holds any number of them: summing that over five nodes must not wrap around.
    nodes: list[Node] = [(f"n{i}", 0, 0, [("busy", 8, 8, 30)]) for i in range(5)]
    plan = _plan(nodes, [(0, 0), (0, 0)])
    assert plan is not None and plan.start == NOW
