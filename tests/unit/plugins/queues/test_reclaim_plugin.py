"""Reclaim through the Queues PostFilter (docs/queues.md#reclaim): when it happens, what the
pending pod is told, and when it is tried again."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from batchsched.commands.schedule import build_state, run
from batchsched.config import default_config
from batchsched.decisions import Evict, Unschedulable
from batchsched.framework.interface import Cycle
from batchsched.objects.load import load_text
from batchsched.objects.parse import parse_time
from batchsched.objects.records import PodCondition
from batchsched.preemption.reclaim import first_members_asks
from batchsched.scheduling.scheduler import Scheduler
from tests.paths import ROOT

YOUNG = ROOT / "tests" / "scenarios" / "queues" / "reclaim-min-runtime.yaml"
AT = parse_time("2026-11-22T10:00:00Z")


def test_a_pod_waits_for_the_oldest_victim_to_come_of_age_then_reclaims() -> None:
    objects = load_text(YOUNG.read_text(), str(YOUNG))
    early = run(objects, default_config(), AT)
    assert "younger than its reclaimMinRuntime 10m" in early.unschedulable["default/a-1"]
    # b-1 started at 09:52: at 10:02 it has run 10 minutes and may be taken back.
    later = run(
        load_text(YOUNG.read_text(), str(YOUNG)), default_config(), AT + timedelta(minutes=2)
    )
    assert [e.pod for e in later.evictions] == ["default/b-1"]
    assert [(b.pod, b.node) for b in later.bindings] == [("default/a-1", "n1")]


def test_the_post_filter_asks_to_be_tried_again_when_the_oldest_comes_of_age() -> None:
    scheduler = Scheduler(build_state(load_text(YOUNG.read_text(), str(YOUNG))), default_config())
    state = scheduler.state
    pod = state.pods.by_key["default/a-1"]
    framework = scheduler.framework_for(pod)
    cycle = Cycle(state, pod, AT, state.pods.demand(pod), state.free_for(pod))
    diagnosis = framework.place(cycle, None)
    [queues] = [p for p in framework.post_filters if p.name == "Queues"]
    result = queues.post_filter(cycle, diagnosis)  # type: ignore[arg-type]
    assert result.retry_at == parse_time("2026-11-22T10:02:00Z")
    assert cycle.holds_until == parse_time("2026-11-22T10:02:00Z").timestamp()


GANG = """
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: train, labels: {batchsched.io/queue: team-a}}
spec: {minMember: 2}
""" + "".join(
    f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: train-{i}, labels: {{scheduling.x-k8s.io/pod-group: train}}}}
spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "4"}}}}}}]}}
"""
    for i in range(2)
)


def test_a_gang_is_tried_again_when_the_victims_it_needs_come_of_age() -> None:
    # team-b's pods come of age at 10:02, 10:04, 10:06 and 10:08 (started 09:52 to 09:58,
    # reclaimMinRuntime 10m); the gang of two 4-GPU members needs two of them.
    text = YOUNG.read_text().split("\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a-1")[0]
    scheduler = Scheduler(build_state(load_text(text + GANG, "gang")), default_config())
    first = scheduler.schedule_pass(AT)
    said = {d.pod: d.message for d in first if isinstance(d, Unschedulable)}
    assert "younger than its reclaimMinRuntime 10m" in said["default/train-0"]
    assert scheduler.queue.next_wakeup() == parse_time("2026-11-22T10:02:00Z").timestamp()
    # At 10:02 one pod may go: too few for minMember; tried again when the next comes of age.
    second = scheduler.schedule_pass(AT + timedelta(minutes=2))
    said = {d.pod: d.message for d in second if isinstance(d, Unschedulable)}
    assert "not enough for minMember" in said["default/train-0"]
    assert not [d for d in second if isinstance(d, Evict)]
    assert scheduler.queue.next_wakeup() == parse_time("2026-11-22T10:04:00Z").timestamp()
    third = scheduler.schedule_pass(AT + timedelta(minutes=4))
    assert sorted(d.pod for d in third if isinstance(d, Evict)) == ["default/b-1", "default/b-2"]


