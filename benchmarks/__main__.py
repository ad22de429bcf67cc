"""Run the benchmark workloads, one fresh process each, printing one JSON object per line."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import resource
import subprocess
import sys

import orjson

from benchmarks import workloads
from benchmarks.harness import WORKLOADS


def _discover() -> None:
    for module in pkgutil.iter_modules(workloads.__path__):
        importlib.import_module(f"{workloads.__name__}.{module.name}")


def _run_one(name: str) -> None:
    metrics = {"workload": name, **WORKLOADS[name]()}
    metrics["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    sys.stdout.write(orjson.dumps(metrics).decode() + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--workload", default="", help="run workloads whose name starts with this")
    parser.add_argument("--in-process", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args()
    _discover()
    if args.in_process:
        _run_one(args.in_process)
        return 0
    names = [n for n in sorted(WORKLOADS) if n.startswith(args.workload)]
    if not names:
        print(f"no workload starts with {args.workload!r}; known: {', '.join(sorted(WORKLOADS))}")
        return 2
    failed = 0
    for name in names:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks", "--in-process", name],
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        sys.stdout.write(proc.stdout)
        sys.stdout.flush()
        if proc.returncode != 0:
            failed += 1
            print(orjson.dumps({"workload": name, "error": f"exit {proc.returncode}"}).decode())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
