"""DefaultPreemption (PostFilter): evict lower-priority pods so a pending pod fits
(docs/preemption-toleration.md).

Runs when a pod fits nowhere. Eligibility: a `preemptionPolicy: Never` pod never preempts; a
pod nominated to a node where a lower-priority pod is still terminating waits for it instead
of preempting again; a DaemonSet pod is left to DaemonSet preemption (docs/daemonset.md).

Candidates are the nodes that failed only resolvable filters (resources). Unlike upstream,
which samples max(minCandidateNodesPercentage% of nodes, minCandidateNodesAbsolute) candidates
from a random offset, every candidate is evaluated (vectorised, `preemption.nodes`), so the
chosen node is at least as good as the sampled one by the node-choice order; the two args are
validated as upstream validates them and otherwise only kept for configuration compatibility.

Pods already terminating (a victim of an earlier cycle, or deleted by someone) are not taken
again: their room is counted as coming free. Upstream would pick a terminating lower-priority
pod as a victim again and delete it twice; counting it as free gives the same node its room
without a second eviction, and a node that then fits with no victims at all is the best choice
(the pod is nominated to wait for that room) unless the pod is in a queue that would go over
its fair share with it: a borrowing pod takes room only once free (docs/queues.md#reclaim).

Decisions: `Evict` per victim (the world sets DisruptionTarget/PreemptionByScheduler and
emits the Preempted event from it), `Nominate(pod, None)` for lower-priority pods nominated to
the chosen node, and the chosen node as `nominated_node`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from batchsched.decisions import Decision, Evict, Nominate
from batchsched.framework.interface import (
    PREEMPTION_GUARDS,
    PREEMPTION_TIE_BREAK,
    ClusterChange,
    ClusterEvent,
    Cycle,
    Diagnosis,
    PodsHint,
    PostFilterPlugin,
    PostFilterResult,
    QueueingHint,
)
from batchsched.objects.daemonset import daemonset_node
from batchsched.objects.records import Pod
from batchsched.plugins.args import ArgsReader
from batchsched.preemption.evaluator import PreemptionStrategy, outranked_nominations
from batchsched.preemption.gang_victims import GangSearchMemo, with_gang_victims
from batchsched.preemption.reasons import NO_VICTIMS
from batchsched.preemption.reclaim import Reclaimer
from batchsched.preemption.search import PreemptionSearch
from batchsched.preemption.victims import VictimRule
from batchsched.state.cluster import ClusterState

NOT_HELPFUL = "Preemption is not helpful for scheduling"


class DefaultPreemption(PostFilterPlugin, PreemptionStrategy):
    name = "DefaultPreemption"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        reader = ArgsReader(
            self.name, args, ("minCandidateNodesPercentage", "minCandidateNodesAbsolute")
        )
        self.min_candidate_nodes_percentage = reader.int_in(
            "minCandidateNodesPercentage", 10, 0, 100
        )
        self.min_candidate_nodes_absolute = reader.int_in("minCandidateNodesAbsolute", 100, 0)
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise reader.fail(
                "minCandidateNodesPercentage",
                "cannot be zero at the same time as minCandidateNodesAbsolute",
            )
        self._search: PreemptionSearch | None = None
        self._gang_memo: GangSearchMemo | None = None
        self._reclaimer: Reclaimer | None = None

    def events_to_register(self) -> Mapping[ClusterEvent, QueueingHint | None]:
        return {
            ClusterEvent.NODE: None,
            ClusterEvent.POLICY: None,
            ClusterEvent.NODE_ROOM: PodsHint(self._may_find_victims),
        }

    @staticmethod
    def _may_find_victims(change: ClusterChange, pods: Sequence[Pod]) -> list[bool]:
        """Per pod, whether a lower-priority pod runs anywhere (a victim may now do, e.g. as
        its toleration ran out or its gang shrank), for a pod this plugin acts for."""
        state = change.state
        lowest = state.pods.lowest_bound_priority()  # once for all: the cheapest, mostly the answer
        if lowest is None:
            return [False] * len(pods)
        return [
            lowest < state.policy.priority_of(pod)
            and daemonset_node(pod) is None
            and state.policy.preemption_policy_of(pod) != "Never"
            for pod in pods
        ]

    def _reclaimer_for(self, state: ClusterState) -> Reclaimer:
        if self._reclaimer is None or self._reclaimer.state is not state:
            self._reclaimer = Reclaimer(state)
        return self._reclaimer

    def search(self, state: ClusterState) -> PreemptionSearch:
        if self._search is None or self._search.state is not state:
            self._search = PreemptionSearch(state)
            self._gang_memo = GangSearchMemo(state)
        return self._search

    def post_filter(self, cycle: Cycle, diagnosis: Diagnosis) -> PostFilterResult:
        state, pod = cycle.state, cycle.pod
        if daemonset_node(pod) is not None:
            return PostFilterResult()
        if state.policy.preemption_policy_of(pod) == "Never":
            return PostFilterResult(
                message="preemption: not eligible due to preemptionPolicy=Never."
            )
        priority = state.policy.priority_of(pod)
        if _waiting_for_victims(state, pod, priority):
            return PostFilterResult(
                message="preemption: not eligible due to a terminating pod on the nominated node."
            )
        lowest = state.pods.lowest_bound_priority()
        if (lowest is None or lowest >= priority) and not state.pods.terminating:
            # Nothing to take and no room coming free: every node fails as the search would
            # find (often: an overloaded cluster of one priority, where this is most attempts).
            candidates = int(diagnosis.resolvable.sum())
            reasons = {NO_VICTIMS: candidates} if candidates else {}
            return self._no_way(state, pod, diagnosis, reasons, [])
        decisions: list[Decision] = []
        verdicts = self.class_verdicts(state, pod, priority, decisions)
        rule = VictimRule(state, pod, priority, cycle.now, verdicts)
        search = self.search(state)
        # A score plugin's order among nodes kube-scheduler's criteria leave equal, if any.
        tie_break = cycle.scratch.get(PREEMPTION_TIE_BREAK)
        found = with_gang_victims(
            rule,
            cycle.demand,
            cycle.free,
            diagnosis.resolvable,
            lambda rows: search.evaluate(
                rule, cycle.demand, cycle.free, rows, cycle.plain_room, tie_break
            ),
            self._gang_memo,
            diagnosis.clashes,
            cycle.scratch.get(PREEMPTION_GUARDS, ()),
        )
        cycle.changes_at(search.protection_ends(rule))
        if found.row is None:
            return self._no_way(state, pod, diagnosis, dict(found.reasons), decisions)
        if not found.victims and state.queues and state.nominations.get(pod.key) != found.row:
            # Room only terminating pods free (a reclaim's victims, say) is waited for only
            # by a pod whose queues stay within their fair shares (docs/queues.md#reclaim).
            over = self._reclaimer_for(state).borrows(pod)
            if over:
                if pod.key in state.nominations:
                    decisions.append(Nominate(pod.key, None))
                return PostFilterResult(
                    decisions=decisions,
                    message=f"preemption: queue {over} would go over its fair share: it takes "
                    "room once it is free, not by waiting for terminating pods.",
                )
        node = state.nodes.name(found.row)
        reason = (
            f"{self.name}: preempted by {pod.key} (priority {priority}) to make room on node {node}"
        )
        # A victim's group goes with it (gang as victim), its members maybe on other nodes.
        decisions.extend(Evict(v.key, v.node_name, pod.key, reason) for v in found.victims)
        decisions.extend(outranked_nominations(state, found.row, pod, priority))
        return PostFilterResult(nominated_node=node, decisions=decisions)

    @staticmethod
    def _no_way(
        state: ClusterState,
        pod: Pod,
        diagnosis: Diagnosis,
        reasons: dict[str, int],
        decisions: list[Decision],
    ) -> PostFilterResult:
        """No node works: why, per node."""
        unhelpful = state.nodes.count - int(diagnosis.resolvable.sum())
        if unhelpful:
            reasons[NOT_HELPFUL] = unhelpful
        if pod.key in state.nominations:
            decisions.append(Nominate(pod.key, None))  # upstream clears a stale nomination
        summary = Diagnosis(state.nodes.count, reasons, diagnosis.resolvable).message()
        return PostFilterResult(decisions=decisions, message=f"preemption: {summary}")


def _waiting_for_victims(state: ClusterState, pod: Pod, priority: int) -> bool:
    """Nominated to a node where a lower-priority pod is still terminating."""
    row = state.nominations.get(pod.key)
    if row is None:
        return False
    return any(
        other.deletion_timestamp is not None and (other.priority or 0) < priority
        for other in state.nodes.pods_on[row].values()
    )
