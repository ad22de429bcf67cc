"""The `batchsched` command line."""

from __future__ import annotations

import argparse
import difflib
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from batchsched import __version__
from batchsched.commands import tables
from batchsched.commands.output import FORMATS, emit
from batchsched.commands.run_args import add_run_parser
from batchsched.objects.errors import InputError

if TYPE_CHECKING:
    from batchsched.commands.schedule import OneShotResult
    from batchsched.objects.load import Objects

# Each command imports what it runs when it runs: `--help` and argument errors stay fast, and
# `live/` is loaded only by `run` and `--kubeconfig` (docs/architecture.md).


def _now_arg(value: str) -> datetime:
    from batchsched.objects.parse import parse_time

    try:
        return parse_time(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an RFC 3339 time (e.g. 2026-11-22T10:00:00Z)"
        ) from None


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive integer")
    return number


def _duration_arg(value: str) -> float:
    from batchsched.sim.workload import parse_duration

    try:
        return parse_duration(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _add_strict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict",
        action="store_true",
        help="unknown fields in the objects read, and manifests' kinds not read that look "
        "mistyped or are scheduling objects (another scheduler's), are errors (exit 2), not "
        "warnings",
    )


def _add_sources(parser: argparse.ArgumentParser) -> None:
    """Where a command reads its objects: manifest files, a cluster, or both."""
    _add_strict(parser)
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help="manifest files or directories (the same as -f)",
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a manifest file, a directory of them, or - for stdin; repeatable",
    )
    parser.add_argument(
        "-R",
        "--recursive",
        action="store_true",
        help="read directories given with -f or FILE recursively",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="read the cluster's objects through this kubeconfig (FILEs are added to them); "
        "without FILEs the cluster is read through KUBECONFIG or ~/.kube/config",
    )
    parser.add_argument("--context", help="the kubeconfig context to use (default: current)")


def _add_scheduling(parser: argparse.ArgumentParser) -> None:
    """What a command that runs the scheduler over the sources reads and prints."""
    _add_sources(parser)
    parser.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    parser.add_argument(
        "--now", type=_now_arg, help="the time to schedule at (RFC 3339; default: now)"
    )
    _add_output(parser)


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="text",
        help="text tables for people (default), or json / yaml for programs",
    )


