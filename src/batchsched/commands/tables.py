"""Text tables that fit a terminal: long cells wrap, the identifying column never does.

Every text output of the command line goes through `table`, so that it fits `WIDTH` columns
(kubectl's tables do not wrap, but its long fields are short; ours carry scheduler messages of
200 characters and more). Columns are shrunk widest first (see `_fit`); cells then
wrap at word boundaries (a word longer than its column is broken, after a `/` if it has one).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

WIDTH = 100
_GAP = "  "
_MIN_WIDTH = 10


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    indent: int = 2,
    upper: bool = True,
    keep: int = 1,
) -> list[str]:
    """Lines of a table fitting WIDTH, `head` in capitals unless it is data (`upper`); the
    first `keep` columns, which identify a row, are never narrowed."""
    columns = len(head)
    cells = [[str(c) for c in row] for row in rows]
    natural = [
        max([len(head[i]), *(_longest_line(row[i]) for row in cells)]) for i in range(columns)
    ]
    words = [
        max([_longest_word(head[i]), *(_longest_word(row[i]) for row in cells)])
        for i in range(columns)
    ]
    widths = _fit(natural, words, WIDTH - indent - len(_GAP) * (columns - 1), keep)
    lines: list[str] = []
    for row in [[h.upper() if upper else h for h in head], *cells]:
        wrapped = [_wrap(cell, w) for cell, w in zip(row, widths, strict=True)]
        for k in range(max(len(w) for w in wrapped)):
            parts = [
                (w[k] if k < len(w) else "").ljust(width)
                for w, width in zip(wrapped, widths, strict=True)
            ]
            lines.append((" " * indent + _GAP.join(parts)).rstrip())
    return lines


def section(title: str, head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A titled table with its row count, or `none`, and a blank line after it."""
    lines = [f"{title} ({len(rows)})"]
    lines.extend(table(head, rows) if rows else ["  none"])
    lines.append("")
    return lines


def wrap(text: str, width: int = WIDTH, indent: str = "") -> list[str]:
    """A paragraph wrapped to `width`, every line after the first indented by `indent`."""
    return textwrap.wrap(
        text,
        width=width,
        subsequent_indent=indent,
        break_on_hyphens=False,
    ) or [""]


def _longest_word(cell: str) -> int:
    return max((len(word) for word in cell.split()), default=0)


def _longest_line(cell: str) -> int:
    return max(len(line) for line in cell.split("\n"))


def _fit(natural: list[int], words: list[int], room: int, keep: int) -> list[int]:
    """Column widths summing to at most `room`, taking from the widest columns first. The
    first `keep` columns (the object's name) keep their width: a cut name identifies nothing.
    Columns shrink to their longest word first, then break words down to `_MIN_WIDTH`, and
    only a table of many columns breaks them further (it still fits, if less readably)."""
    widths = list(natural)
    for floors in (words, [min(w, _MIN_WIDTH) for w in words], [1] * len(words)):
        while sum(widths) > room:
            shrinkable = [i for i in range(keep, len(widths)) if widths[i] > floors[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            excess = sum(widths) - room
            others = [widths[i] for i in shrinkable if i != widest]
            floor = max(floors[widest], max(others, default=0), widths[widest] - excess)
            # Ties with the next widest column shrink one step, so the columns take turns.
            widths[widest] = floor if floor < widths[widest] else widths[widest] - 1
    return widths


class _SlashWrapper(textwrap.TextWrapper):
    """Also breaks after a `/`: a count `82247/82247` in a column of 10 reads `82247/` over
    `82247`, not `82247/8224` over `7`. Used only where a word is longer than its column, so
    names such as `nvidia.com/gpu` stay whole wherever they fit."""

    wordsep_simple_re = re.compile(r"(\s+|(?<=/)(?=[^\s/]))")


def _wrap(cell: str, width: int) -> list[str]:
    lines: list[str] = []
    for paragraph in cell.split("\n"):
        if len(paragraph) <= width:
            lines.append(paragraph)
        elif _longest_word(paragraph) > width:
            lines.extend(_SlashWrapper(width=width, break_on_hyphens=False).wrap(paragraph))
        else:
            lines.extend(textwrap.wrap(paragraph, width=width, break_on_hyphens=False))
    return lines or [""]
