"""`batchsched explain NS/POD`: why one pod is where it is, or why it is pending.

The manifests are scheduled to the end first (as `batchsched schedule` does); the pod is then
judged against the cluster as it stands, through the profile's own plugins: each node's first
failing filter, or each score plugin's score and the weighted total; for a pod that fits
nowhere, the preemption candidates with the minimal victims per node (the preemption
evaluator, `preemption.evaluator`, node by node: the rule the plugins apply to every node at
once), the pods protected by a toleration policy and until when, PDB violations; and for a
gang member the group's members and minMember, and the group's preemption instead of the
member's alone (a gang preempts as one); for a pending pod in a queue, each other queue's
standing for reclaim (the rule that keeps its pods). A pod bound during the run is judged
with its own binding taken back, so its node's verdict shows why it was chosen. A running
pod the plan evicts is told by whom and under which rule (explain_eviction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from batchsched.commands.explain_eviction import EvictionStory, eviction_story
from batchsched.commands.schedule import HeldStart, OneShotResult, settle
from batchsched.config import SchedulerConfig
from batchsched.framework.interface import Cycle
from batchsched.framework.runtime import Framework
from batchsched.objects.errors import InputError
from batchsched.objects.load import Objects
from batchsched.objects.parse import format_time
from batchsched.objects.records import Pod
from batchsched.objects.runtime_bound import stated_runtime
from batchsched.preemption.evaluator import Evaluator, strategy_of
from batchsched.preemption.reasons import preemption_said
from batchsched.preemption.reclaim import Reclaimer, ReclaimStrategy, Standing, first_members_asks
from batchsched.preemption.victims import NodeVictims
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.nodes import BoolArray
from batchsched.state.topology import DomainPreemption, DomainSearch


@dataclass
class NodeVerdict:
    node: str
    filter: str = ""  # the first filter that failed; "" for a feasible node
    reason: str = ""
    scores: dict[str, int] = field(default_factory=dict)  # plugin -> raw score 0..100
    total: int | None = None  # weighted sum, feasible nodes only

    def to_json(self) -> dict[str, Any]:
        if self.filter:
            return {"node": self.node, "filter": self.filter, "reason": self.reason}
        return {"node": self.node, "scores": self.scores, "total": self.total}


@dataclass
class Protected:
    pod: str
    klass: str
    until: datetime | None  # None: for as long as the class's policy stands

    def to_json(self) -> dict[str, Any]:
        until = format_time(self.until) if self.until is not None else None
        return {"pod": self.pod, "class": self.klass, "until": until}


@dataclass
class Candidate:
    """A node where preemption could help: its victims, or why it cannot host the pod."""

    node: str
    victims: list[str] = field(default_factory=list)
    pdb_violations: list[str] = field(default_factory=list)
    protected: list[Protected] = field(default_factory=list)
    missing_classes: list[str] = field(default_factory=list)
    works: bool = False
    why: str = ""  # why no victim set works here

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "works": self.works,
            "victims": self.victims,
            "pdbViolations": self.pdb_violations,
            "protected": [p.to_json() for p in self.protected],
            "missingClasses": self.missing_classes,
            "why": self.why,
        }


@dataclass
class GangStory:
    group: str
    min_member: int
    phase: str
    members: dict[str, str]  # pod -> node, or "" while pending
    # A pending group's required topology: the domains its next attempt tries (topology.md).
    domains: DomainSearch | None = None
    # And, when it preempts, each domain as its preemption inside one domain searches it.
    preemption: DomainPreemption | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group": self.group,
            "minMember": self.min_member,
            "phase": self.phase,
            "members": [{"pod": p, "node": n} for p, n in self.members.items()],
        }
        if self.domains is not None:
            search = self.domains
            out["topology"] = {
                "key": search.key,
                "resource": search.resource,
                "needed": search.needed,
                "domains": [
                    {"domain": d.value, "free": d.free, "membersFit": d.placed}
                    for d in search.tried
                ],
            }
        if self.preemption is not None:
            seen = self.preemption
            out["domainPreemption"] = {
                "key": seen.key,
                "resource": seen.resource,
                "needed": seen.needed,
                "chosen": seen.chosen,
                "domains": [
                    {
                        "domain": d.value,
                        "room": d.room,
                        "searched": d.room >= seen.needed,
                        "victims": None if d.victims is None else list(d.victims),
                    }
                    for d in seen.tried
                ],
            }
        return out


@dataclass
class ReclaimStory:
    """A pending pod's reclaim (docs/queues.md#reclaim): each other queue's standing."""

    queue: str  # the pod's leaf queue
    summary: str
    standings: list[Standing] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "summary": self.summary,
            "queues": [
                {
                    "queue": s.side.leaf,
                    "level": s.side.level,
                    "against": s.side.own_level,
                    "ratio": _finite(s.side.ratio),
                    "againstRatio": _finite(s.side.target),
                    "pods": s.pods,
                    "takeable": s.takeable,
                    "tooYoung": s.young,
                    "inTolerationWindow": s.tolerated,
                    "rule": s.rule,
                    "why": s.why,
                }
                for s in self.standings
            ],
        }


def _finite(ratio: float) -> float | None:
    """A dominant ratio for JSON: null where it is infinite (a fair share of 0)."""
    return round(ratio, 4) if math.isfinite(ratio) else None


@dataclass
class Explanation:
    pod: str
    now: datetime
    priority: int
    status: str  # "running" (from the files), "evicted", "bound" (in this run) or "pending"
    node: str = ""  # where it runs or was bound
    message: str = ""  # the run's unschedulable message for a pending pod
    pre_filter: str = ""  # a pre-filter's rejection, if any
    nodes: list[NodeVerdict] = field(default_factory=list)
    chosen: str = ""
    chosen_why: str = ""
    preemption: str = ""  # the pod's standing for preemption, in a sentence
    candidates: list[Candidate] = field(default_factory=list)
    preemption_node: str = ""
    evicted_for_it: list[str] = field(default_factory=list)
    gang: GangStory | None = None
    eviction: EvictionStory | None = None  # for an evicted pod
    runtime: int | None = None  # its stated runtime in seconds (docs/backfill.md)
    reservation: HeldStart | None = None  # what it (or its gang) holds
    reclaim: ReclaimStory | None = None  # a pending pod in a queue that reclaim did not help

    def _backfill_json(self) -> dict[str, Any]:
        held = self.reservation
        return {
            "statedRuntimeSeconds": self.runtime,
            "reservation": None if held is None else held.to_json(),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "now": format_time(self.now),
            "priority": self.priority,
            "status": self.status,
            "node": self.node,
            "message": self.message,
            "preFilter": self.pre_filter,
            "nodes": [n.to_json() for n in self.nodes],
            "chosen": {"node": self.chosen, "why": self.chosen_why},
            "preemption": {
                "summary": self.preemption,
                "node": self.preemption_node,
                "candidates": [c.to_json() for c in self.candidates],
                "evictedForIt": self.evicted_for_it,
            },
            "gang": self.gang.to_json() if self.gang is not None else None,
            "eviction": self.eviction.to_json() if self.eviction is not None else None,
            "backfill": self._backfill_json(),
            "reclaim": self.reclaim.to_json() if self.reclaim is not None else None,
        }


_KEYS_SHOWN = 10


def _not_found(key: str, keys: list[str]) -> str:
    """The pods there are (the first few, and how many more), the same name in another
    namespace first: the usual slip is the namespace."""
    name = key.partition("/")[2]
    elsewhere = [k for k in keys if k.partition("/")[2] == name]
    hint = f"; did you mean {' or '.join(elsewhere)}?" if elsewhere else ""
    shown = ", ".join(keys[:_KEYS_SHOWN]) or "none"
    more = f" and {len(keys) - _KEYS_SHOWN} more" if len(keys) > _KEYS_SHOWN else ""
    return f"explain: pod {key} not found{hint} (pods: {shown}{more})"


def explain_pod(objects: Objects, config: SchedulerConfig, now: datetime, key: str) -> Explanation:
    pod = next((p for p in objects.pods if p.key == key), None)
    if pod is None:
        raise InputError(_not_found(key, sorted(p.key for p in objects.pods)))
    running = bool(pod.node_name)  # as in the files: the run binds the records it reads
    result, scheduler = settle(objects, config, now)
    if running:
        return _running(objects, scheduler, result, pod, now)
    if not scheduler.owns(pod):
        raise InputError(
            f"explain: pod {key} has schedulerName {pod.scheduler_name!r}, not a profile of "
            f"this configuration ({', '.join(scheduler.frameworks)})"
        )
    state = scheduler.state
    pod = state.pods.by_key[key]
    bound = next((b.node for b in result.bindings if b.pod == key), "")
    out = Explanation(
        key,
        now,
        state.policy.priority_of(pod),
        "bound" if bound else "pending",
        node=bound,
        message=result.unschedulable.get(key, ""),
    )
    out.gang = _gang(state, pod)
    group = state.groups.by_key.get(out.gang.group) if out.gang is not None else None
    out.runtime = stated_runtime(pod, group)
    held = state.start_reservations.by_holder
    reservation = held.get(f"Pod {key}") or (
        held.get(f"PodGroup {out.gang.group}") if out.gang is not None else None
    )
    out.reservation = None if reservation is None else HeldStart.of(state, reservation)
    # A gang preempts as one: its victims are evicted in one member's name.
    preemptors = set(out.gang.members) if out.gang is not None else {key}
    evicted = {e.pod for e in result.evictions if e.preemptor in preemptors}
    out.evicted_for_it = sorted(evicted)
    victims = [p for p in objects.pods if p.key in evicted and p.key not in state.pods.by_key]
    if bound:
        # Judged as before its binding (its node's verdict says why) and, for a pod that
        # preempted alone, before its preemption: its victims come back, so the candidates
        # show the choice it made. A gang's victims made room for several members at once;
        # its story is the group's.
        state.forget(key)
        if out.gang is None:
            for victim in victims:
                state.upsert_pod(replace(victim, deletion_timestamp=None))
    framework = scheduler.framework_for(pod)
    cycle = Cycle(state, pod, now, state.pods.demand(pod), state.free_for(pod))
    pre = framework.pre_filter(cycle)
    out.pre_filter = pre.reject or ""
    feasible, resolvable = _node_verdicts(framework, cycle, pre.allowed_nodes, out)
    # A pending member of a group placed as one is not given a node of its own: alone it may
    # fit, but the group's attempt decided (the nodes' scores still say where it would go).
    claimed = out.gang is not None and _group_hook_claims(framework, pod)
    if feasible.any() and (bound or not claimed):
        _choose(framework, cycle, feasible, out)
    elif out.gang is not None and claimed:
        _group_preemption(out.gang.group, out)
        hook = framework.group_plugin
        if hook is not None:
            out.gang.domains = hook.domains_tried(framework, state, now, out.gang.group)
            if preemption_said(out.message) is not None:  # the group's attempt preempted
                out.gang.preemption = hook.domain_preemption(framework, state, now, out.gang.group)
    else:
        _preemption(framework, cycle, resolvable, result, out)
    if not bound and not evicted:
        out.reclaim = _reclaim(framework, state, pod, now)
    return out


def _running(
    objects: Objects, scheduler: Scheduler, result: OneShotResult, pod: Pod, now: datetime
) -> Explanation:
    """A pod running in the files: nothing to decide for it, unless the plan evicts it."""
    state = scheduler.state
    out = Explanation(pod.key, now, state.policy.priority_of(pod), "running", node=pod.node_name)
    originals = {p.key: p for p in objects.pods}
    evicted = {e.pod: (originals[e.pod], e) for e in result.evictions if e.pod in originals}
    found = evicted.get(pod.key)
    if found is not None:
        eviction = found[1]
        preemptor = state.pods.by_key.get(eviction.preemptor, pod)
        framework = scheduler.framework_for(preemptor)
        out.status = "evicted"
        out.eviction = eviction_story(state, framework, eviction, pod, evicted, now)
    return out


def _group_hook_claims(framework: Framework, pod: Pod) -> bool:
    hook = framework.group_plugin
    return hook is not None and hook.group_of(pod) is not None


def _group_preemption(group: str, out: Explanation) -> None:
    """A gang member's preemption is its group's (docs/gang.md): victims for minMember members
    at once, or none. Its standing is what the group's attempt said, never one member's."""
    whole = f"decided for PodGroup {group} as one (room for minMember members at once, or none)"
    said = preemption_said(out.message)
    if out.evicted_for_it:
        out.preemption = f"{whole}: {len(out.evicted_for_it)} pod(s) evicted for its members"
    elif said is None:
        out.preemption = f"not tried: the group was refused or waits (see pending above); {whole}"
    else:
        out.preemption = f"{whole}: {said or 'no preemption was tried'}"


def _node_verdicts(
    framework: Framework, cycle: Cycle, allowed: BoolArray | None, out: Explanation
) -> tuple[BoolArray, BoolArray]:
    """Every node's verdict into `out`; the feasible nodes and those preemption could fix."""
    state = cycle.state
    feasible, rejections = framework.filter_verdicts(cycle, allowed)
    verdicts = {row: NodeVerdict(state.nodes.name(row)) for row, _ in state.nodes.live()}
    resolvable = np.zeros(state.nodes.rows, dtype=np.bool_)
    if allowed is not None:
        for row in np.flatnonzero(
            ~allowed[: state.nodes.rows] & state.nodes.valid[: state.nodes.rows]
        ).tolist():
            verdicts[row].filter, verdicts[row].reason = "PreFilter", "not allowed by PreFilter"
    for plugin, rej in rejections:
        for row in np.flatnonzero(rej.nodes).tolist():
            verdicts[row].filter, verdicts[row].reason = plugin, rej.reason
            resolvable[row] = rej.resolvable
    if feasible.any():
        breakdown = framework.score_breakdown(cycle, feasible)
        for row in np.flatnonzero(feasible).tolist():
            verdict = verdicts[row]
            verdict.scores = {name: int(scores[row]) for name, _, scores in breakdown}
            verdict.total = sum(int(scores[row]) * weight for _, weight, scores in breakdown)
    rank = state.nodes.name_rank()
    out.nodes = [
        verdicts[row]
        for row in sorted(
            verdicts,
            key=lambda r: (verdicts[r].total is None, -(verdicts[r].total or 0), int(rank[r])),
        )
    ]
    return feasible, resolvable