def _command(sub: Any, name: str, summary: str, example: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog="example:\n  " + example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


class _Parser(argparse.ArgumentParser):
    """The top-level parser; `commands` maps each subcommand to its own parser, whose usage an
    error about its arguments prints."""

    commands: dict[str, argparse.ArgumentParser]

    def parse_command_line(self, argv: Sequence[str] | None) -> argparse.Namespace:
        """parse_args, with "did you mean" for a mistyped command, and an unknown flag
        reported with its command's usage (argparse reports it with the top level's)."""
        words = list(sys.argv[1:] if argv is None else argv)
        command = next((w for w in words if not w.startswith("-")), None)
        if command is not None and command not in self.commands:
            self.error(f"unknown command {command!r}{_suggest(command, list(self.commands))}")
        args, extras = self.parse_known_args(words)
        if extras:
            sub = self.commands[args.command]
            options = [o for a in sub._actions for o in a.option_strings]
            hint = _suggest(extras[0], options) if extras[0].startswith("-") else ""
            sub.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return args


def _suggest(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f" (one of: {', '.join(known)})"


def _parser() -> _Parser:
    parser = _Parser(
        prog="batchsched",
        description="A Kubernetes batch scheduler for shared, capacity-bound clusters.",
        epilog="Run `batchsched COMMAND --help` for a command's arguments and an example.",
    )
    parser.add_argument("--version", action="version", version=f"batchsched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sched = _command(
        sub,
        "schedule",
        "schedule the pending pods of manifest files once and print the decisions",
        "batchsched schedule -f examples/basic/cluster.yaml --now 2026-11-22T10:00:00Z",
    )
    _add_scheduling(sched)
    explain = _command(
        sub,
        "explain",
        "explain one pod's placement: every node's verdict, scores, preemption, its gang",
        "batchsched explain research/huge-job -f examples/basic/cluster.yaml "
        "--now 2026-11-22T10:00:00Z",
    )
    explain.add_argument(
        "pod", metavar="[NAMESPACE/]POD", help="the pod to explain (NAMESPACE/POD, or POD with -n)"
    )
    explain.add_argument(
        "-n", "--namespace", help="the pod's namespace, as with kubectl (default: default)"
    )
    _add_scheduling(explain)
    policy = _command(
        sub,
        "policy",
        "print who may preempt whom under the PriorityClasses' toleration policies",
        "batchsched policy -f examples/preemption-toleration/priority-classes.yaml",
    )
    _add_sources(policy)
    policy.add_argument(
        "--now", type=_now_arg, help="the time for running pods' protection (default: now)"
    )
    _add_output(policy)
    queues = _command(
        sub,
        "queues",
        "print the queue tree: quotas, usage, borrowing and pending pods per queue",
        "batchsched queues -f examples/queues/three-teams.yaml",
    )
    _add_sources(queues)
    queues.add_argument(
        "--config",
        type=Path,
        help="KubeSchedulerConfiguration YAML (the Queues plugin's usageHalfLife shows decayed "
        "usage and effective weights)",
    )
    queues.add_argument(
        "--now", type=_now_arg, help="the time decayed usage is read at (default: now)"
    )
    _add_output(queues)
    add_run_parser(sub)
    ui = _command(
        sub,
        "ui",
        "serve the read-only web pages (queues, positions, reasons, GPU map) over a snapshot",
        "batchsched ui -f examples/queues/three-teams.yaml --now 2026-11-22T10:00:00Z",
    )
    _add_sources(ui)
    ui.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    ui.add_argument(
        "--now",
        type=_now_arg,
        help="the time to judge the snapshot at (RFC 3339; default: when it is read)",
    )
    ui.add_argument("--address", default="127.0.0.1", help="address to serve on (127.0.0.1)")
    ui.add_argument("--port", type=int, default=10260, help="port to serve on (10260; 0: any)")
    ui.add_argument(
        "--allow-from",
        default="127.0.0.0/8,::1/128",
        metavar="CIDRS",
        help="networks whose requests are served (comma-separated; default: loopback)",
    )
    ui.add_argument(
        "--poll",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how often open pages look for a newer judgement (2; 0: never)",
    )
    sim = _command(
        sub,
        "simulate",
        "replay scenarios on a virtual clock through the scheduler and compare them",
        "batchsched simulate examples/ml-cluster/scenario.yaml --report reports/demo",
    )
    sim.add_argument(
        "scenarios", nargs="+", type=Path, metavar="SCENARIO", help="scenario YAML files"
    )
    _add_strict(sim)
    sim.add_argument(
        "--config",
        type=Path,
        action="append",
        default=[],
        help="KubeSchedulerConfiguration YAML; repeat to compare configs",
    )
    sim.add_argument("--seed", type=int, help="seed for generated workloads (default: scenario's)")
    sim.add_argument(
        "--seeds",
        type=_positive_int,
        help="run every variant on this many seeds, from --seed on, and report means with 95%% "
        "confidence intervals (default: the scenario's seeds:, else 1)",
    )
    sim.add_argument(
        "--jobs",
        type=_positive_int,
        help="worker processes for the runs (default: the number of cores)",
    )
    sim.add_argument("--until", type=_duration_arg, help="stop at this virtual time, e.g. 12h")
    sim.add_argument(
        "--report", type=Path, metavar="DIR", help="write summary.json, jobs.csv, report.html"
    )
    sim.add_argument(
        "--traces",
        type=Path,
        metavar="DIR",
        help="look for trace files here too (after the scenario's folder and $BATCHSCHED_TRACES)",
    )
    sim.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="run every run and seed as a Ray task: on the cluster at ADDRESS (ray://host:10001; "
        "auto, the default: the one RAY_ADDRESS or `ray start` gives), or `local` (a Ray "
        "instance started here, --jobs CPUs); needs pip install 'batchsched[ray]'",
    )
    _add_output(sim)
    parser.commands = dict(cast(dict[str, argparse.ArgumentParser], sub.choices))
    return parser


def _held_when(reservation: dict[str, Any]) -> dict[str, str]:
    """When a reservation is held, as the text tables say it: a DaemonSet one from its
    `since` until its pod is placed; Backfill's as `_when` says."""
    if reservation["kind"] == "DaemonSet":
        return {"from": reservation["since"], "until": "placed"}
    return _when(reservation["expectedStart"], reservation["plannedEnd"])


def _when(start: str | None, end: str | None) -> dict[str, str]:
    """Backfill's room is held from its expected start (`now` while it waits for pods
    without a stated runtime) until its planned end (`open`: for good), docs/backfill.md."""
    return {"from": start or "now", "until": end or "open"}


def _text(result: OneShotResult) -> str:
    data = result.to_json()
    lines: list[str] = []

    def section(title: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
        lines.extend(tables.section(title, columns, [[str(r[c]) for c in columns] for r in rows]))

    if data["evictions"]:
        lines.append("Apply the evictions first, then the bindings once the victims are gone.")
        lines.append("")
    section("BINDINGS", data["bindings"], ["pod", "node"])
    section("EVICTIONS", data["evictions"], ["pod", "node", "preemptor", "reason"])
    section("UNSCHEDULABLE", data["unschedulable"], ["pod", "message"])
    section("POD GROUPS", [_group_row(g) for g in data["podGroups"]], ["name", "api", "status"])
    if data["reservations"]:
        rows = [{**r, "nodes": ",".join(r["nodes"]), **_held_when(r)} for r in data["reservations"]]
        section("RESERVATIONS", rows, ["kind", "holder", "nodes", "from", "until"])
        room = [
            {
                "node": held["node"],
                "holder": r["holder"],
                "room": ", ".join(f"{k} {v}" for k, v in held["resources"].items()),
                **_when(held["from"], held["until"]),
            }
            for r in data["reservations"]
            if r["kind"] == "Backfill"
            for held in r["room"]
        ]
        if room:
            # Per node, which room each reservation holds and when (docs/backfill.md).
            room.sort(key=lambda h: (h["node"], h["from"] != "now", h["from"], h["holder"]))
            section("RESERVED ROOM", room, ["node", "holder", "room", "from", "until"])
    if data["volumeBindings"]:
        section("VOLUME BINDINGS", data["volumeBindings"], ["claim", "pod", "node", "volume"])
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
        section("CLAIMS", allocations, ["claim", "devices", "reservedFor"])
    if data["warnings"]:
        section("WARNINGS", data["warnings"], ["object", "message"])
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
    from batchsched.commands.schedule import input_notices, run
    from batchsched.config import load_config

    config = load_config(args.config)
    objects = _objects(args)
    for notice in input_notices(objects, config.scheduler_names):
        print(f"warning: {notice}", file=sys.stderr)
    now = args.now or datetime.now(UTC)
    result = run(objects, config, now)
    if args.output != "text":
        # The document carries them for programs; stderr tells the person running the script.
        # Text output lists them in its WARNINGS table, once.
        for warning in result.warnings:
            print(f"warning: {warning.obj}: {warning.message}", file=sys.stderr)
    emit(result.to_json(), args.output, lambda: _text(result))
    return 0


def _explain(args: argparse.Namespace) -> int:
    from batchsched.commands.explain import explain_pod
    from batchsched.commands.explain_text import render_explanation
    from batchsched.config import load_config

    config = load_config(args.config)
    objects = _objects(args)
    key = _pod_key(args.pod, args.namespace)
    explanation = explain_pod(objects, config, args.now or datetime.now(UTC), key)
    emit(explanation.to_json(), args.output, lambda: render_explanation(explanation))
    return 0


def _pod_key(pod: str, namespace: str | None) -> str:
    """NAMESPACE/POD, or POD in `-n NAMESPACE` (else `default`), as kubectl takes them."""
    named, slash, name = pod.rpartition("/")
    if slash and namespace is not None and named != namespace:
        raise InputError(f"explain: {pod} is in namespace {named!r}, but -n says {namespace!r}")
    return f"{named if slash else namespace or 'default'}/{name}"


def _objects(args: argparse.Namespace) -> Objects:
    """The objects of the FILEs and -f sources, added to the cluster's when --kubeconfig or
    --context is given; with neither and no FILE, the cluster's alone (credentials found as
    kubectl does)."""
    from batchsched.objects.load import STDIN, directory_notices, expand_paths, load_files
    from batchsched.objects.queues import check_queue_tree

    sources = [*args.files, *args.filenames]
    if sum(1 for s in sources if str(s) == STDIN) > 1:
        raise InputError(f"{args.command}: -f - (stdin) can be given only once")
    files = load_files(expand_paths(sources, args.recursive), stdin=sys.stdin.read)
    if args.strict:
        files.check_strict()
    for warning in [*files.warnings, *directory_notices(sources, args.recursive), *files.notices()]:
        print(f"warning: {warning}", file=sys.stderr)
    objects = files
    if not sources or args.kubeconfig is not None or args.context is not None:
        from batchsched.live.credentials import ConnectError
        from batchsched.live.snapshot import merge_objects, read_cluster

        try:
            cluster = read_cluster(args.kubeconfig, args.context)
        except ConnectError as err:
            if sources or args.kubeconfig is not None or args.context is not None:
                raise
            raise InputError(
                f"{args.command}: give manifest FILEs, a cluster (--kubeconfig PATH, KUBECONFIG "
                f"or ~/.kube/config), or both ({err})"
            ) from None
        objects = merge_objects(cluster, files)
    # Only the files' pods: the cluster's own were admitted when their class existed.
    files.check_priority_classes(", ".join(str(f) for f in sources), objects.priority_classes)
    check_queue_tree(objects.queues)
    return objects


def _queues(args: argparse.Namespace) -> int:
    from batchsched.commands.queues import queue_report, render_text
    from batchsched.commands.schedule import build_state
    from batchsched.config import load_config
    from batchsched.controllers.queues import restore_usage
    from batchsched.scheduling.scheduler import Scheduler

    state = build_state(_objects(args))
    Scheduler(state, load_config(args.config))  # the profiles' Queues args (decay)
    now = (args.now or datetime.now(UTC)).timestamp()
    for err in restore_usage(state, now).values():
        print(f"warning: {err}; ignored: its decayed usage starts from 0", file=sys.stderr)
    report = queue_report(state)
    emit({"queues": report}, args.output, lambda: render_text(report))
    return 0


def _policy(args: argparse.Namespace) -> int:
    from batchsched.commands.policy import build_report, render_text

    objects = _objects(args)
    report = build_report(objects, args.now or datetime.now(UTC))
    if not report.classes:  # neither defined nor a built-in one a pod names
        where = " ".join(str(f) for f in [*args.files, *args.filenames]) or str(args.kubeconfig)
        raise InputError(f"no PriorityClass found in {where}")
    emit(report.to_json(), args.output, lambda: render_text(report))
    return 0


def _ui(args: argparse.Namespace) -> int:
    from batchsched.config import load_config
    from batchsched.ui.access import parse_networks
    from batchsched.ui.offline import SnapshotJudge, serve
    from batchsched.ui.publisher import Publisher

    config = load_config(args.config)
    allowed = parse_networks(args.allow_from, "--allow-from")
    paths = [*args.files, *args.filenames]
    judge = SnapshotJudge(
        lambda: _objects(args), config, args.now, paths, args.recursive, Publisher()
    )
    return serve(judge, args.address, args.port, allowed, max(0.0, args.poll))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_command_line(argv)
    # The commands print the core's warnings themselves (Warn decisions); without this the
    # same problems would also reach stderr through logging's last-resort handler.
    logger = logging.getLogger("batchsched")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    try:
        if args.command == "schedule":
            return _schedule(args)
        if args.command == "explain":
            return _explain(args)
        if args.command == "policy":
            return _policy(args)
        if args.command == "queues":
            return _queues(args)
        if args.command == "run":
            from batchsched.live.cli import run_command

            return run_command(args)
        if args.command == "ui":
            return _ui(args)
        if args.command == "simulate":
            from batchsched.sim.command import main as simulate

            return simulate(
                args.scenarios,
                args.config,
                args.seed,
                args.until,
                args.report,
                output=args.output,
                strict=args.strict,
                seeds=args.seeds,
                jobs=args.jobs,
                traces=args.traces,
                ray=args.ray,
            )
    except InputError as err:
        print(f"batchsched: error: {err}", file=sys.stderr)
        return 2
    return 2
