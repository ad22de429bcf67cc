"""Preemption for a required topology (docs/topology.md#preemption-inside-one-domain): the
victims all inside one domain, the one whose victims cost least; never two domains."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands.cli import main
from batchsched.commands.schedule import build_state
from batchsched.config import default_config
from batchsched.decisions import Bind, Evict, Nominate
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.topology import REQUIRED_ANNOTATION
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import pod, pod_group, priority_class
from tests.conftest import NOW, objects_of
from tests.paths import ROOT
from tests.unit.plugins.coscheduling.test_topology import GPU, RACK, member, rack_node

CLASSES = [priority_class("low", 10), priority_class("mid", 100), priority_class("high", 1000)]


def runner(name: str, node_name: str, level: str, group: str = "") -> dict[str, Any]:
    return pod(
        name,
        namespace="ml",
        node_name=node_name,
        priority_class=level,
        labels={GROUP_LABEL: group} if group else None,
        extra_requests={GPU: "8"},
    )


def high_gang(name: str, size: int) -> list[dict[str, Any]]:
    group = pod_group(name, size)
    group["metadata"]["annotations"] = {REQUIRED_ANNOTATION: RACK}
    return [group, *(member(f"{name}-{i}", name, priority_class="high") for i in range(size))]


def scheduler(*manifests: dict[str, Any]) -> Scheduler:
    return Scheduler(build_state(objects_of(*CLASSES, *manifests)), default_config())


def four_nodes() -> list[dict[str, Any]]:
    return [rack_node(n, f"rack-{n[0]}") for n in ("a0", "a1", "b0", "b1")]


def test_the_cheapest_victims_in_two_racks_are_not_taken_together() -> None:
    # One low pod per rack would be the cheapest choice cluster-wide, but it spans two
    # racks: the gang takes a rack whole, rack-a (equal cost, the first value).
    sched = scheduler(
        *four_nodes(),
        runner("la", "a0", "low"),
        runner("ma", "a1", "mid"),
        runner("lb", "b0", "low"),
        runner("mb", "b1", "mid"),
        *high_gang("train", 2),
    )
    decisions = sched.schedule_pass(NOW)
    assert sorted(d.pod for d in decisions if isinstance(d, Evict)) == ["ml/la", "ml/ma"]
    assert sorted((d.pod, d.node) for d in decisions if isinstance(d, Nominate)) == [
        ("ml/train-0", "a0"),
        ("ml/train-1", "a1"),
    ]
    assert "evicting 2 pod(s) in example.com/rack rack-a" in sched.messages["ml/train-0"]
    for victim in ("ml/la", "ml/ma"):
        sched.state.remove_pod(victim)
    later = sched.schedule_pass(NOW + timedelta(seconds=10))
    assert sorted((d.pod, d.node) for d in later if isinstance(d, Bind)) == [
        ("ml/train-0", "a0"),
        ("ml/train-1", "a1"),
    ]


def test_the_rack_whose_victims_cost_least_is_chosen() -> None:
    sched = scheduler(
        *four_nodes(),
        runner("ma", "a0", "mid"),
        runner("la", "a1", "low"),
        runner("lb0", "b0", "low"),
        runner("lb1", "b1", "low"),
        *high_gang("train", 2),
    )
    decisions = sched.schedule_pass(NOW)
    assert sorted(d.pod for d in decisions if isinstance(d, Evict)) == ["ml/lb0", "ml/lb1"]


def test_a_victim_gang_spread_over_two_racks_is_never_taken() -> None:
    # The low gang runs on a1 and b0: evicting it would evict in two racks.
    manifests = [
        *four_nodes(),
        pod_group("spread", 2),
        runner("s-0", "a1", "low", "spread"),
        runner("s-1", "b0", "low", "spread"),
        runner("la", "a0", "low"),
        *high_gang("train", 2),
    ]
    sched = scheduler(*manifests)
    decisions = sched.schedule_pass(NOW)
    assert not [d for d in decisions if isinstance(d, Evict | Bind)]
    message = sched.messages["ml/train-0"]
    assert "preemption: 1 pod(s) inside single example.com/rack domains may be preempted" in (
        message
    )
    # A third rack holding two low pods is where it preempts.
    sched = scheduler(
        *manifests,
        rack_node("c0", "rack-c"),
        rack_node("c1", "rack-c"),
        runner("lc0", "c0", "low"),
        runner("lc1", "c1", "low"),
    )
    decisions = sched.schedule_pass(NOW)
    assert sorted(d.pod for d in decisions if isinstance(d, Evict)) == ["ml/lc0", "ml/lc1"]


def test_without_topology_the_cheapest_victims_may_span_racks() -> None:
    sched = scheduler(
        *four_nodes(),
        runner("la", "a0", "low"),
        runner("ma", "a1", "mid"),
        runner("lb", "b0", "low"),
        runner("mb", "b1", "mid"),
        pod_group("train", 2),
        *(member(f"train-{i}", "train", priority_class="high") for i in range(2)),
    )
    decisions = sched.schedule_pass(NOW)
    assert sorted(d.pod for d in decisions if isinstance(d, Evict)) == ["ml/la", "ml/lb"]


def test_the_example_preempts_in_one_rack(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(ROOT / "examples" / "topology" / "preemption.yaml")
    assert main(["schedule", "-f", example, "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(e["pod"] for e in out["evictions"]) == ["ml/infer-a1", "ml/infer-a2"]
    assert {b["pod"]: b["node"] for b in out["bindings"]} == {
        "ml/allreduce-0": "a1",
        "ml/allreduce-1": "a2",
    }
    [group] = out["podGroups"]
    assert group["topology"] == {"key": RACK, "domains": ["rack-a"]}


# ---- property: a preemption for a required gang evicts within one domain -----------------

RUNNERS = st.lists(
    st.tuples(st.sampled_from(["low", "mid", "high", None]), st.booleans()), min_size=6, max_size=6
)
GANGS = st.lists(st.integers(1, 3), min_size=1, max_size=3)


@settings(max_examples=30, deadline=None)
@given(RUNNERS, GANGS)
def test_preemption_for_a_required_gang_stays_in_one_domain(
    runners: list[tuple[str | None, bool]], gangs: list[int]
) -> None:
    racks = {f"{r}{i}": f"rack-{r}" for r in "abc" for i in range(2)}
    manifests: list[dict[str, Any]] = [rack_node(n, rack) for n, rack in racks.items()]
    # A runner in a victim gang ("pair") when asked: the pairs span racks a and b, b and c.
    names = sorted(racks)
    for i, (level, paired) in enumerate(runners):
        if level is not None:
            group = f"pair{i // 3}" if paired else ""
            manifests.append(runner(f"run-{i}", names[i], level, group))
    for p in ("pair0", "pair1"):
        manifests.append(pod_group(p, 1))
    for g, size in enumerate(gangs):
        manifests += high_gang(f"g{g}", size)

    def run() -> list[list[Any]]:
        sched = scheduler(*manifests)
        passes = []
        for step in range(4):
            decisions = sched.schedule_pass(NOW + timedelta(seconds=10 * step))
            passes.append(decisions)
            evicted: dict[str, set[str]] = {}
            for d in decisions:
                if isinstance(d, Evict):
                    evicted.setdefault(d.preemptor.rsplit("-", 1)[0], set()).add(racks[d.node])
                    sched.state.remove_pod(d.pod)
            assert all(len(found) == 1 for found in evicted.values()), evicted
            sched.queue.flush()
        placed: dict[str, set[str]] = {}
        for decisions in passes:
            for d in decisions:
                if isinstance(d, Bind):
                    placed.setdefault(d.pod.rsplit("-", 1)[0], set()).add(racks[d.node])
        assert all(len(found) == 1 for found in placed.values()), placed
        return passes

    assert run() == run()  # same input, same decisions


# ---- seeing it: each domain as the search saw it (explain) ------------------------------


def test_the_search_names_each_domains_victims_and_the_cheapest() -> None:
    sched = scheduler(
        *four_nodes(),
        runner("la", "a0", "low"),
        runner("ma", "a1", "mid"),
        runner("lb", "b0", "low"),
        runner("mb", "b1", "mid"),
        *high_gang("train", 2),
    )
    framework = sched.default_framework
    assert framework.group_plugin is not None
    seen = framework.group_plugin.domain_preemption(framework, sched.state, NOW, "ml/train")
    assert seen is not None
    assert (seen.key, seen.resource, seen.needed, seen.chosen) == (RACK, GPU, 16, "rack-a")
    assert [(d.value, d.room, d.victims) for d in seen.tried] == [
        ("rack-a", 16, ("ml/la", "ml/ma")),
        ("rack-b", 16, ("ml/lb", "ml/mb")),
    ]


def _no_rack_frees_enough() -> list[dict[str, Any]]:
    """rack-a: a low pod and one of a gang spread over two racks (never taken); rack-b: the
    spread gang's other pod and a free node; rack-c: 16 GPUs free or takeable, but 4 free on
    each of two nodes beside high pods: only one member would fit, on the low pod's node."""
    quarter = {GPU: "4"}
    return [
        *four_nodes(),
        pod_group("spread", 2),
        runner("s-0", "a1", "low", "spread"),
        runner("s-1", "b0", "low", "spread"),
        runner("la", "a0", "low"),
        *(rack_node(f"c{i}", "rack-c") for i in range(3)),
        pod("hc0", namespace="ml", node_name="c0", priority_class="high", extra_requests=quarter),
        pod("hc1", namespace="ml", node_name="c1", priority_class="high", extra_requests=quarter),
        runner("lc2", "c2", "low"),
        *high_gang("train", 2),
    ]


