"""`batchsched queues`: the queue tree with each queue's quotas, usage, fair share, what it
borrows and its pending pods (docs/queues.md#seeing-the-queues). `schedule -o json` carries
the same report, as after its decisions, under `queues`.
"""

from __future__ import annotations

from typing import Any

from batchsched.commands import tables
from batchsched.controllers.queues import queue_statuses
from batchsched.objects.quantity import format_amount
from batchsched.objects.queues import usage_unit
from batchsched.state.cluster import ClusterState


def queue_report(state: ClusterState) -> list[dict[str, Any]]:
    """One entry per queue, parents before their children, siblings by name."""
    tree = state.queues
    statuses = queue_statuses(state)
    out: list[dict[str, Any]] = []
    for name, depth in tree.in_tree_order():
        queue, status = tree.queues[name], statuses[name]
        resources: dict[str, dict[str, str | None]] = {}
        for resource, quota in sorted(queue.resources.items()):
            resources[resource] = {
                "guaranteed": format_amount(resource, quota.guaranteed),
                "nominal": format_amount(resource, quota.nominal),
                "limit": None if quota.limit is None else format_amount(resource, quota.limit),
                "inUse": format_amount(resource, status.allocated[resource]),
                "fairShare": format_amount(resource, status.fair_share[resource]),
                "borrowed": format_amount(resource, status.borrowed[resource]),
            }
            if status.decayed_usage is not None and status.effective_weight is not None:
                past = status.decayed_usage[resource] / usage_unit(resource)
                resources[resource]["decayedUsage"] = f"{past:.3f}"
                resources[resource]["effectiveWeight"] = f"{status.effective_weight[resource]:.4g}"
        out.append(
            {
                "name": name,
                "parent": queue.parent or None,
                "depth": depth,
                "apiVersion": queue.api_version,
                "weight": queue.weight,
                "priority": queue.priority,
                "resources": resources,
                "pendingPods": status.pending_pods,
            }
        )
    return out


def render_text(report: list[dict[str, Any]]) -> str:
    """The tree as a table: one row per queue and resource it names, children indented."""
    if not report:
        return "no Queue found\n"
    head = [
        "queue", "resource", "guaranteed", "nominal", "limit", "in use", "fair share", "borrowed",
        "pending",
    ]  # fmt: skip
    rows: list[list[str]] = []
    for entry in report:
        name = "  " * entry["depth"] + entry["name"]
        resources = entry["resources"].items() or [("-", None)]
        for i, (resource, amounts) in enumerate(resources):
            values = (
                ["-"] * 6
                if amounts is None
                else [
                    amounts["guaranteed"],
                    amounts["nominal"],
                    amounts["limit"] or "none",
                    amounts["inUse"],
                    amounts["fairShare"],
                    amounts["borrowed"],
                ]
            )
            first = i == 0
            pending = str(entry["pendingPods"]) if first else ""
            rows.append([name if first else "", resource, *values, pending])
    lines = [f"QUEUES ({len(report)})", *tables.table(head, rows), ""]
    return "\n".join([*lines, *_decay_lines(report)]) + "\n"


def _decay_lines(report: list[dict[str, Any]]) -> list[str]:
    """With decay on (docs/queues.md#fairness-over-time): each queue's past usage, in the
    resource's hours (GPU-hours, core-hours), and the effective weight it gives the queue."""
    rows = [
        [
            "  " * entry["depth"] + entry["name"],
            resource,
            f"{float(amounts['decayedUsage']) / 3600:.1f}",
            amounts["effectiveWeight"],
            f"{entry['weight']:g}",
        ]
        for entry in report
        for resource, amounts in entry["resources"].items()
        if "decayedUsage" in amounts
    ]
    if not rows:
        return []
    head = ["queue", "resource", "decayed usage (h)", "effective weight", "weight"]
    return ["FAIRNESS OVER TIME", *tables.table(head, rows), ""]
