"""Text tables that fit a terminal: long cells wrap, the identifying column never does.

Every text output of the command line goes through `table`, so that it fits `width()`
columns: `COLUMNS` when set, else the terminal's width when the output is one, else `WIDTH`
(kubectl's tables do not wrap, but its long fields are short; ours carry scheduler messages of
200 characters and more). Columns are shrunk widest first (see `_fit`); cells then wrap at
word boundaries (a word longer than its column is broken after a `/` or between the words of a
CamelCase name if it has them: a plugin name is never cut inside one of its words).
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Sequence

WIDTH = 100  # where neither COLUMNS nor a terminal gives one
_NARROWEST = 40  # below this, tables would be mostly wrapping
_GAP = "  "
_MIN_WIDTH = 10
# Where a CamelCase name (NodeResourcesFit) may break: between its words.
_CAMEL = r"(?<=[a-z0-9])(?=[A-Z])"


def width() -> int:
    """The columns to fit: `COLUMNS` when set (a shell's, or the user's `COLUMNS=120`), else
    the terminal's width when stdout is one, else WIDTH (a pipe or a file)."""
    raw = os.environ.get("COLUMNS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return max(int(raw), _NARROWEST)
    try:
        if sys.stdout.isatty():
            return max(os.get_terminal_size(sys.stdout.fileno()).columns, _NARROWEST)
    except (OSError, ValueError):  # no terminal after all, or a closed or replaced stdout
        pass
    return WIDTH


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    indent: int = 2,
    upper: bool = True,
    keep: int = 1,
) -> list[str]:
    """Lines of a table fitting `width()`, `head` in capitals unless it is data (`upper`); the
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
    names = [
        max([_longest_name_part(head[i]), *(_longest_name_part(row[i]) for row in cells)])
        for i in range(columns)
    ]
    room = width() - indent - len(_GAP) * (columns - 1)
    widths = _fit(natural, words, names, room, keep)
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


def wrap(text: str, indent: str = "") -> list[str]:
    """A paragraph wrapped to `width()`, every line after the first indented by `indent`."""
    return textwrap.wrap(
        text,
        width=width(),
        subsequent_indent=indent,
        break_on_hyphens=False,
    ) or [""]


def _longest_word(cell: str) -> int:
    return max((len(word) for word in cell.split()), default=0)


def _longest_name_part(cell: str) -> int:
    """The longest word of a CamelCase name in `cell` (`Resources` of NodeResourcesFit): no
    column of names is narrower, so no name is cut inside a word; 1 for other text."""
    names = [w for w in cell.split() if re.fullmatch(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+", w)]
    return max((len(p) for n in names for p in re.split(_CAMEL, n)), default=1)


def _longest_line(cell: str) -> int:
    return max(len(line) for line in cell.split("\n"))


def _fit(natural: list[int], words: list[int], names: list[int], room: int, keep: int) -> list[int]:
    """Column widths summing to at most `room`, taking from the widest columns first. The
    first `keep` columns (the object's name) keep their width: a cut name identifies nothing.
    Columns shrink to their longest word first, then break words down to `_MIN_WIDTH`, and
    only a table of many columns breaks them further (it still fits, if less readably). No
    column gets narrower than the longest word of a CamelCase name in it (`names`): a table
    of many plugins overflows a narrow terminal rather than cut `NodeResourcesFit` mid-word
    (and its other columns are then left at `_MIN_WIDTH`, since narrower would not fit)."""
    widths = list(natural)
    small = [max(min(w, _MIN_WIDTH), n) for w, n in zip(words, names, strict=True)]
    for floors in (words, small, names):
        if sum(widths[:keep]) + sum(floors[keep:]) > room and floors is names:
            break  # it would not fit even so: crushing the other columns would not help
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
    """Also breaks after a `/`, and between the words of a CamelCase name: a count
    `82247/82247` in a column of 10 reads `82247/` over `82247`, not `82247/8224` over `7`,
    and `NodeResourcesFit` reads `NodeResources` over `Fit`. Used only where a word is longer
    than its column, so names such as `nvidia.com/gpu` stay whole wherever they fit."""

    wordsep_simple_re = re.compile(rf"(\s+|(?<=/)(?=[^\s/])|{_CAMEL})")


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
