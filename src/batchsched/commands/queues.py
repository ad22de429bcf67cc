"""`batchsched queues`: the queue tree with each queue's quotas, usage, fair share, what it
borrows and its pending pods (docs/queues.md#seeing-the-queues). `schedule -o json` carries
the same report, as after its decisions, under `queues`.
"""

from __future__ import annotations

from typing import Any

from batchsched.commands import tables
from batchsched.controllers.queues import pending_by_queue
from batchsched.objects.quantity import format_amount
from batchsched.objects.queues import usage_unit
from batchsched.state.cluster import ClusterState


def queue_report(state: ClusterState) -> list[dict[str, Any]]:
    """One entry per queue, parents before their children, siblings by name."""
    tree = state.queues
    usage = state.queue_usage()
    shares = state.queue_fair_shares()
    pending = pending_by_queue(state)
    decayed = tree.decayed
    weights = decayed.effective_weights(tree.queues) if decayed is not None else {}
    out: list[dict[str, Any]] = []

    def visit(name: str, depth: int) -> None:
        queue = tree.queues[name]
        used = usage.get(name, {})
        share = shares.get(name, {})
        resources: dict[str, dict[str, str | None]] = {}
        for resource, quota in sorted(queue.resources.items()):
            in_use = used.get(resource, 0)
            resources[resource] = {
                "guaranteed": format_amount(resource, quota.guaranteed),
                "nominal": format_amount(resource, quota.nominal),
                "limit": None if quota.limit is None else format_amount(resource, quota.limit),
                "inUse": format_amount(resource, in_use),
                "fairShare": format_amount(resource, share.get(resource, 0)),
                "borrowed": format_amount(resource, max(0, in_use - quota.nominal)),
            }
            if decayed is not None:
                past = decayed.usage.get(name, {}).get(resource, 0.0)
                weight = weights.get(name, {}).get(resource, queue.weight)
                resources[resource]["decayedUsage"] = f"{past / usage_unit(resource):.3f}"
                resources[resource]["effectiveWeight"] = f"{weight:.4g}"
        out.append(
            {
                "name": name,
                "parent": queue.parent or None,
                "depth": depth,
                "apiVersion": queue.api_version,
                "weight": queue.weight,
                "priority": queue.priority,
                "resources": resources,
                "pendingPods": pending.get(name, 0),
            }
        )
        for child in tree.children(name):
            visit(child, depth + 1)

    for root in tree.roots():
        visit(root, 0)
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
