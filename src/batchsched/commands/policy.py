"""`batchsched policy`: the preemption matrix an administrator reads (the blog's tables).

Rows are victim classes, columns preemptor classes, both by value, highest first. A cell says
when a pod of the column's class may preempt a running pod of the row's class under the
PreemptionToleration rules: `no` (not higher priority), `never`, `immediately`, or `after 10m
of run time`. Warnings name annotations that could not be read or cannot take effect. Running
pods in the files are listed with when their time-limited protection ends, at `now`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from batchsched.commands import tables
from batchsched.objects.load import Objects
from batchsched.objects.parse import format_time
from batchsched.objects.records import Pod, PriorityClass
from batchsched.objects.system_classes import used_system_classes
from batchsched.preemption.toleration_policy import (
    FOREVER,
    MINIMUM_KEY,
    PREFIXES,
    SECONDS_KEY,
    TolerationPolicy,
    parse_policy,
    scheduled_since,
    toleration_end,
    toleration_for,
)

_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def human_duration(seconds: int) -> str:
    """600 -> 10m, 5400 -> 1h30m, 90061 -> 1d1h1m1s."""
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def cell(victim: PriorityClass, policy: TolerationPolicy, preemptor: PriorityClass) -> str:
    """When a `preemptor`-class pod may preempt a running `victim`-class pod."""
    if preemptor.value <= victim.value:
        return "no"
    if preemptor.preemption_policy == "Never":
        return "never"
    probe = Pod(namespace="", name="", preemption_policy=preemptor.preemption_policy)
    toleration = toleration_for(policy, probe, preemptor.value)
    if toleration is None or toleration == 0:
        return "immediately"
    if toleration == FOREVER:
        return "never"
    return f"after {human_duration(toleration)} of run time"


def policy_warnings(pc: PriorityClass, policy: TolerationPolicy) -> list[str]:
    """Problems with a class's toleration annotations, each a sentence for the administrator."""
    warnings = []
    current, seeds = PREFIXES
    for key in sorted(pc.annotations):
        for prefix in PREFIXES:
            name = key.removeprefix(prefix)
            if key.startswith(prefix) and name not in (MINIMUM_KEY, SECONDS_KEY):
                warnings.append(
                    f"annotation {key}: unknown key (known: {MINIMUM_KEY}, {SECONDS_KEY})"
                )
    for name in (MINIMUM_KEY, SECONDS_KEY):
        new, old = pc.annotations.get(current + name), pc.annotations.get(seeds + name)
        if new is not None and old is not None and new != old:
            warnings.append(
                f"annotations {current}{name}={new!r} and {seeds}{name}={old!r} disagree; "
                f"the {current.rstrip('/')} one is used"
            )
    if not policy.valid:
        warnings.append(f"{policy.error}; the class grants no preemption toleration")
        return warnings
    annotated = any(key.startswith(PREFIXES) for key in pc.annotations)
    minimum, seconds = policy.minimum_preemptable_priority, policy.toleration_seconds
    if annotated and minimum <= pc.value + 1 and seconds != 0:
        warnings.append(
            f"{MINIMUM_KEY} {minimum} is not above the class's value {pc.value} + 1: every pod "
            f"that may preempt it at all is at or above the minimum, so {SECONDS_KEY} has no "
            "effect"
        )
    elif minimum > pc.value + 1 and seconds == 0:
        warnings.append(
            f"{SECONDS_KEY} is 0 (or unset), so the class tolerates nothing and {MINIMUM_KEY} "
            "has no effect; set a number of seconds, or -1 to tolerate forever"
        )
    return warnings


@dataclass
class ProtectedPod:
    pod: str
    klass: str
    below: int  # protected from preemptors with priority below this
    until: datetime | None  # None: forever (or until the pod is reported scheduled)
    protected: bool  # at `now`


