"""Decayed usage is stepped lazily (state/queue_decay.py: a queue catches up on the steps it
missed only when its usage moves or its amounts are read): whatever the clock, the usage and
the reads, it holds exactly (to the last bit) what stepping every queue at every step with
`U <- U * 0.5^(dt / halfLife) + usage * dt` holds (docs/queues.md#fairness-over-time), and
the cluster tells it every queue whose usage moved."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.parse import read_node, read_pod
from batchsched.objects.queue_membership import QUEUE_LABEL
from batchsched.objects.queues import QUEUE_API, read_queue
from batchsched.state.cluster import ClusterState
from batchsched.state.queue_decay import Decay, DecayedUsage
from tests.builders import node, pod

SETTINGS = settings(max_examples=150, deadline=None)
GPU = "nvidia.com/gpu"
QUEUES = ("a", "b", "c")
RESOURCES = (GPU, "cpu")
Amounts = dict[str, dict[str, float]]


class Eager:
    """Every queue stepped at every step, as the formula reads."""

    def __init__(self, half_life: float) -> None:
        self.half_life = half_life
        self.usage: Amounts = {}
        self.at: float | None = None

    def advance(
        self, now: float, current: Mapping[str, Mapping[str, int]], resources: Collection[str]
    ) -> None:
        if self.at is None or now < self.at:
            self.at = now
            return
        dt = now - self.at
        if dt == 0:
            return
        factor = 0.5 ** (dt / self.half_life)
        stepped: Amounts = {}
        for queue in self.usage.keys() | current.keys():
            old, used = self.usage.get(queue, {}), current.get(queue, {})
            kept = {}
            for r in resources:
                amount = old.get(r, 0.0) * factor + used.get(r, 0) * dt
                if amount > 1e-9:
                    kept[r] = amount
            if kept:
                stepped[queue] = kept
        self.usage, self.at = stepped, now

    def restore(self, queue: str, amounts: Mapping[str, float], stored_at: float) -> None:
        assert self.at is not None
        factor = 0.5 ** (max(self.at - stored_at, 0.0) / self.half_life)
        kept = {r: v * factor for r, v in amounts.items() if v * factor > 1e-9}
        if kept:
            self.usage[queue] = kept
        else:
            self.usage.pop(queue, None)


usages = st.dictionaries(
    st.sampled_from(QUEUES),
    st.dictionaries(st.sampled_from(RESOURCES), st.sampled_from([0, 1, 4, 1000, 10**9])),
)
steps = st.lists(
    st.tuples(
        st.sampled_from([0.0, 1e-12, 1e-7, 0.5, 3.0, 600.0, 1e5, -2.0]),  # the clock's move
        usages,  # the usage now of the queues it names
        st.sampled_from(["", "read", "restore", "forget", "resources"]),
    ),
    min_size=1,
    max_size=60,
)


@SETTINGS
@given(steps, st.sampled_from([1e-3, 1.0, 60.0, 86400.0]))
def test_lazy_steps_hold_what_stepping_every_queue_holds(
    script: list[tuple[float, dict[str, dict[str, int]], str]], half_life: float
) -> None:
    lazy, eager = DecayedUsage(Decay(half_life)), Eager(half_life)
    now, current = 1000.0, {q: {GPU: 0} for q in QUEUES}
    resources: frozenset[str] = frozenset({GPU})
    for move, changes, act in script:
        now += move
        for queue, amounts in changes.items():
            current[queue] = {**current[queue], **amounts}
        if act == "resources":
            resources = frozenset(RESOURCES) if resources == {GPU} else frozenset({GPU})
        lazy.advance(now, current, resources, moved=set(changes))
        eager.advance(now, current, resources)
        if act == "restore":
            lazy.restore("b", {GPU: 5e4, "cpu": 7.0}, now - 30.0, now)
            eager.restore("b", {GPU: 5e4, "cpu": 7.0}, now - 30.0)
        elif act == "forget":
            lazy.forget(["c"])
            eager.usage.pop("c", None)
        if act == "read":
            assert lazy.usage == eager.usage
        assert lazy.at == eager.at
    assert lazy.usage == eager.usage


def queue_manifest(name: str) -> object:
    return read_queue(
        {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"resources": {GPU: {"nominal": 2}}},
        }
    )


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["bind", "remove", "pend"]),
            st.integers(0, 5),  # which pod
            st.sampled_from(QUEUES),
            st.integers(1, 4),  # its GPUs
            st.sampled_from([0.0, 5.0, 3600.0]),  # how far the clock moves before the pass
        ),
        max_size=40,
    )
)
def test_the_cluster_steps_decayed_usage_with_every_queue_whose_usage_moved(
    script: list[tuple[str, int, str, int, float]],
) -> None:
    state = ClusterState()
    state.apply("Node", read_node(node("n1", cpu="64", nvidia_com__gpu="64")))
    for name in QUEUES:
        state.apply("Queue", queue_manifest(name))
    state.queues.use_decay(Decay(half_life=3600.0))
    eager = Eager(3600.0)
    now = 0.0
    for act, i, leaf, gpus, move in script:
        name = f"p{i}"
        if act == "remove":
            state.remove("Pod", f"default/{name}")
        else:
            bound = "n1" if act == "bind" else ""
            labels = {QUEUE_LABEL: leaf}
            manifest = pod(name, labels=labels, extra_requests={GPU: str(gpus)}, node_name=bound)
            state.apply("Pod", read_pod(manifest))
        now += move
        eager.advance(now, state.queue_usage(), state.queues.shared())
        state.advance_queue_usage(now)
        decayed = state.queues.decayed
        assert decayed is not None
        assert decayed.usage == eager.usage
