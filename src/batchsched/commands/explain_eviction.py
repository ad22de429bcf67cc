"""`batchsched explain` on a pod the plan evicts: by whom, under which rule, and which
protection it did not have (docs/explain.md#a-pod-the-plan-evicts).

The rule is read from the eviction and the preemptor as the run left them: a broken promise
(the victim ran past its stated runtime on a reservation's node, docs/backfill.md), reclaim (a
queue took back room another borrowed, docs/queues.md#reclaim), DaemonSet preemption (the preemptor
may run only on the victim's node), gang preemption (the preemptor's group preempted as one),
or the profile's single-pod preemption (DefaultPreemption, or PreemptionToleration with the
victims' toleration policies). The victim's side: its own
PodGroup if it went as one, its PriorityClass's toleration (and why it did not hold), and the
PodDisruptionBudgets covering it with how many pods the plan takes from each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batchsched.commands.policy import human_duration
from batchsched.decisions import Evict
from batchsched.framework.runtime import Framework
from batchsched.objects.daemonset import daemonset_node
from batchsched.objects.parse import format_time
from batchsched.objects.podgroup import group_key_of
from batchsched.objects.records import Pod
from batchsched.preemption.broken_promises import overrun
from batchsched.preemption.daemonset_victims import OPT_OUT_KEY, victim_class
from batchsched.preemption.evaluator import PreemptionStrategy
from batchsched.preemption.gang_victims import whole_group_of
from batchsched.preemption.toleration_policy import (
    TolerationPolicy,
    parse_policy,
    scheduled_since,
    toleration_end,
)
from batchsched.state.cluster import ClusterState

DAEMONSET = "DaemonSet preemption"
GANG = "gang preemption"
DEFAULT = "default preemption"
RECLAIM = "reclaim"
BROKEN_PROMISE = "broken promise"
TOLERATION = "preemption with toleration policies"
_VICTIM_CLASSES = (
    "a regular pod",
    "an owner pod (other pods name it in an ownerReference), taken only after regular pods",
    f'opted out ({OPT_OUT_KEY}: "false"), taken only when the others were not enough',
)


@dataclass
class BudgetStanding:
    """A PodDisruptionBudget covering the victim, and how many of its pods the plan evicts."""

    pdb: str
    disruptions_allowed: int
    evicted: int

    @property
    def violated(self) -> bool:
        return self.evicted > self.disruptions_allowed

    def to_json(self) -> dict[str, Any]:
        return {
            "pdb": self.pdb,
            "disruptionsAllowed": self.disruptions_allowed,
            "evicted": self.evicted,
            "violated": self.violated,
        }


@dataclass
class EvictionStory:
    node: str
    preemptor: str
    preemptor_priority: int
    plugin: str  # the plugin that chose the victims, as the eviction's reason names it
    rule: str  # DAEMONSET, GANG, DEFAULT, TOLERATION, RECLAIM or BROKEN_PROMISE
    why: str  # what the preemptor needed
    reason: str  # the eviction's reason, as the API gets it
    group: str = ""  # the victim's own PodGroup, preempted as one
    with_it: list[str] = field(default_factory=list)  # its members evicted with it
    toleration: str = ""  # why its PriorityClass did not protect it
    budgets: list[BudgetStanding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "preemptor": self.preemptor,
            "preemptorPriority": self.preemptor_priority,
            "plugin": self.plugin,
            "rule": self.rule,
            "why": self.why,
            "reason": self.reason,
            "group": self.group or None,
            "withIt": self.with_it,
            "toleration": self.toleration,
            "budgets": [b.to_json() for b in self.budgets],
        }


def eviction_story(
    state: ClusterState,
    framework: Framework,
    eviction: Evict,
    victim: Pod,
    evicted: Mapping[str, tuple[Pod, Evict]],
    now: datetime,
) -> EvictionStory:
    """Why `victim` is evicted by `eviction` at `now`, in a run that left `state` (without the
    victims) and evicted every pod of `evicted` (key -> the pod as in the files and its
    eviction); `framework` is the preemptor's profile."""
    preemptor = state.pods.by_key.get(eviction.preemptor)
    priority = state.policy.priority_of(preemptor) if preemptor is not None else 0
    if eviction.broken_promise is not None:
        rule = _broken_promise(state, eviction.broken_promise, victim, eviction.node, now)
    elif eviction.reclaim is not None:
        rule = _reclaim(state, eviction.reclaim, eviction.node)
    else:
        rule = _rule(state, framework, preemptor, priority, eviction.node)
    story = EvictionStory(
        eviction.node,
        eviction.preemptor,
        priority,
        eviction.reason.partition(":")[0],
        *rule,
        reason=eviction.reason,
    )
    group = whole_group_of(state, victim)
    if group is not None:
        story.group = group
        story.with_it = sorted(
            key
            for key, (pod, other) in evicted.items()
            if key != victim.key
            and other.preemptor == eviction.preemptor
            and group_key_of(pod) == group
        )
    if eviction.broken_promise is not None:
        story.toleration = (
            "none: a pod past its stated runtime yields to a reservation whatever its "
            "priority (only DaemonSet pods, system-critical pods and pods inside their "
            "PriorityClass's toleration window are kept)"
        )
    elif eviction.reclaim is not None:
        story.toleration = _reclaim_protection(state, victim, eviction.reclaim[1], now)
    else:
        story.toleration = _toleration(state, framework, story, victim)
    if story.rule == DAEMONSET:
        story.toleration += f"; it was {_VICTIM_CLASSES[victim_class(state, victim)]}"
    covering = state.policy.pdb_index.covering
    for key in covering(victim):
        taken = sum(1 for pod, _ in evicted.values() if key in covering(pod))
        story.budgets.append(BudgetStanding(key, state.policy.pdbs[key].disruptions_allowed, taken))
    return story