@dataclass
class PolicyReport:
    now: datetime
    classes: list[PriorityClass]
    policies: dict[str, TolerationPolicy]
    warnings: list[tuple[str, str]] = field(default_factory=list)
    pods: list[ProtectedPod] = field(default_factory=list)

    def matrix(self) -> list[list[str]]:
        return [
            [cell(victim, self.policies[victim.name], preemptor) for preemptor in self.classes]
            for victim in self.classes
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "now": format_time(self.now),
            "classes": [
                {
                    "name": pc.name,
                    "value": pc.value,
                    "preemptionPolicy": pc.preemption_policy,
                    "minimumPreemptablePriority": self.policies[
                        pc.name
                    ].minimum_preemptable_priority,
                    "tolerationSeconds": self.policies[pc.name].toleration_seconds,
                }
                for pc in self.classes
            ],
            "matrix": {
                victim.name: dict(zip((p.name for p in self.classes), row, strict=True))
                for victim, row in zip(self.classes, self.matrix(), strict=True)
            },
            "protectedPods": [
                {
                    "pod": p.pod,
                    "class": p.klass,
                    "fromPriorityBelow": p.below,
                    "until": format_time(p.until) if p.until is not None else None,
                    "protected": p.protected,
                }
                for p in self.pods
            ],
            "warnings": [{"object": obj, "message": message} for obj, message in self.warnings],
        }


def build_report(objects: Objects, now: datetime) -> PolicyReport:
    # The built-in classes the pods name are in play too, defined in the files or not.
    named = (pod.priority_class_name for pod in objects.pods)
    used = used_system_classes(objects.priority_classes, named)
    classes = sorted([*objects.priority_classes, *used], key=lambda pc: (-pc.value, pc.name))
    policies = {pc.name: parse_policy(pc) for pc in classes}
    report = PolicyReport(now, classes, policies)
    for klass in classes:
        report.warnings.extend(
            (f"PriorityClass {klass.name}", w) for w in policy_warnings(klass, policies[klass.name])
        )
    by_name = {pc.name: pc for pc in classes}
    for pod in sorted(objects.pods, key=lambda p: p.key):
        pc = by_name.get(pod.priority_class_name)
        if pc is None or not pod.node_name or pod.terminated:
            continue
        policy = policies[pc.name]
        if not policy.valid or policy.toleration_seconds == 0:
            continue
        if policy.minimum_preemptable_priority <= pc.value + 1:
            continue
        since = scheduled_since(pod)
        until = None
        if policy.toleration_seconds > 0 and since is not None:
            until = toleration_end(since, policy.toleration_seconds)
        protected = until is None or until > now
        report.pods.append(
            ProtectedPod(pod.key, pc.name, policy.minimum_preemptable_priority, until, protected)
        )
    return report


def render_text(report: PolicyReport) -> str:
    # Columns are numbered after the rows: class names as headers would not fit 100 columns.
    labels = [f"({i}) {pc.name} ({pc.value})" for i, pc in enumerate(report.classes, 1)]
    header = ["VICTIM \\ PREEMPTOR", *(f"({i})" for i in range(1, len(labels) + 1))]
    rows = [[label, *cells] for label, cells in zip(labels, report.matrix(), strict=True)]
    lines = [
        f"PREEMPTION MATRIX at {format_time(report.now)}",
        "  when a pod of the column's class may preempt a running pod of the row's class",
    ]
    lines.extend(tables.table(header, rows))
    if report.pods:
        lines += ["", f"PROTECTED PODS ({len(report.pods)})"]
        pod_rows = [
            [
                p.pod,
                p.klass,
                f"< {p.below}",
                format_time(p.until) if p.until is not None else "forever",
                "protected" if p.protected else "expired",
            ]
            for p in report.pods
        ]
        lines.extend(tables.table(["POD", "CLASS", "FROM PRIORITY", "UNTIL", "NOW"], pod_rows))
    if report.warnings:
        lines += ["", f"WARNINGS ({len(report.warnings)})"]
        lines.extend(tables.table(["OBJECT", "MESSAGE"], [list(w) for w in report.warnings]))
    return "\n".join(lines) + "\n"
