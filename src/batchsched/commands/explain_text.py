"""`batchsched explain`'s text: the pod's standing, then one table per question."""

from __future__ import annotations

import math

from batchsched.commands import tables
from batchsched.commands.explain import Explanation, NodeVerdict, ReclaimStory
from batchsched.commands.explain_eviction import BROKEN_PROMISE, RECLAIM, EvictionStory
from batchsched.objects.parse import format_time
from batchsched.objects.quantity import format_amount
from batchsched.preemption.reclaim import Standing
from batchsched.state.reservations import room_text
from batchsched.state.topology import DomainPreemption, DomainSearch

_NODES_SHOWN = 20  # a big cluster's verdicts are summarised past this many rows


def render_explanation(e: Explanation) -> str:
    lines = [f"POD {e.pod} (priority {e.priority}) at {format_time(e.now)}"]
    if e.eviction is not None:
        return "\n".join([*lines, *_eviction(e.eviction)]) + "\n"
    if e.status == "running":
        lines.append(f"  running on {e.node} (spec.nodeName in the files): nothing to decide")
        return "\n".join(lines) + "\n"
    if e.status == "bound":
        lines.append(f"  bound to {e.node} in this run")
    else:
        lines.extend(tables.wrap(f"  pending: {e.message}", indent="    "))
    if e.evicted_for_it:
        lines.extend(
            tables.wrap("  evicted to make room: " + ", ".join(e.evicted_for_it), indent="    ")
        )
    if e.pre_filter:
        lines.extend(tables.wrap(f"  pre-filter: {e.pre_filter}", indent="    "))
    lines.extend(_backfill(e))
    lines.append("")
    lines.extend(_nodes(e.nodes))
    if e.chosen:
        lines.extend(tables.wrap(f"CHOSEN {e.chosen}: {e.chosen_why}", indent="  "))
        lines.append("")
    if e.preemption:
        lines.extend(tables.wrap(f"PREEMPTION: {e.preemption}", indent="  "))
        rows = [
            [
                c.node,
                "\n".join(c.victims) or c.why or "none needed",
                "\n".join(c.pdb_violations) or "-",
                "\n".join(
                    f"{p.pod} ({p.klass}, "
                    + (f"until {format_time(p.until)})" if p.until else "forever)")
                    for p in c.protected
                )
                + "".join(f"\n{m}: class missing" for m in c.missing_classes)
                or "-",
            ]
            for c in e.candidates
        ]
        if rows:
            lines.extend(tables.table(["node", "victims", "PDB violations", "protected"], rows))
        lines.append("")
    if e.reclaim is not None:
        lines.extend(_reclaim(e.reclaim))
    if e.gang is not None:
        g = e.gang
        lines.append(f"GANG {g.group}: minMember {g.min_member}, phase {g.phase}")
        members = [[pod, node or "pending"] for pod, node in g.members.items()]
        lines.extend(tables.table(["member", "node"], members))
        lines.append("")
    if e.gang is not None and e.gang.domains is not None:
        lines.extend(_domains(e.gang.domains))
    if e.gang is not None and e.gang.preemption is not None:
        lines.extend(_domain_preemption(e.gang.preemption))
    return "\n".join(lines).rstrip() + "\n"


def _backfill(e: Explanation) -> list[str]:
    """Its stated runtime and the reservation it (or its gang) holds (docs/backfill.md)."""
    held = e.reservation
    if e.runtime is None and held is None:
        return []
    runtime = "none" if e.runtime is None else f"{e.runtime}s"
    lines = [f"  stated runtime: {runtime}"]
    if held is not None:
        r = held.reservation
        lines.extend(tables.wrap(f"  reservation ({r.holder}): {r.message(e.now)}", "    "))
        if r.waits_for and r.start is not None:
            waits = ", ".join(r.waits_for)
            lines.extend(tables.wrap(f"  waits for: {waits}", indent="    "))
        lines.extend(tables.wrap(f"  room held {r.span()}:", indent="    "))
        for node, room in held.room:
            lines.extend(tables.wrap(f"    {node}: {room_text(room)}", indent="      "))
    return lines


def _reclaim(story: ReclaimStory) -> list[str]:
    """Each other queue's standing for the pod's reclaim: the levels compared (their
    dominant ratios, docs/queues.md#reclaim), its pods and how many the rules let go, or
    the rule that keeps them all."""
    lines = tables.wrap(f"RECLAIM for queue {story.queue}: {story.summary}", indent="  ")
    rows = [
        [
            s.side.leaf,
            f"{s.side.level} {_ratio(s.side.ratio)} vs {s.side.own_level} {_ratio(s.side.target)}",
            str(s.pods),
            str(s.takeable),
            f"{s.rule}: {s.why}" if s.rule else _protected(s) or "-",
        ]
        for s in story.standings
    ]
    if rows:
        lines.extend(tables.table(["queue", "compared", "pods", "may take", "kept by"], rows))
    lines.append("")
    return lines


