"""Text tables fit the width (COLUMNS, a terminal, else 100), keep the identifying column whole,
lose no word and cut no plugin name inside a word."""

from __future__ import annotations

import io
import os
import re
import sys

import pytest
from _pytest.monkeypatch import MonkeyPatch
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.commands import tables

words = st.text(alphabet="abcdefghij/-.:", min_size=1, max_size=14)
cells = st.lists(words, min_size=1, max_size=40).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=2, max_value=12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.tuples(words, st.lists(cells, min_size=n - 1, max_size=n - 1)),
                min_size=1,
                max_size=6,
            ),
        )
    )
)
def test_tables_fit_and_keep_every_word(shape: tuple[int, list[tuple[str, list[str]]]]) -> None:
    columns, raw = shape
    head = [f"col{i}" for i in range(columns)]
    rows = [[name, *rest] for name, rest in raw]
    lines = tables.table(head, rows)
    assert all(len(line) <= tables.WIDTH for line in lines)
    text = " ".join(lines).split()
    for name, _ in raw:
        assert name in text  # the first column is never wrapped or cut
    # Nothing is truncated: every character of every cell is printed.
    printed = "".join("".join(lines).split())
    given = "".join(
        "".join([*(h.upper() for h in head), *(c for row in rows for c in row)]).split()
    )
    assert sorted(printed) == sorted(given)


def test_a_long_message_wraps_under_its_column() -> None:
    message = "0/4 nodes are available: " + ", ".join(f"{i} reason number {i}" for i in range(12))
    lines = tables.table(["pod", "message"], [["ns/pod", message]])
    assert len(lines) > 2 and all(len(line) <= 100 for line in lines)
    assert lines[1].startswith("  ns/pod  0/4 nodes")
    assert all(line.startswith("          ") for line in lines[2:])  # continuation aligned
    assert " ".join(" ".join(lines[1:]).split()) == "ns/pod " + message


def test_a_count_too_wide_for_its_column_breaks_at_its_slash() -> None:
    # simulate's per-class table, as a Philly replay fills it.
    head = ["class", "run", "jobs finished / submitted", "wait p50 (min)", "wait p95 (min)"]
    head += [
        "wait p99 (min)",
        "completion p50 (h)",
        "preemptions",
        "no-progress preemptions",
        "lost GPU-hours",
    ]
    row = ["low", "philly/least-allocated", "82247/82247", "0.0", "0.0", "0.0", "0.32", "0"]
    row += ["0", "0.0"]
    lines = tables.table(head, [row], keep=2)
    assert all(len(line) <= tables.WIDTH for line in lines)
    cells = " ".join(lines).split()
    assert "82247/" in cells and "82247" in cells and "82247/8224" not in cells
    assert "philly/least-allocated" in cells  # names kept whole
    # Where words fit, a slash is no break: nvidia.com/gpu stays whole in a narrow column.
    narrow = tables.table(["pod", "reason"], [["p" * 70, "Insufficient nvidia.com/gpu " * 3]])
    assert " ".join(narrow).split().count("nvidia.com/gpu") == 3


def test_the_width_is_columns_else_the_terminals_else_100(monkeypatch: MonkeyPatch) -> None:
    assert tables.width() == 100  # pytest's captured stdout is no terminal
    monkeypatch.setenv("COLUMNS", "132")
    assert tables.width() == 132
    monkeypatch.setenv("COLUMNS", "12")
    assert tables.width() == 40  # narrower would be all wrapping
    monkeypatch.setenv("COLUMNS", "wide")
    assert tables.width() == 100

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

        def fileno(self) -> int:
            return 1

    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((87, 24)))
    assert tables.width() == 87


SCORE_PLUGINS = [
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "VolumeBinding",
    "PodTopologySpread",
    "InterPodAffinity",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
]


def _headers(lines: list[str]) -> list[list[str]]:
    """Each column's header lines, the columns found where the one data row's cells start."""
    at = next(i for i, line in enumerate(lines) if "node-a" in line)
    starts = [m.start() for m in re.finditer(r"\S+", lines[at])]
    ends = [*starts[1:], None]
    return [
        [part for row in lines[:at] if (part := row[start:end].strip())]
        for start, end in zip(starts, ends, strict=True)
    ]


@pytest.mark.parametrize("columns", [100, 80, 60])
def test_a_score_table_breaks_plugin_names_only_between_their_words(
    monkeypatch: MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    head = ["NODE", "TOTAL", *SCORE_PLUGINS]
    rows = [["node-a", "512", *(["100"] * len(SCORE_PLUGINS))]]
    lines = tables.table(head, rows, upper=False)
    for name, parts in zip(head, _headers(lines), strict=True):
        assert "".join(parts) == name
        # Each line of a header holds whole words of the name: NodeResources over Fit.
        assert all(re.fullmatch(r"(?:[A-Z][a-z]+)+|NODE|TOTAL", p) for p in parts), parts
    if columns >= 100:
        assert all(len(line) <= columns for line in lines)
