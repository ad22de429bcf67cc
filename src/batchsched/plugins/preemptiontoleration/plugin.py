"""PreemptionToleration (PostFilter): DefaultPreemption plus the victim-side policy
(docs/preemption-toleration.md).

A victim is exempt when its PriorityClass's annotations say it tolerates the preemptor
(`preemption.toleration_policy`). A victim naming a class that does not exist makes its node
unusable for this attempt (upstream returns an error for that node). A class with malformed
annotations grants no toleration; the problem is logged and returned as a `Warn` decision once per
PriorityClass version, not on every cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from batchsched.decisions import Decision, Warn
from batchsched.objects.records import Pod
from batchsched.plugins.defaultpreemption.plugin import DefaultPreemption
from batchsched.preemption.toleration_policy import PolicyCache, toleration_for
from batchsched.preemption.victims import ClassVerdicts
from batchsched.state.cluster import ClusterState

log = logging.getLogger(__name__)


class PreemptionToleration(DefaultPreemption):
    name = "PreemptionToleration"
    reads_tolerations = True

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.policies = PolicyCache()

    def class_verdicts(
        self, state: ClusterState, preemptor: Pod, priority: int, warnings: list[Decision]
    ) -> ClassVerdicts:
        def verdict(name: str) -> tuple[bool, int | None]:
            pc = state.policy.priority_classes.get(name)
            if pc is None:
                return True, None
            policy, first_seen = self.policies.get(pc)
            if first_seen and not policy.valid:
                message = f"{policy.error}; the class grants no preemption toleration"
                log.warning("PriorityClass %s: %s", name, message)
                warnings.append(Warn(f"PriorityClass {name}", message))
            return False, toleration_for(policy, preemptor, priority)

        return verdict