def _choose(framework: Framework, cycle: Cycle, feasible: BoolArray, out: Explanation) -> None:
    state = cycle.state
    nominated = state.nominations.get(cycle.pod.key)
    if nominated is not None and feasible[nominated]:
        out.chosen = state.nodes.name(nominated)
        out.chosen_why = "its nominated node (room freed for it by preemption) fits"
        return
    row = framework.select(cycle, feasible)
    out.chosen = state.nodes.name(row)
    count = int(np.count_nonzero(feasible))
    if count == 1:
        out.chosen_why = "the only feasible node"
        return
    best = next(v for v in out.nodes if v.node == out.chosen)
    ties = [v.node for v in out.nodes if v.total == best.total]
    out.chosen_why = f"the highest total score ({best.total}) of {count} feasible nodes"
    if len(ties) > 1:
        out.chosen_why += f"; tied with {len(ties) - 1} other(s), the first name wins"


def _preemption(
    framework: Framework,
    cycle: Cycle,
    resolvable: BoolArray,
    result: OneShotResult,
    out: Explanation,
) -> None:
    state, pod = cycle.state, cycle.pod
    strategy = strategy_of(framework.post_filters)
    if strategy is None:
        out.preemption = "the profile has no preemption plugin"
        return
    if state.policy.preemption_policy_of(pod) == "Never":
        out.preemption = "not eligible: preemptionPolicy is Never"
        return
    if not resolvable.any():
        out.preemption = "not helpful: no node fails only for lack of room"
        return
    evaluator = Evaluator(state, pod, out.priority, cycle.now, strategy)
    found: list[NodeVictims] = []
    for row in np.flatnonzero(resolvable).tolist():
        victims = evaluator.on_node(row, cycle.demand, cycle.free[row])
        out.candidates.append(_candidate(evaluator, row, victims))
        if victims is not None:
            found.append(victims)
    order = framework.preemption_order(cycle)
    best = evaluator.best(found, None if order is None else order[1])
    if best is not None:
        out.preemption_node = state.nodes.name(best.row)
        # A score's own criterion, named by what it is, the plugin as its source.
        scored = "" if order is None else f", {order[0].criterion} (from {order[0].name})"
        out.preemption = (
            f"{len(found)} of {len(out.candidates)} candidate node(s) can make room; the best "
            f"by PDB violations, victim priorities, count{scored} and start times is "
            f"{out.preemption_node}"
        )
    else:
        out.preemption = f"none of {len(out.candidates)} candidate node(s) can make room"
    rank = state.nodes.name_rank()
    index = {state.nodes.name(r): int(rank[r]) for r, _ in state.nodes.live()}
    out.candidates.sort(key=lambda c: (not c.works, index[c.node]))


