"""The PodGroup status controller (controllers/podgroups.py): phases, updates after each
pass, and the warnings that still hold."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.commands.schedule import build_state
from batchsched.config import default_config, parse_config
from batchsched.controllers import Controllers, current_warnings
from batchsched.controllers.podgroups import compute_status
from batchsched.decisions import PodGroupUpdate, Warn
from batchsched.objects.podgroup import GROUP_LABEL
from batchsched.objects.records import Pod, PodGroup
from batchsched.scheduling.scheduler import Scheduler
from tests.builders import node, pod
from tests.builders import pod_group as group
from tests.conftest import NOW, objects_of


def member(name: str, grp: str, cpu: str = "4", **kw: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, memory=None, namespace="ml", labels={GROUP_LABEL: grp}, **kw)


def scheduler_for(*manifests: dict[str, Any], config: Any = None) -> Scheduler:
    state = build_state(objects_of(*manifests))
    return Scheduler(state, config or default_config())


def status_of(min_member: int, phases: list[tuple[str, bool]], old: str = "Pending") -> str:
    grp = PodGroup("ml", "g", min_member)
    grp.status.phase = old
    members = [
        Pod("ml", f"p{i}", phase=phase, node_name="n" if on_node else "")
        for i, (phase, on_node) in enumerate(phases)
    ]
    return compute_status(grp, members, NOW).phase


@pytest.mark.parametrize(
    ("min_member", "phases", "old", "expected"),
    [
        (3, [("Pending", False)] * 2, "Pending", "Pending"),
        (3, [("Pending", False)] * 3, "Pending", "Scheduling"),
        (2, [("Running", True), ("Pending", True), ("Pending", False)], "Scheduling", "Running"),
        (2, [("Succeeded", True), ("Running", True)], "Running", "Running"),
        (2, [("Succeeded", True), ("Succeeded", True)], "Running", "Finished"),
        (2, [("Failed", True), ("Running", True)], "Running", "Failed"),
        (3, [("Failed", True), ("Running", True)], "Running", "Pending"),
        (1, [], "Finished", "Finished"),
        (1, [("Running", True)], "Failed", "Failed"),
    ],
)
def test_phase_transitions(
    min_member: int, phases: list[tuple[str, bool]], old: str, expected: str
) -> None:
    assert status_of(min_member, phases, old) == expected


def test_status_updates_are_emitted_when_they_change_only() -> None:
    sched = scheduler_for(node("n1", cpu="8"), group("g", 2), member("a", "g"), member("b", "g"))
    Controllers(sched)
    updates = [d for d in sched.schedule_pass(NOW) if isinstance(d, PodGroupUpdate)]
    assert len(updates) == 1
    status = updates[0].status
    assert (status.phase, status.running, status.admitted) == ("Running", 2, 2)
    assert status.schedule_start_time == NOW
    assert not [d for d in sched.schedule_pass(NOW) if isinstance(d, PodGroupUpdate)]
    done = sched.state.pods.by_key["ml/a"]
    done.phase = "Succeeded"
    sched.state.upsert_pod(done)
    after = [d for d in sched.schedule_pass(NOW) if isinstance(d, PodGroupUpdate)]
    assert [(u.status.phase, u.status.running, u.status.succeeded) for u in after] == [
        ("Running", 1, 1)
    ]


def test_no_status_where_no_profile_schedules_groups() -> None:
    off = {"disabled": [{"name": "Coscheduling"}]}
    plain = parse_config(
        {
            "profiles": [
                {
                    "plugins": {
                        "queueSort": {"enabled": [{"name": "PrioritySort"}], **off},
                        "preFilter": off,
                        "permit": off,
                    }
                }
            ]
        }
    )
    sched = scheduler_for(
        node("n1", cpu="8"), group("g", 2), member("a", "g"), member("b", "g"), config=plain
    )
    Controllers(sched)
    assert sched.after_pass == []
    assert not [d for d in sched.schedule_pass(NOW) if isinstance(d, PodGroupUpdate)]


def test_a_statuses_report_lists_every_group_with_members() -> None:
    sched = scheduler_for(node("n1", cpu="8"), group("g", 2), group("empty", 1), member("a", "g"))
    controllers = Controllers(sched)
    sched.schedule_pass(NOW)
    assert sorted(controllers.pod_groups.statuses()) == ["ml/g"]


def test_a_waiting_group_keeps_its_last_warning_until_it_runs() -> None:
    sched = scheduler_for(node("n1", cpu="8"), group("g", 2), member("a", "g"), member("b", "g"))
    earlier = Warn("PodGroup ml/g", "0/2 members can run (0 bound or succeeded, 0 fit); ...")
    waiting = Warn("PodGroup ml/g", "1/2 members can run (0 bound or succeeded, 1 fit); ...")
    other = Warn("Node n1", "bad annotation")
    assert current_warnings(sched.state, [earlier, other, waiting, other]) == [other, waiting]
    Controllers(sched)
    sched.schedule_pass(NOW)  # both members bind: the group no longer waits
    assert current_warnings(sched.state, [waiting, other]) == [other]
