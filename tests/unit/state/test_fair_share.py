"""Fair share by water-filling (docs/queues.md#fair-share): worked examples, one rule each,
and properties over random trees."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, Queue, QueueQuota
from batchsched.objects.records import Node, Pod
from batchsched.state.cluster import ClusterState
from batchsched.state.fair_share import Claim, divide, fair_shares, whole_weights
from batchsched.state.queues import QueueTree

GPU = "nvidia.com/gpu"


def q(name: str, parent: str = "", weight: float = 1.0, priority: int = 0, **gpu: Any) -> Queue:
    resources = {GPU: QueueQuota(**gpu)} if gpu else {}
    return Queue(name, QUEUE_API, parent, resources, weight=weight, priority=priority)


def gpu_shares(
    queues: list[Queue],
    demand: dict[str, int],
    cluster: int,
    weights: dict[str, float] | None = None,
) -> dict[str, int]:
    by_name = {x.name: x for x in queues}
    subtree: dict[str, dict[str, int]] = {}
    for leaf, amount in demand.items():
        name = leaf
        while name:
            total = subtree.setdefault(name, {})
            total[GPU] = total.get(GPU, 0) + amount
            name = by_name[name].parent
    moved = None if weights is None else {name: {GPU: w} for name, w in weights.items()}
    shares = fair_shares(by_name, subtree, {GPU: cluster}, moved)
    return {name: amounts[GPU] for name, amounts in shares.items()}


def test_the_surplus_goes_by_weight() -> None:
    # Two queues without quotas, weights 1 and 3, both asking for more than there is: the
    # 16 GPUs go 4 and 12 (as Volcano's proportion plugin divides by weight).
    shares = gpu_shares([q("a", weight=1), q("b", weight=3)], {"a": 100, "b": 100}, 16)
    assert shares == {"a": 4, "b": 12}


def test_what_a_queue_does_not_demand_goes_to_the_others() -> None:
    # b asks for 6 only: a takes the rest though its weight is lower.
    shares = gpu_shares([q("a", weight=1), q("b", weight=3)], {"a": 100, "b": 6}, 16)
    assert shares == {"a": 10, "b": 6}


def test_guaranteed_then_nominal_come_before_any_weight() -> None:
    # KAI's order: each queue's quota first, over-quota by weight after. a: 4 guaranteed,
    # 8 nominal; b: nothing, weight 9. Of 10 GPUs a gets its 8 before b's weight counts.
    queues = [q("a", guaranteed=4, nominal=8), q("b", weight=9)]
    assert gpu_shares(queues, {"a": 20, "b": 20}, 10) == {"a": 8, "b": 2}


def test_short_of_guarantees_they_are_split_in_proportion() -> None:
    queues = [q("a", guaranteed=6, nominal=6), q("b", guaranteed=2, nominal=2)]
    assert gpu_shares(queues, {"a": 6, "b": 2}, 4) == {"a": 3, "b": 1}


def test_guaranteed_counts_only_as_far_as_the_queue_demands() -> None:
    queues = [q("a", guaranteed=8, nominal=8), q("b")]
    assert gpu_shares(queues, {"a": 2, "b": 20}, 16) == {"a": 2, "b": 14}


def test_a_limit_caps_the_share_and_the_rest_spreads_again() -> None:
    queues = [q("a", limit=3), q("b"), q("c")]
    assert gpu_shares(queues, {"a": 50, "b": 50, "c": 50}, 15) == {"a": 3, "b": 6, "c": 6}


def test_higher_priority_takes_the_surplus_first() -> None:
    queues = [q("a", priority=1), q("b", weight=10)]
    assert gpu_shares(queues, {"a": 12, "b": 12}, 16) == {"a": 12, "b": 4}


def test_children_divide_what_their_parent_gets() -> None:
    # org (weight 3) gets 12 of 16 and splits them between its children by weight.
    queues = [
        q("org", weight=3),
        q("x", "org", weight=1),
        q("y", "org", weight=2),
        q("ops"),
    ]
    shares = gpu_shares(queues, {"x": 30, "y": 30, "ops": 30}, 16)
    assert shares == {"org": 12, "x": 4, "y": 8, "ops": 4}


def test_uneven_splits_give_the_units_left_by_largest_remainder_then_name() -> None:
    shares = gpu_shares([q("c"), q("a"), q("b")], {"a": 9, "b": 9, "c": 9}, 10)
    assert shares == {"a": 4, "b": 3, "c": 3}


def test_a_resource_no_queue_names_is_shared_by_weight() -> None:
    queues = {x.name: x for x in [q("a", weight=1), q("b", weight=1)]}
    demand = {"a": {"cpu": 30_000}, "b": {"cpu": 2_000}}
    shares = fair_shares(queues, demand, {"cpu": 16_000})
    assert shares["a"]["cpu"] == 14_000 and shares["b"]["cpu"] == 2_000


def test_effective_weights_replace_the_queues_own() -> None:
    queues = {x.name: x for x in [q("a"), q("b")]}
    demand = {"a": {GPU: 100}, "b": {GPU: 100}}
    shares = fair_shares(queues, demand, {GPU: 12}, weights={"a": {GPU: 2.0}})
    assert (shares["a"][GPU], shares["b"][GPU]) == (8, 4)


def test_a_weight_of_zero_takes_only_what_the_weighted_leave() -> None:
    # a (weight 0) gets nothing while b asks for all there is, and all b leaves otherwise:
    # a parent's amount is never kept from a child that asks for it.
    assert gpu_shares([q("a", weight=0), q("b")], {"a": 9, "b": 20}, 8) == {"a": 0, "b": 8}
    assert gpu_shares([q("a", weight=0), q("b")], {"a": 9, "b": 2}, 8) == {"a": 6, "b": 2}
    # Two of weight 0: equal parts of what is left, each within its demand and limit.
    queues = [q("a", weight=0), q("b"), q("c", weight=0, limit=2)]
    assert gpu_shares(queues, {"a": 9, "b": 2, "c": 9}, 12) == {"a": 8, "b": 2, "c": 2}
    assert gpu_shares(queues, {"a": 9, "b": 2, "c": 9}, 5) == {"a": 2, "b": 2, "c": 1}


def test_a_weight_decayed_to_zero_takes_what_is_left_by_its_own_weight() -> None:
    # Decayed usage moved a's and b's weights to 0 and d's up (state/queue_decay.py); c's own
    # weight is 0. d asks for 2 only: of the 20 left, a and b take by their own weights 1:3,
    # and c, of weight 0 of its own, only what they leave.
    queues = [q("a"), q("b", weight=3), q("c", weight=0), q("d")]
    moved = {"a": 0.0, "b": 0.0, "d": 5.0}
    demand = {"a": 100, "b": 100, "c": 100, "d": 2}
    assert gpu_shares(queues, demand, 22, moved) == {"a": 5, "b": 15, "c": 0, "d": 2}
    demand = {"a": 3, "b": 5, "c": 100, "d": 2}
    assert gpu_shares(queues, demand, 22, moved) == {"a": 3, "b": 5, "c": 12, "d": 2}


def test_dominant_ratio_reads_only_named_resources() -> None:
    tree = QueueTree()
    tree.upsert(q("a", nominal=4))
    usage = {"a": {GPU: 2, "cpu": 10_000}}
    shares = {"a": {GPU: 4, "cpu": 1}}
    assert tree.dominant_ratio("a", usage, shares, {GPU: 2}) == 1.0
    assert tree.dominant_ratio("a", {}, shares, {}) == 0.0
    assert tree.dominant_ratio("a", usage, {"a": {GPU: 0}}, {}) == math.inf


# ---- properties ------------------------------------------------------------------------


@st.composite
def trees(draw: st.DrawFn) -> tuple[dict[str, Queue], dict[str, int], int]:
    count = draw(st.integers(1, 8))
    queues: dict[str, Queue] = {}
    for i in range(count):
        name = f"q{i}"
        parent = draw(st.sampled_from(["", *queues])) if queues else ""
        guaranteed = draw(st.integers(0, 6))
        nominal = guaranteed + draw(st.integers(0, 6))
        limit = draw(st.one_of(st.none(), st.integers(nominal, nominal + 10)))
        queues[name] = q(
            name,
            parent,
            weight=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])),
            priority=draw(st.integers(0, 2)),
            guaranteed=guaranteed,
            nominal=nominal,
            limit=limit,
        )
    parents = {x.parent for x in queues.values()}
    leaves = [name for name in queues if name not in parents]
    demand = {leaf: draw(st.integers(0, 20)) for leaf in leaves}
    return queues, demand, draw(st.integers(0, 40))


@settings(max_examples=300, deadline=None)
@given(trees(), st.data())
def test_shares_stay_within_parent_demand_and_limit_and_honour_guarantees(
    tree: tuple[dict[str, Queue], dict[str, int], int], data: st.DataObject
) -> None:
    queues, demand, cluster = tree
    # Weights moved by decayed usage, 0 included, for some queues (the rest keep their own).
    moved = data.draw(
        st.one_of(
            st.none(),
            st.dictionaries(st.sampled_from(list(queues)), st.sampled_from([0.0, 0.25, 1.0, 3.0])),
        )
    )
    shares = gpu_shares(list(queues.values()), demand, cluster, moved)
    assert shares == gpu_shares(list(reversed(queues.values())), demand, cluster, moved)
    subtree = {name: 0 for name in queues}
    for leaf, amount in demand.items():
        name = leaf
        while name:
            subtree[name] += amount
            name = queues[name].parent
    for parent_name in ["", *queues]:
        kids = [x for x in queues.values() if x.parent == parent_name]
        have = cluster if not parent_name else shares[parent_name]
        caps = [
            subtree[k.name]
            if k.resources[GPU].limit is None
            else min(subtree[k.name], k.resources[GPU].limit)
            for k in kids
        ]
        # Never more than the parent has; all of it when the children ask for as much,
        # whatever their weights (0 included).
        assert sum(shares[k.name] for k in kids) == min(have, sum(caps))
        guarantees = sum(min(k.resources[GPU].guaranteed, subtree[k.name]) for k in kids)
        for kid in kids:
            quota = kid.resources[GPU]
            assert 0 <= shares[kid.name] <= subtree[kid.name]
            assert quota.limit is None or shares[kid.name] <= quota.limit
            if guarantees <= have:  # feasible: each gets its guarantee as far as it demands
                assert shares[kid.name] >= min(quota.guaranteed, subtree[kid.name])


def test_the_state_shares_schedulable_nodes_by_usage_and_pending_demand() -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 8, "cpu": 8000}))
    state.upsert_node(Node("n2", {GPU: 8, "cpu": 8000}))
    state.upsert_node(Node("cordoned", {GPU: 8}, unschedulable=True))
    state.upsert_queue(q("a", weight=3, nominal=0))  # naming the GPU: its share is computed
    state.upsert_queue(q("b", nominal=0))
    running = Pod("ml", "run", labels={QUEUE_LABEL: "a"}, requests={GPU: 2}, node_name="n1")
    state.upsert_pod(running)
    state.upsert_pod(Pod("ml", "wait", labels={QUEUE_LABEL: "b"}, requests={GPU: 3}))
    # a demands 2 (running), b 3 (pending): both get what they demand.
    shares = state.queue_fair_shares()
    assert (shares["a"][GPU], shares["b"][GPU]) == (2, 3)
    assert "cpu" not in shares["a"]  # named by no queue: nothing reads its share
    # More pending work in a: the 16 GPUs of the schedulable nodes split 3:1, b keeping 3.
    state.upsert_pod(Pod("ml", "big", labels={QUEUE_LABEL: "a"}, requests={GPU: 20}))
    shares = state.queue_fair_shares()
    assert (shares["a"][GPU], shares["b"][GPU]) == (13, 3)
    state.remove_pod("ml/wait")
    assert state.queue_fair_shares()["a"][GPU] == 16
    # Cordoning a node, or changing what it offers, changes what there is to share.
    state.upsert_node(Node("n2", {GPU: 8, "cpu": 8000}, unschedulable=True))
    assert state.queue_fair_shares()["a"][GPU] == 8
    state.upsert_node(Node("n1", {GPU: 4, "cpu": 8000}))
    assert state.queue_fair_shares()["a"][GPU] == 4
    state.remove_node("n1")
    assert state.queue_fair_shares()["a"][GPU] == 0


def test_the_worked_example_of_the_docs() -> None:
    def tree(x_guaranteed: int) -> list[Queue]:
        x = (
            q("x", "org", guaranteed=x_guaranteed, nominal=x_guaranteed)
            if x_guaranteed
            else q("x", "org")
        )
        return [q("org", weight=3), q("ops"), x, q("y", "org", weight=2)]

    assert gpu_shares(tree(0), {"x": 30, "y": 30, "ops": 30}, 16) == {
        "org": 12,
        "ops": 4,
        "x": 4,
        "y": 8,
    }
    assert gpu_shares(tree(0), {"x": 30, "y": 30, "ops": 2}, 16) == {
        "org": 14,
        "ops": 2,
        "x": 5,
        "y": 9,
    }
    assert gpu_shares(tree(6), {"x": 30, "y": 30, "ops": 2}, 16) == {
        "org": 14,
        "ops": 2,
        "x": 9,
        "y": 5,
    }


def _exact_divide(
    available: int, claims: list[Claim], weights: dict[str, Fraction], own: dict[str, Fraction]
) -> dict[str, int]:
    """The water-filling of one level in exact rationals (the arithmetic divide's whole
    numbers must reproduce): guaranteed, nominal, then the surplus by priority and weight,
    what is left by own weight, then equally."""

    def proportional(amount: int, parts: dict[str, Fraction]) -> dict[str, int]:
        total = sum(parts.values(), Fraction(0))
        exact = {n: amount * w / total for n, w in parts.items()}
        out = {n: math.floor(x) for n, x in exact.items()}
        for n in sorted(exact, key=lambda n: (out[n] - exact[n], n))[: amount - sum(out.values())]:
            out[n] += 1
        return out

    given = {c.name: 0 for c in claims}
    left = available
    for level in ("guaranteed", "nominal"):
        wants = {c.name: min(getattr(c, level), c.cap) - given[c.name] for c in claims}
        wants = {n: a for n, a in wants.items() if a > 0}
        if sum(wants.values()) > left:
            for n, a in proportional(left, {n: Fraction(a) for n, a in wants.items()}).items():
                given[n] += a
            return given
        for n, a in wants.items():
            given[n] += a
        left -= sum(wants.values())
    equal = dict.fromkeys(weights, Fraction(1))
    for priority in sorted({c.priority for c in claims}, reverse=True):
        for tier in (weights, own, equal):
            open_ = [c for c in claims if c.priority == priority and tier[c.name] > 0]
            open_ = [c for c in open_ if c.cap > given[c.name]]
            while open_ and left:
                total = sum((tier[c.name] for c in open_), Fraction(0))
                capped = [c for c in open_ if c.cap - given[c.name] <= left * tier[c.name] / total]
                if not capped:
                    parts = {c.name: tier[c.name] for c in open_}
                    for n, a in proportional(left, parts).items():
                        given[n] += a
                    left = 0
                    break
                for c in capped:
                    left -= c.cap - given[c.name]
                    given[c.name] = c.cap
                open_ = [c for c in open_ if c not in capped]
    return given


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # guaranteed
            st.integers(0, 3),  # more for nominal
            st.integers(0, 40),  # cap
            st.integers(0, 2),  # priority
            st.one_of(
                st.sampled_from([0.0, 0.1, 1 / 3, 0.7, 1.0, 2.5]),
                st.floats(0, 1e3, allow_subnormal=False),
            ),
            st.sampled_from([0.0, 0.5, 1.0, 3.0]),  # own weight
        ),
        min_size=1,
        max_size=8,
    ),
    st.integers(0, 100),
)
def test_whole_number_arithmetic_gives_the_exact_split(
    rows: list[tuple[int, int, int, int, float, float]], available: int
) -> None:
    # Effective weights are arbitrary floats (state/queue_decay.py): the split in scaled
    # whole numbers must be the split in exact rationals, remainders and ties included.
    floats = [row[4] for row in rows]
    owns = [row[5] for row in rows]
    claims = [
        Claim(f"q{i}", cap, g, g + more, priority, weight, own)
        for i, ((g, more, cap, priority, _, _), weight, own) in enumerate(
            zip(rows, whole_weights(floats), whole_weights(owns), strict=True)
        )
    ]
    weights = {c.name: Fraction(w) for c, w in zip(claims, floats, strict=True)}
    own = {c.name: Fraction(w) for c, w in zip(claims, owns, strict=True)}
    assert divide(available, claims) == _exact_divide(available, claims, weights, own)


def test_only_named_and_measured_resources_are_shared() -> None:
    state = ClusterState()
    state.upsert_node(Node("n1", {GPU: 8, "cpu": 8000}))
    state.upsert_queue(q("a"))
    state.upsert_queue(q("b", nominal=2))  # names the GPU only
    state.upsert_pod(Pod("ml", "wait", labels={QUEUE_LABEL: "a"}, requests={GPU: 3, "cpu": 10}))
    assert state.queue_fair_shares() == {"a": {GPU: 3}, "b": {GPU: 0}}
    # The simulator measures a resource no queue names: its shares are computed too.
    state.queues.measured = frozenset({"cpu"})
    assert state.queue_fair_shares() == {"a": {GPU: 3, "cpu": 10}, "b": {GPU: 0, "cpu": 0}}