def _reclaim(
    framework: Framework, state: ClusterState, pod: Pod, now: datetime
) -> ReclaimStory | None:
    """Why reclaim did not help a pending pod in a queue: each other queue with pods in use,
    judged as the pod's (or its gang's) reclaim judges it now; None for a pod in no queue or
    a profile that does not reclaim."""
    leaf = state.queue_of(pod).queue if state.queues else ""
    if not leaf or not any(isinstance(p, ReclaimStrategy) for p in framework.post_filters):
        return None
    story = ReclaimStory(leaf, "")
    if state.policy.preemption_policy_of(pod) == "Never":
        story.summary = "not eligible: preemptionPolicy is Never"
        return story
    # A gang reclaims as one, for the members its attempt places: minMember first
    # (docs/queues.md#reclaim).
    asks = first_members_asks(state, pod)
    reclaimer = Reclaimer(state)
    story.standings = reclaimer.standings(pod, leaf, asks, now, state.queue_fair_shares())
    takeable = sum(s.takeable for s in story.standings)
    if not story.standings:
        story.summary = "no other queue has pods running"
    elif takeable:
        story.summary = (
            f"the rules let it take {takeable} pod(s) of other queues; they do not make "
            "room for it (see pending above)"
        )
    else:
        story.summary = f"every other queue's pods are kept ({len(story.standings)} queue(s))"
    return story


def _candidate(evaluator: Evaluator, row: int, found: NodeVictims | None) -> Candidate:
    state = evaluator.state
    candidate = Candidate(state.nodes.name(row), works=found is not None)
    standing = evaluator.standing(row)
    candidate.missing_classes = [
        f"{p.key} ({p.priority_class_name})" for p in standing.missing_class
    ]
    candidate.protected = [
        Protected(p.pod.key, p.pod.priority_class_name, p.until) for p in standing.protected
    ]
    if found is None:
        if candidate.missing_classes:
            candidate.why = "a lower-priority pod names a missing PriorityClass"
        elif candidate.protected:
            candidate.why = "the pods it may take free too little; protected pods hold the rest"
        else:
            candidate.why = "too little room even with every lower-priority pod gone"
    else:
        candidate.victims = [v.key for v in found.victims]
        candidate.pdb_violations = [v.key for v in evaluator.pdb_violations(found)]
    return candidate


def _gang(state: ClusterState, pod: Pod) -> GangStory | None:
    group = state.group_of(pod)
    if group is None:
        return None
    key = group.key
    members = {k: state.pods.by_key[k].node_name for k in sorted(state.groups.members.get(key, ()))}
    return GangStory(key, group.min_member, group.status.phase or "Pending", members)
