"""The `batchsched run` subcommand's arguments: parsed here so that only `run` imports `live/`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_run_parser(sub: Any) -> None:
    summary = "run as a scheduler in a cluster: watch pods and nodes, bind, preempt"
    run = sub.add_parser(
        "run",
        help=summary,
        description=summary[0].upper() + summary[1:] + ". Decisions are logged, not printed.",
        epilog="example:\n  batchsched run --kubeconfig ~/.kube/config --dry-run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig file (default: KUBECONFIG, ~/.kube/config, then the pod's service "
        "account)",
    )
    run.add_argument("--context", help="the kubeconfig context to use (default: current)")
    run.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="watch and decide, but write nothing to the cluster (decisions are logged)",
    )
    serving = run.add_argument_group(
        "endpoints",
        "/healthz, /livez, /readyz (anyone) and /metrics (a user allowed `get` on the path, "
        "checked by TokenReview and SubjectAccessReview) over HTTPS, as kube-scheduler",
    )
    serving.add_argument(
        "--bind-address", default="0.0.0.0", help="address of the HTTPS endpoints (0.0.0.0)"
    )
    serving.add_argument(
        "--secure-port",
        type=int,
        metavar="PORT",
        help="port of the HTTPS endpoints (default 10259, none if --listen is given; 0: none)",
    )
    serving.add_argument(
        "--tls-cert-file",
        type=Path,
        help="serving certificate (PEM; read again when it changes); default: self-signed",
    )
    serving.add_argument("--tls-private-key-file", type=Path, help="its key (PEM)")
    serving.add_argument(
        "--listen",
        default="",
        metavar="HOST:PORT",
        help="serve the endpoints over plain HTTP here, without authentication",
    )
    ui = run.add_argument_group(
        "web UI",
        "read-only pages (queues, positions, reasons, GPU map, preemptions) on the endpoints' "
        "ports; a bearer token's user sees the namespaces where it may list pods "
        "(docs/ui.md)",
    )
    ui.add_argument(
        "--ui",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve the web UI (default: on)",
    )
    ui.add_argument(
        "--ui-allow-from",
        default="127.0.0.0/8,::1/128",
        metavar="CIDRS",
        help="networks served without a token (comma-separated; default: loopback, for "
        "kubectl port-forward; empty: none)",
    )
    ui.add_argument(
        "--ui-poll",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how often open pages look for news (2; 0: never)",
    )
    run.add_argument(
        "--identity",
        default="",
        help="leader election identity (default: host name and a random suffix)",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")