def test_explain_shows_each_domains_preemption(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    manifests = tmp_path / "racks.yaml"
    manifests.write_text(yaml.safe_dump_all([*CLASSES, *_no_rack_frees_enough()]))
    argv = ["explain", "ml/train-0", "-f", str(manifests), "--now", "2026-11-22T10:00:00Z"]
    assert main([*argv, "-o", "json"]) == 0
    gang = json.loads(capsys.readouterr().out)["gang"]
    assert gang["domainPreemption"] == {
        "key": RACK,
        "resource": GPU,
        "needed": 16,
        "chosen": None,
        "domains": [
            {"domain": "rack-a", "room": 8, "searched": False, "victims": None},
            {"domain": "rack-b", "room": 8, "searched": False, "victims": None},
            {"domain": "rack-c", "room": 16, "searched": True, "victims": None},
        ],
    }
    assert main(argv) == 0
    text = capsys.readouterr().out
    table = text.split("PREEMPTION BY DOMAIN example.com/rack: victims inside one domain, "
                       "needing 16 nvidia.com/gpu\n")[1].split("\n\n")[0]  # fmt: skip
    assert [line.split(maxsplit=2) for line in table.splitlines()] == [
        ["DOMAIN", "FREE+TAKEABLE", "VICTIMS"],
        ["rack-a", "8", "not searched: too little nvidia.com/gpu even with every takeable pod"],
        ["rack-b", "8", "not searched: too little nvidia.com/gpu even with every takeable pod"],
        ["rack-c", "16", "no victims make room for minMember members"],
    ]