def _protected(standing: Standing) -> str:
    """The pods the rules would let go but their protection keeps, for now."""
    kept = [
        f"{count} {what}"
        for count, what in (
            (standing.young, "too young"),
            (standing.tolerated, "in toleration window"),
        )
        if count
    ]
    return ", ".join(kept)


def _ratio(ratio: float) -> str:
    return f"{ratio:.2f}" if math.isfinite(ratio) else "inf"


def _domains(search: DomainSearch) -> list[str]:
    """Each domain the group's next attempt tries: its free amount of the gang's dominant
    resource and how many members fit there (docs/topology.md)."""
    needed = format_amount(search.resource, search.needed)
    lines = [f"TOPOLOGY {search.key}: one domain, needing {needed} {search.resource}"]
    rows = [
        [
            d.value,
            format_amount(search.resource, d.free),
            f"{d.placed}"
            if d.free >= search.needed
            else f"not tried: too little {search.resource}",
        ]
        for d in search.tried
    ]
    lines.extend(tables.table(["domain", "free", "members fit"], rows) if rows else ["  none"])
    lines.append("")
    return lines


def _domain_preemption(seen: DomainPreemption) -> list[str]:
    """Each domain as the group's preemption inside one domain searched it: its free plus
    takeable amount of the dominant resource, and the victims found there or why none
    (docs/topology.md#preemption-inside-one-domain)."""
    needed = format_amount(seen.resource, seen.needed)
    lines = [f"PREEMPTION BY DOMAIN {seen.key}: victims inside one domain, needing {needed} "
             f"{seen.resource}"]  # fmt: skip
    rows = []
    for d in seen.tried:
        if d.room < seen.needed:
            why = f"not searched: too little {seen.resource} even with every takeable pod"
        elif d.victims is None:
            why = "no victims make room for minMember members"
        else:
            why = ", ".join(d.victims) + (" (chosen: cheapest)" if d.value == seen.chosen else "")
        rows.append([d.value, format_amount(seen.resource, d.room), why])
    head = ["domain", "free+takeable", "victims"]
    lines.extend(tables.table(head, rows) if rows else ["  none"])
    lines.append("")
    return lines


def _eviction(story: EvictionStory) -> list[str]:
    said = [
        f"evicted in this plan from {story.node} by {story.preemptor} (priority "
        f"{story.preemptor_priority})",
        f"rule: {story.rule} ({story.plugin}): {story.why}",
    ]
    if story.group:
        went = ", ".join(story.with_it) or "no other member running"
        said.append(f"its PodGroup {story.group} is preempted as one: with it {went}")
    # For a reclaim: its queue's reclaimMinRuntime and its class's toleration window; for a
    # broken promise, what would have kept it.
    protection = story.rule in (RECLAIM, BROKEN_PROMISE)
    said.append(f"{'protection' if protection else 'toleration'}: {story.toleration}")
    budgets = [
        f"{b.pdb} allows {b.disruptions_allowed} disruption(s), the plan evicts {b.evicted} of "
        f"its pods" + (" (the budget is exceeded)" if b.violated else "")
        for b in story.budgets
    ]
    said.append("PodDisruptionBudget: " + ("; ".join(budgets) or "none covers it"))
    said.append(f"reason: {story.reason}")
    return [line for text in said for line in tables.wrap(f"  {text}", indent="    ")]


def _nodes(verdicts: list[NodeVerdict]) -> list[str]:
    feasible = [v for v in verdicts if v.total is not None]
    failed = [v for v in verdicts if v.total is None]
    lines = [f"NODES ({len(feasible)} feasible of {len(verdicts)})"]
    if feasible:
        plugins = list(feasible[0].scores)
        rows = [
            [v.node, str(v.total), *(str(v.scores[p]) for p in plugins)]
            for v in feasible[:_NODES_SHOWN]
        ]
        lines.extend(tables.table(["NODE", "TOTAL", *plugins], rows, upper=False))
    if failed:
        rows = [[v.node, v.filter, v.reason] for v in failed[:_NODES_SHOWN]]
        lines.extend(tables.table(["node", "failed filter", "reason"], rows))
    hidden = max(0, len(feasible) - _NODES_SHOWN) + max(0, len(failed) - _NODES_SHOWN)
    if hidden:
        lines.append(f"  ... {hidden} more node(s): -o json lists them all")
    lines.append("")
    return lines
