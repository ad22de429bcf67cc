"""Whatever the text, reading YAML with the native fast path gives what the libyaml path alone
gives: the same values (types included) or the same error message.

Documents are written by hand here, not by yaml.safe_dump, because the dumper quotes exactly
the scalars where YAML 1.1 and 1.2 disagree; the plain (unquoted) spellings are the point.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.documents import DocumentError, _libyaml_documents, yaml_documents

WORDS = [
    *("yes", "No", "ON", "off", "y", "true", "False", "NULL", "null", "~", "<<", "="),
    *("0755", "+0755", "0b101", "0x1F", "0x_1F", "0o17", "1_000", "1:30", "1:30.5", "09"),
    *("1e3", "1.5e3", "1.5e+3", "-1.2E-3", ".5", "-.inf", ".NaN", "0.", "-0", "12", "3.25"),
    *("2026-11-22", "2026-11-22T09:00:00Z", "100m", "128Gi", "v1.2.3", "10.0.0.0/24", "a:b"),
]
# Short runs of the characters numbers and YAML 1.1's words are made of: no spaces, commas or
# brackets, so each stays one plain scalar whatever it spells.
ODD = st.text(alphabet="0123456789.+-_:eExXoObByYnNsSfF~<=", min_size=1, max_size=6)
TRICKY = st.one_of(st.sampled_from(WORDS), ODD)
# Words both versions read alike, so that the fast path is taken and its structure checked.
ALIKE = st.one_of(
    st.sampled_from(["true", "False", "null", "~", "12", "-3", "0.5", "2026-11-22", "100m"]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=8),
)


def quoted(word: str) -> str:
    return "'" + word.replace("'", "''") + "'"


def leaf(draw: st.DrawFn, scalars: st.SearchStrategy[str]) -> str:
    word = draw(scalars)
    return quoted(word) if draw(st.booleans()) and draw(st.booleans()) else word


@st.composite
def flow(draw: st.DrawFn, scalars: st.SearchStrategy[str], depth: int = 0) -> str:
    if depth >= 2 or draw(st.booleans()):
        return leaf(draw, scalars)
    items = [draw(flow(scalars, depth + 1)) for _ in range(draw(st.integers(0, 3)))]
    if draw(st.booleans()):
        return "[" + ", ".join(items) + "]"
    return "{" + ", ".join(f"{leaf(draw, scalars)}: {item}" for item in items) + "}"


@st.composite
def block(
    draw: st.DrawFn, scalars: st.SearchStrategy[str], indent: str = "", depth: int = 0
) -> str:
    lines: list[str] = []
    as_list = draw(st.booleans())
    for _ in range(draw(st.integers(1, 3))):
        head = f"{indent}- " if as_list else f"{indent}{leaf(draw, scalars)}:"
        if depth < 2 and draw(st.booleans()):
            lines.append(head.rstrip() + "\n" + draw(block(scalars, indent + "  ", depth + 1)))
        else:
            lines.append(f"{head.rstrip()} {draw(flow(scalars))}\n")
    return "".join(lines)


@st.composite
def streams(draw: st.DrawFn) -> str:
    scalars = draw(st.sampled_from([TRICKY, ALIKE]))
    docs = [draw(block(scalars)) for _ in range(draw(st.integers(1, 3)))]
    return "---\n".join(docs)


def outcome(read: Any, text: str) -> str:
    try:
        return repr(list(read(text, "f.yaml")))
    except DocumentError as err:
        return f"error: {err}"


@settings(max_examples=200, deadline=None)
@given(streams())
def test_the_fast_path_reads_as_libyaml_does(text: str) -> None:
    assert outcome(yaml_documents, text) == outcome(_libyaml_documents, text), text
