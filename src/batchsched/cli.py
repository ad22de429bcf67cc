"""The `batchsched` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from batchsched.config import load_config
from batchsched.live.cli import add_run_parser, run_command
from batchsched.live.client import ConnectError
from batchsched.live.snapshot import merge_objects, read_cluster
from batchsched.objects.errors import InputError
from batchsched.objects.load import Objects, load_files
from batchsched.objects.parse import parse_time
from batchsched.oneshot import OneShotResult, run
from batchsched.policy_matrix import build_report, render_text
from batchsched.sim.workload import parse_duration


def _now_arg(value: str) -> datetime:
    try:
        return parse_time(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an RFC 3339 time (e.g. 2026-11-22T10:00:00Z)"
        ) from None


def _duration_arg(value: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _add_strict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict",
        action="store_true",
        help="unknown fields in the objects read are errors (exit 2), not warnings",
    )


def _add_sources(parser: argparse.ArgumentParser) -> None:
    """Where a command reads its objects: manifest files, a cluster, or both."""
    _add_strict(parser)
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="read the cluster's objects through this kubeconfig (FILEs are added to them); "
        "without FILEs the cluster is read through KUBECONFIG or ~/.kube/config",
    )
    parser.add_argument("--context", help="the kubeconfig context to use (default: current)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="batchsched",
        description="A Kubernetes batch scheduler for shared, capacity-bound clusters.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sched = sub.add_parser(
        "schedule",
        help="schedule the pending pods of manifest files once and print the decisions",
    )
    _add_sources(sched)
    sched.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    sched.add_argument("--now", type=_now_arg, help="the time to schedule at (RFC 3339)")
    sched.add_argument("-o", "--output", choices=("json", "text"), default="json")
    policy = sub.add_parser(
        "policy",
        help="print who may preempt whom under the PriorityClasses' toleration policies",
    )
    _add_sources(policy)
    policy.add_argument("--now", type=_now_arg, help="the time for running pods' protection")
    policy.add_argument("-o", "--output", choices=("json", "text"), default="text")
    add_run_parser(sub)
    sim = sub.add_parser(
        "simulate",
        help="replay scenarios on a virtual clock through the scheduler and compare them",
    )
    sim.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO")
    _add_strict(sim)
    sim.add_argument(
        "--config",
        type=Path,
        action="append",
        default=[],
        help="KubeSchedulerConfiguration YAML; repeat to compare configs",
    )
    sim.add_argument("--seed", type=int, help="seed for generated workloads (default: scenario's)")
    sim.add_argument("--until", type=_duration_arg, help="stop at this virtual time, e.g. 12h")
    sim.add_argument(
        "--report", type=Path, metavar="DIR", help="write summary.json, jobs.csv, report.html"
    )
    return parser


def _text(result: OneShotResult) -> str:
    data = result.to_json()
    lines: list[str] = []

    def table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
        lines.append(f"{title} ({len(rows)})")
        if not rows:
            lines.append("  none")
            lines.append("")
            return
        cells = [[str(row[c]) for c in columns] for row in rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
        header = "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))
        lines.append(("  " + header).rstrip())
        for r in cells:
            lines.append(
                "  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
            )
        lines.append("")

    if data["evictions"]:
        lines.append("Apply the evictions first, then the bindings once the victims are gone.")
        lines.append("")
    table("BINDINGS", data["bindings"], ["pod", "node"])
    table("EVICTIONS", data["evictions"], ["pod", "node", "preemptor", "reason"])
    table("UNSCHEDULABLE", data["unschedulable"], ["pod", "message"])
    table("POD GROUPS", [_group_row(g) for g in data["podGroups"]], ["name", "api", "status"])
    if data["reservations"]:
        table("RESERVATIONS", data["reservations"], ["node", "pod", "since"])
    if data["volumeBindings"]:
        table("VOLUME BINDINGS", data["volumeBindings"], ["claim", "pod", "node", "volume"])
    if data["claims"]:
        allocations = [
            {
                "claim": c["claim"],
                "devices": " ".join(
                    f"{d['driver']}/{d['pool']}/{d['device']}"
                    for d in c["status"]["allocation"]["devices"]["results"]
                ),
                "reservedFor": " ".join(r["name"] for r in c["status"]["reservedFor"]),
            }
            for c in data["claims"]
        ]
        table("CLAIMS", allocations, ["claim", "devices", "reservedFor"])
    if data["warnings"]:
        table("WARNINGS", data["warnings"], ["object", "message"])
    return "\n".join(lines).rstrip() + "\n"


def _group_row(group: dict[str, Any]) -> dict[str, str]:
    """A CRD group's phase and counts, or an upstream group's conditions, on one line."""
    if "conditions" in group:
        status = ", ".join(
            f"{c['type']}={c['status']} ({c['reason']})" for c in group["conditions"]
        )
    else:
        status = f"{group['phase']}, running {group['running']}, admitted {group['admitted']}"
    return {"name": group["name"], "api": group["apiVersion"], "status": status or "-"}


def _schedule(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    objects = _objects(args)
    now = args.now or datetime.now(UTC)
    result = run(objects, config, now)
    for warning in result.warnings:
        print(f"warning: {warning.obj}: {warning.message}", file=sys.stderr)
    if args.output == "json":
        sys.stdout.write(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(_text(result))
    return 0


def _objects(args: argparse.Namespace) -> Objects:
    """The objects of the FILEs, added to the cluster's when --kubeconfig or --context is
    given; with neither and no FILE, the cluster's alone (credentials found as kubectl does)."""
    files = load_files(list(args.files))
    if args.strict:
        files.check_strict()
    for warning in files.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    objects = files
    if not args.files or args.kubeconfig is not None or args.context is not None:
        try:
            cluster = read_cluster(args.kubeconfig, args.context)
        except ConnectError as err:
            if args.files or args.kubeconfig is not None or args.context is not None:
                raise
            raise InputError(
                f"{args.command}: give manifest FILEs, a cluster (--kubeconfig PATH, KUBECONFIG "
                f"or ~/.kube/config), or both ({err})"
            ) from None
        objects = merge_objects(cluster, files)
    # Only the files' pods: the cluster's own were admitted when their class existed.
    files.check_priority_classes(", ".join(str(f) for f in args.files), objects.priority_classes)
    return objects


def _policy(args: argparse.Namespace) -> int:
    objects = _objects(args)
    if not objects.priority_classes:
        where = " ".join(str(f) for f in args.files) or str(args.kubeconfig)
        raise InputError(f"no PriorityClass found in {where}")
    report = build_report(objects, args.now or datetime.now(UTC))
    if args.output == "json":
        sys.stdout.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_text(report))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The commands print the core's warnings themselves (Warn decisions); without this the
    # same problems would also reach stderr through logging's last-resort handler.
    logger = logging.getLogger("batchsched")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    try:
        if args.command == "schedule":
            return _schedule(args)
        if args.command == "policy":
            return _policy(args)
        if args.command == "run":
            return run_command(args)
        if args.command == "simulate":
            from batchsched.sim.command import main as simulate

            return simulate(
                args.scenarios, args.config, args.seed, args.until, args.report, args.strict
            )
    except InputError as err:
        print(f"batchsched: error: {err}", file=sys.stderr)
        return 2
    return 2
