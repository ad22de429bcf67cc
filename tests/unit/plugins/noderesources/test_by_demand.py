"""What the resource plugins derive per demand: remembered against the Demand object."""

import numpy as np

from batchsched.plugins.noderesources.resource_allocation import ByDemand
from batchsched.state.resources import Demand


def _demand(amount: int) -> Demand:
    return Demand(np.array([0], dtype=np.intp), np.array([amount], dtype=np.int64), ((0, amount),))


def test_each_demand_and_facts_derive_once_and_the_last_answer_is_only_theirs() -> None:
    known: ByDemand[str] = ByDemand()
    derived: list[str] = []

    def derive(name: str) -> str:
        derived.append(name)
        return name

    one, two = _demand(1), _demand(2)
    assert known.get(one, "a", lambda: derive("one a")) == "one a"
    assert known.get(one, "a", lambda: derive("again")) == "one a"  # the last answer
    # Other facts or another demand (an equal one too) are not the last answer's.
    assert known.get(one, "b", lambda: derive("one b")) == "one b"
    assert known.get(two, "b", lambda: derive("two b")) == "two b"
    assert known.get(_demand(2), "b", lambda: derive("equal b")) == "equal b"
    assert known.get(one, "a", lambda: derive("again")) == "one a"  # remembered, not the last
    assert derived == ["one a", "one b", "two b", "equal b"]
