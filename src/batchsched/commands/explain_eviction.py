"""`batchsched explain` on a pod the plan evicts: by whom, under which rule, and which
protection it did not have (docs/explain.md#a-pod-the-plan-evicts).

The rule is read from the eviction and the preemptor as the run left them: DaemonSet
preemption (the preemptor may run only on the victim's node), gang preemption (the
preemptor's group preempted as one), or the profile's single-pod preemption (DefaultPreemption,
or PreemptionToleration with the victims' toleration policies). The victim's side: its own
PodGroup if it went as one, its PriorityClass's toleration (and why it did not hold), and the
PodDisruptionBudgets covering it with how many pods the plan takes from each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from batchsched.commands.policy import human_duration
from batchsched.decisions import Evict
from batchsched.framework.runtime import Framework
from batchsched.objects.daemonset import daemonset_node
from batchsched.objects.parse import format_time
from batchsched.objects.podgroup import group_key_of
from batchsched.objects.records import Pod
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
    rule: str  # DAEMONSET, GANG, DEFAULT or TOLERATION
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
) -> EvictionStory:
    """Why `victim` is evicted by `eviction`, in a run that left `state` (without the
    victims) and evicted every pod of `evicted` (key -> the pod as in the files and its
    eviction); `framework` is the preemptor's profile."""
    preemptor = state.pods.by_key.get(eviction.preemptor)
    priority = state.policy.priority_of(preemptor) if preemptor is not None else 0
    story = EvictionStory(
        eviction.node,
        eviction.preemptor,
        priority,
        eviction.reason.partition(":")[0],
        *_rule(state, framework, preemptor, priority, eviction.node),
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
    story.toleration = _toleration(state, framework, story, victim)
    if story.rule == DAEMONSET:
        story.toleration += f"; it was {_VICTIM_CLASSES[victim_class(state, victim)]}"
    covering = state.policy.pdb_index.covering
    for key in covering(victim):
        taken = sum(1 for pod, _ in evicted.values() if key in covering(pod))
        story.budgets.append(BudgetStanding(key, state.policy.pdbs[key].disruptions_allowed, taken))
    return story


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