def _reclaim(state: ClusterState, queues: tuple[str, str], node: str) -> tuple[str, str]:
    """What allowed the reclaim: the rule's conditions, as they held when it was decided."""
    mine, theirs = queues
    return RECLAIM, (
        f"queue {mine} was within its fair share and queue {theirs} borrowed above its own; "
        f"taking its pods back made room on node {node} without leaving {theirs} below "
        f"{mine}'s share or any queue below its guaranteed amounts"
    )


def _broken_promise(
    state: ClusterState, holder: str, victim: Pod, node: str, now: datetime
) -> tuple[str, str]:
    """What allowed the eviction: the victim ran past the runtime it stated, and the
    reservation it sat on had come to its expected start (docs/backfill.md#broken-promises)."""
    late = overrun(state, victim, now)
    ran = "past its stated runtime" if late is None else late.how_far()
    return BROKEN_PROMISE, (
        f"the pod ran {ran}; node {node} was reserved for {holder}, whose expected start had "
        "come, and the pods past their stated runtime there had to go for it to start"
    )


def _reclaim_protection(state: ClusterState, victim: Pod, queue: str, now: datetime) -> str:
    """Why reclaim's protections did not hold the victim: its queue's reclaimMinRuntime and
    its PriorityClass's toleration window (docs/queues.md#reclaim)."""
    record = state.queues.queues.get(queue)
    runtime = record.reclaim_min_runtime if record is not None else 0.0
    started = victim.start_time
    ran = f"it had run {human_duration(int((now - started).total_seconds()))}" if started else ""
    said = (
        f"queue {queue} sets no reclaimMinRuntime"
        if not runtime
        else f"queue {queue}'s reclaimMinRuntime is {human_duration(int(runtime))}"
    )
    said += f" ({ran})" if ran else ""
    name = victim.priority_class_name
    pc = state.policy.priority_classes.get(name) if name else None
    policy = parse_policy(pc) if pc is not None else None
    if policy is None or not policy.valid or policy.toleration_seconds == 0:
        return f"{said}; its PriorityClass sets no toleration window"
    since = scheduled_since(victim)
    end = toleration_end(since, policy.toleration_seconds) if since is not None else None
    ended = f", which ended at {format_time(end)}" if end is not None else ""
    window = human_duration(policy.toleration_seconds)
    return f"{said}; PriorityClass {name}'s toleration window of {window}{ended}"


def _rule(
    state: ClusterState, framework: Framework, preemptor: Pod | None, priority: int, node: str
) -> tuple[str, str]:
    """Which rule evicted the victim, and what the preemptor needed."""
    if preemptor is None:
        return DEFAULT, "the preemptor is no longer known"
    if daemonset_node(preemptor) is not None:
        return DAEMONSET, f"the DaemonSet pod may run only on node {node}, which had no room"
    hook = framework.group_plugin
    group = hook.group_of(preemptor) if hook is not None else None
    record = state.groups.by_key.get(group) if group is not None else None
    if record is not None:
        return GANG, (
            f"PodGroup {group} (priority {priority}) fit nowhere and preempted as one: room for "
            f"{record.min_member} members at once, or no eviction at all"
        )
    rule = TOLERATION if _reads_tolerations(framework) else DEFAULT
    return rule, f"it fit on no node; evicting lower-priority pods made room on node {node}"


def _reads_tolerations(framework: Framework) -> bool:
    return any(
        isinstance(p, PreemptionStrategy) and p.reads_tolerations for p in framework.post_filters
    )


def _toleration(
    state: ClusterState, framework: Framework, story: EvictionStory, victim: Pod
) -> str:
    """Why the victim's PriorityClass did not protect it from this preemptor."""
    own = state.policy.priority_of(victim)
    name = victim.priority_class_name
    if story.rule in (DEFAULT, GANG) and not _reads_tolerations(framework):
        return f"the profile's {story.plugin} reads no toleration policy (its priority: {own})"
    pc = state.policy.priority_classes.get(name) if name else None
    if pc is None:
        return f"it names no PriorityClass (priority {own}): it has no toleration"
    policy = parse_policy(pc)
    if not policy.valid:
        return f"PriorityClass {name}'s toleration annotations cannot be read ({policy.error})"
    if policy == TolerationPolicy(pc.value + 1, 0):
        return f"PriorityClass {name} ({pc.value}) has no toleration policy"
    minimum = policy.minimum_preemptable_priority
    if story.preemptor_priority >= minimum:
        return (
            f"PriorityClass {name} tolerates preemptors below priority {minimum}; the "
            f"preemptor's is {story.preemptor_priority}"
        )
    seconds = policy.toleration_seconds
    if seconds == 0:
        return f"PriorityClass {name} sets minimum-preemptable-priority {minimum} but no time"
    if seconds < 0:
        return f"PriorityClass {name} tolerates preemptors below priority {minimum} forever"
    since = scheduled_since(victim)
    end = toleration_end(since, seconds) if since is not None else None
    ended = f", which ended at {format_time(end)}" if end is not None else ""
    return (
        f"PriorityClass {name} tolerates preemptors below priority {minimum} for "
        f"{human_duration(seconds)} after the pod is scheduled{ended}"
    )
