"""Whatever the text, reading YAML with the native fast path gives what the libyaml path alone
gives: the same values (types included) or the same error message.

Documents are written by hand here, not by yaml.safe_dump, because the dumper quotes exactly
the scalars where YAML 1.1 and 1.2 disagree; the plain (unquoted) spellings are the point.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects import native_yaml
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
    # A comment at the end puts every scalar well before it, where native_yaml looks ahead of
    # a word's first character rather than leaving the last few places to its regex.
    tail = draw(st.sampled_from(["", "# " + "x" * 40 + "\n"]))
    return "---\n".join(docs) + tail


def outcome(read: Any, text: str) -> str:
    try:
        return repr(list(read(text, "f.yaml")))
    except DocumentError as err:
        return f"error: {err}"


@settings(max_examples=200, deadline=None)
@given(streams())
def test_the_fast_path_reads_as_libyaml_does(text: str) -> None:
    assert outcome(yaml_documents, text) == outcome(_libyaml_documents, text), text


# The regex native_yaml tried at every place after a separator before numpy sorted the places
# out: plain_words must find at least the words it finds.
EVERY_PLACE = re.compile("[" + re.escape(native_yaml._SEPARATORS) + "](" + native_yaml._WORD + ")")
PIECES = st.one_of(
    st.sampled_from(WORDS),
    ODD,
    st.text(
        alphabet="0123456789.+-_:eExXoObByYnNaZ~<=&*!%?'\"/ \t\n\r[]{},#\x0b\x0c\x1c\x7f\x85\xa0é"
        "\u3000\u2009\u4e00"
    ),
    st.sampled_from([" ", "\n", ": ", "- ", ", ", "[", "]", "{", "}", "\t", "\r\n", " # c\n"]),
)


def every_place_words(text: str) -> set[str]:
    words = set(EVERY_PLACE.findall(text))
    first = native_yaml._FIRST_WORD.match(text)
    if first is not None:
        words.add(first.group(1))
    return native_yaml.kept_words(words)


def left_to_libyaml(words: set[str]) -> bool:
    return any(word[0] in native_yaml._LEFT_TO_LIBYAML for word in words)


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=40).map("".join), st.sampled_from(["", "\n# " + "x" * 40]))
def test_plain_words_finds_what_the_regex_finds_at_every_place(text: str, tail: str) -> None:
    text += tail  # with a tail, no word is among the last few places, which skip the look-ahead
    ours, theirs = native_yaml.plain_words(text), every_place_words(text)
    assert left_to_libyaml(ours) or (not left_to_libyaml(theirs) and theirs <= ours), text