THREE_TEAMS = ROOT / "tests" / "scenarios" / "queues" / "reclaim-three-teams.yaml"


def test_a_victim_reported_with_its_disruption_target_condition_is_not_taken_twice() -> None:
    # In `run`, the scheduler writes a victim's DisruptionTarget condition before deleting
    # it: the watch reports that write (no deletionTimestamp yet). The victim must still
    # count as going, else the next pass takes its room (or the victim) a second time.
    objects = load_text(THREE_TEAMS.read_text(), str(THREE_TEAMS))
    scheduler = Scheduler(build_state(objects), default_config())
    first = [d for d in scheduler.schedule_pass(AT) if isinstance(d, Evict)]
    assert sorted(d.pod for d in first) == ["default/b-2", "default/b-4"]
    state = scheduler.state
    for evict in first:
        victim = state.pods.by_key[evict.pod]
        marked = PodCondition(
            "DisruptionTarget", "True", AT, "PreemptionByScheduler", "batchsched: reclaiming"
        )
        report = replace(victim, deletion_timestamp=None, conditions=(*victim.conditions, marked))
        state.upsert_pod(report)
    assert state.pods.terminating == {"default/b-2", "default/b-4"}
    second = scheduler.schedule_pass(AT + timedelta(seconds=1))
    assert not [d for d in second if isinstance(d, Evict)]
    # Set False (the disruption controller resets a stale one): the pod stays after all.
    stale = replace(marked, status="False")
    victim = state.pods.by_key["default/b-2"]
    state.upsert_pod(replace(victim, deletion_timestamp=None, conditions=(stale,)))
    assert state.pods.terminating == {"default/b-4"}


SPARE = ROOT / "tests" / "scenarios" / "queues" / "reclaim-spare-room.yaml"


def test_room_a_reclaim_frees_beyond_its_need_is_waited_for_only_within_fair_share() -> None:
    # b's p-1 (1 GPU) takes a-big (4 GPUs) back: 3 GPUs more come free on n1. b's p-2 (3 GPUs)
    # would take b to 9 of its 8: it is not nominated to wait for them (else, bound there,
    # it makes b borrow what a lost and a takes it back). a's q-1 (a at 8 of 8) waits for
    # them; q-2 (9 of 8) does not either.
    scheduler = Scheduler(build_state(load_text(SPARE.read_text(), str(SPARE))), default_config())
    first = scheduler.schedule_pass(AT)
    assert [d.pod for d in first if isinstance(d, Evict)] == ["default/a-big"]
    nominated = scheduler.state.nominations
    assert {key: scheduler.state.nodes.name(row) for key, row in nominated.items()} == {
        "default/p-1": "n1",
        "default/q-1": "n1",
    }
    said = {d.pod: d.message for d in first if isinstance(d, Unschedulable)}
    assert (
        "preemption: queue b would go over its fair share: it takes room once it is free"
        in (said["default/p-2"])
    )
    assert "queue a would go over its fair share" in said["default/q-2"]


MIN_MEMBER = ROOT / "tests" / "scenarios" / "queues" / "reclaim-gang-min-member.yaml"


def test_a_gang_asks_its_queue_for_the_members_its_attempt_places() -> None:
    # minMember 2 of four pending members of 4 GPUs: 8 GPUs (team-a's fair share), not 16.
    state = build_state(load_text(MIN_MEMBER.read_text(), str(MIN_MEMBER)))
    lead = state.pods.by_key["ml/train-0"]
    assert first_members_asks(state, lead)["nvidia.com/gpu"] == 8
    first = Scheduler(state, default_config()).schedule_pass(AT)
    assert sorted(d.pod for d in first if isinstance(d, Evict)) == ["ml/b-2", "ml/b-4"]
