"""The README is the entry page: under 15 KB, says why batchsched and how mature it is, shows
benchmarks as a plain table, and its "run it in your cluster" commands name what exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).parents[2]
README = (REPO / "README.md").read_text()


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert match is not None, f"README has no section {title!r}"
    return match.group(1)


def test_the_readme_stays_under_15_kb() -> None:
    assert len(README.encode()) < 15 * 1024


def test_why_batchsched_names_the_alternatives_and_what_is_missing() -> None:
    why = " ".join(_section("Why batchsched").split())
    for other in ("kube-scheduler", "Volcano", "KAI", "YuniKorn", "Kueue"):
        assert other in why, other
    missing = why[why.index("Not there yet:") :]
    assert "GPU sharing" in missing
    assert re.search(r"^Maturity: \w+", README, re.M)


def test_the_benchmark_table_is_plain_and_without_history() -> None:
    table = [line for line in _section("Benchmarks (2 cores)").splitlines() if line.startswith("|")]
    assert table[0] == "| workload | batchsched | reference | ratio |"
    rows = table[2:]
    assert len(rows) >= 5
    for row in rows:
        assert row.count("|") == 5, row
        # Figures of the day, not their history or scheduler_perf's workload names.
        assert not re.search(r"\bago\b|sessions?|\bwas\b|`", row), row


def test_run_it_in_your_cluster_builds_the_image_and_keeps_the_crd_optional() -> None:
    run = _section("Run it in your cluster")
    assert "make image" in run and "\nimage:" in (REPO / "Makefile").read_text()
    assert "set image batchsched=" in run and "`images:`" in run
    for path in re.findall(r"kubectl apply -k (\S+)", run):
        assert (REPO / path / "kustomization.yaml").is_file(), path
    assert "kubectl apply -k deploy/components/podgroup-crd/" in run
    assert "kubectl delete -k deploy/" in run
