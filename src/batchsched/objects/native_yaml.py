"""YAML read by fast_yaml (the `fastyaml-rs` package), whose Rust parser builds the dicts and
lists itself, used only where it gives exactly what the PyYAML path in documents.py gives.

PyYAML hands every libyaml event to Python as an object, and that alone costs more than
orjson's whole read of the same snapshot as JSON; fast_yaml's load is about four times faster
than the PyYAML path. But it reads YAML 1.2, where PyYAML reads YAML 1.1: `yes`, `on` and
`off` are strings there, `0755` is 755 rather than 493, `1e3` is a float rather than a string,
`1:30` is a string rather than 90, and `<<` merges keys in another order. So a text is read
here only when none of that can matter, and otherwise (None) by the PyYAML path:

- no anchor, alias, tag or directive (their limits and errors are the PyYAML path's), no byte
  order mark and none of YAML 1.1's extra line breaks (NEL, U+2028, U+2029);
- no plain scalar starting with `:` or `?` and no `:` just before `,`, `]` or `}`, where the
  two grammars differ (YAML 1.2 reads `[a:, b]` and `- :`; PyYAML refuses them);
- every plain scalar that either YAML version could read as something other than a string
  resolves alike in both: each distinct such word is read by both parsers in one small
  document, and any difference sends the whole text to the PyYAML path (numpy first sorts
  out, at C speed, the places where no such word can start: a regex tried at each of a
  snapshot's millions of places cost a third of fast_yaml's parse);
- no NaN, which as a mapping key is a new key each time for PyYAML but one for fast_yaml;
- nesting is refused at the same depth (fast_yaml's `max_depth` counts levels as the PyYAML
  path does);
- a text fast_yaml refuses (a syntax error, a duplicate key that is `true` and `1`, more than
  100,000 documents, ...) is read by the PyYAML path, which gives the error message with its
  line and column, or the value when only fast_yaml refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import repeat
from typing import Any

import fast_yaml
import numpy as np
import numpy.typing as npt

# A plain scalar starts after a space, a tab, a line break, a flow indicator or a JSON-like
# key's `:`. Of those that start with a character some YAML version types (a digit, sign,
# dot, `<`, `=`, `~`, or y/n/o of yes/no/on/off), the word up to where a scalar may end; and
# any node that starts with an anchor, alias, tag, directive, `:` or `?` (left to libyaml).
# Words of both versions (true, false, null and their spellings) resolve alike in both
# (tests/unit/objects/test_native_yaml.py checks every spelling), so they are not looked for.
# The search runs over the whole text, quoted strings and comments included, so it finds a
# superset of the plain scalars: an extra word costs a check, never a wrong value.
_WORD = (
    r"[-+.0-9<=~][^\s,\[\]{}#]*(?=[ \t]*(?:[\n\r,\]}#:]|\Z))"
    r"|[yYnNoO][a-zA-Z]{1,2}(?=[ \t]*(?:[\n\r,\]}#:]|\Z))"
    r"|[&*!%]"  # an anchor, alias, tag or directive
    r"|[:?]"  # an empty key, an explicit key, or a plain scalar YAML 1.2 lets start with them
)
_SEPARATORS = " \t\n\r[{,:"  # what a word (other than the text's first) follows
_WORD_AT = re.compile(_WORD)
_FIRST_WORD = re.compile(r"[ \t]*(" + _WORD + ")")
# What either version may type: numbers in any of their notations, the words, `<<`, `=`, `~`
# (a date or a uid does not match: YAML 1.1's timestamps stay text in documents.py too).
_MAYBE_TYPED = re.compile(
    r"[-+]?(?:[0-9][0-9a-zA-Z_:.]*|\.[0-9a-zA-Z_]*)(?:[eE][-+]?[0-9]+)?|[yYnNoO]..?|<<|=|~"
)
# Decimal integers and dotted decimals without exponent: the same number in both versions.
_SAME_IN_BOTH = re.compile(r"[-+]?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?")
_LEFT_TO_LIBYAML = "&*!%:?"
# `[a:, b]`, `{a:}`: YAML 1.2 reads a `:` before a flow indicator, PyYAML refuses it.
_COLON_IN_FLOW = re.compile(r":[,\]}]")
_YAML_11_ONLY = ("\ufeff", "\x85", "\u2028", "\u2029")
# NaN is not equal to itself: as mapping keys PyYAML keeps every `.nan`, fast_yaml only one.
_NAN = re.compile(r"[-+]?\.(?:nan|NaN|NAN)")

# _word_starts' tables. _FLAGS, for bytes.translate: bit 1 for a separator, bit 2 for a
# character `_WORD` may start with.
_FLAGS = bytes(
    (1 if chr(code) in _SEPARATORS else 0)
    | (2 if chr(code) in "-+.0123456789<=~yYnNoO&*!%:?" else 0)
    for code in range(256)
)
# The first character's kind: left to `_WORD` at once, yes/no/on/off, a sign, a number.
_KEEP, _YES_NO, _LEADING_SIGN, _NUMBER = 1, 2, 3, 4
_FIRST_KIND = np.zeros(256, np.uint8)
for _chars, _kind in ((b"&*!%:?<=~", _KEEP), (b"yYnNoO", _YES_NO), (b"+-", _LEADING_SIGN)):
    _FIRST_KIND[list(_chars)] = _kind
_FIRST_KIND[list(b"0123456789.")] = _NUMBER
# The kind of each following character. _END and _SOFT_END end the run of characters a word
# is taken from (what `\s` matches in ASCII, and `,[]{}#`), _END where a scalar may end;
# _OTHER is in that run but in no number or YAML 1.1 word (a quote, `/`, `@`, a non-ASCII
# character, ...).
_OTHER, _DIGIT, _EXP, _LETTER, _UNDERSCORE, _DOT, _SIGN, _COLON, _END, _SOFT_END = range(10)
_KIND = np.full(256, _OTHER, np.uint8)
for _chars, _kind in (
    (b"0123456789", _DIGIT),
    (b"abcdfghijklmnopqrstuvwxyzABCDFGHIJKLMNOPQRSTUVWXYZ", _LETTER),
    (b"eE", _EXP),
    (b"_", _UNDERSCORE),
    (b".", _DOT),
    (b"+-", _SIGN),
    (b":", _COLON),
    (b"\n\r,]}#", _END),  # where a scalar may end, too
    (b"\t\x0b\x0c\x1c\x1d\x1e\x1f [{", _SOFT_END),
):
    _KIND[list(_chars)] = _kind
# The regex's `\s` is Unicode whitespace: NEL and the no-break space end its run too, and
# `_one_byte_each` writes every wider whitespace character as a no-break space.
_KIND[[0x85, 0xA0]] = _SOFT_END
_WIDE_WHITESPACE = np.asarray(
    [0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000], dtype=np.uint32
)
_LETTERS = np.zeros(256, np.bool_)
_LETTERS[list(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")] = True
_SIGNED = np.zeros(256, np.bool_)  # what makes a leading sign a number's
_SIGNED[list(b"0123456789.")] = True
_PIECE = 1 << 20  # characters converted at a time in _one_byte_each
# How far a word starting with a digit is followed before the regex is left to read it.
_LOOKAHEAD = 16


def plain_words(text: str) -> set[str]:
    """The words of `text` that may be plain scalars typed differently by YAML 1.1 and 1.2."""
    found = map(_WORD_AT.match, repeat(text), _word_starts(text))
    words = {match.group() for match in found if match is not None}
    first = _FIRST_WORD.match(text)
    if first is not None:
        words.add(first.group(1))
    return kept_words(words)


def kept_words(words: set[str]) -> set[str]:
    """Of words `_WORD` found, those left to libyaml if there is any, else those either
    version may type, other than the decimals both read alike."""
    if any(word[0] in _LEFT_TO_LIBYAML for word in words):
        return {word for word in words if word[0] in _LEFT_TO_LIBYAML}
    keys = {word.rstrip(":") for word in words}  # `0755:` is the key 0755
    return {
        word for word in keys if _MAYBE_TYPED.fullmatch(word) and not _SAME_IN_BOTH.fullmatch(word)
    }


def _word_starts(text: str) -> list[int]:
    """Where `_WORD` may find a word after a separator: every such place but those whose word,
    by its first few characters, can be neither a word left to libyaml nor one `plain_words`
    keeps. Regex engines pay for each place they try, and a snapshot has millions of places
    after a separator; numpy sorts them out at C speed, so the regex runs only where a word
    may matter (on a kubectl snapshot, its quantities)."""
    data = _one_byte_each(text)
    codes8 = np.frombuffer(data, np.uint8)
    flags = np.frombuffer(data.translate(_FLAGS), np.uint8)
    after = flags[1:] >> 1  # bit 2 (may start a word) of each character, at its predecessor
    after &= flags[:-1]  # and bit 1 (separator) of the predecessor itself
    starts = np.flatnonzero(after.view(np.bool_)) + 1
    del after, flags
    # Near the end there is no room to look ahead: those places are left to the regex.
    last = len(data) - _LOOKAHEAD
    near_end, starts = starts[starts >= last], starts[starts < last]
    first = codes8[starts]
    kind = _FIRST_KIND[first]
    yes_no, signs, numbers = (starts[kind == k] for k in (_YES_NO, _LEADING_SIGN, _NUMBER))
    # `yes`, `off`: two or three letters; four cannot end as a word
    three = _LETTERS[codes8[yes_no + 2]] & _LETTERS[codes8[yes_no + 3]]
    keep = [
        near_end,
        starts[kind == _KEEP],
        yes_no[_LETTERS[codes8[yes_no + 1]] & ~three],
        signs[_SIGNED[codes8[signs + 1]]],  # a sign is a number's only if a digit or dot follows
        _numbers(codes8, numbers, first[kind == _NUMBER]),
    ]
    places: list[int] = np.concatenate(keep).tolist()
    return places


def _one_byte_each(text: str) -> bytes:
    """`text` one byte a character, so that positions stay the text's: ASCII as itself, every
    other character as some byte of 0x80-0xFF, which every table above takes for _OTHER but
    whitespace (NEL, the no-break space, and wider whitespace written as a no-break space),
    which `_KIND` takes for the end of a run, as the regex's whitespace class does."""
    if text.isascii():
        return text.encode("ascii")
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        pass
    # Beyond Latin-1: through UTF-32 a piece at a time, so that the copy stays small.
    out = np.empty(len(text), np.uint8)
    for start in range(0, len(text), _PIECE):
        piece = text[start : start + _PIECE].encode("utf-32-le", "surrogatepass")
        codes = np.frombuffer(piece, "<u4")
        one = np.minimum(codes, 0xFF)
        one[np.isin(codes, _WIDE_WHITESPACE)] = 0xA0
        out[start : start + len(piece) // 4] = one
    return out.tobytes()


def _numbers(
    codes: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], first: npt.NDArray[np.uint8]
) -> npt.NDArray[np.intp]:
    """Of the words starting with a digit or a dot, those `plain_words` may keep. The others
    are decimals (the same in both versions), or hold a character no number has (`-` in
    `2026-11-22`, `/` in `10.0.0.0/24`, a quote): before any `:`, since every word the regex
    may take there (the run up to where a scalar may end, or a key before a `:`) holds it; or
    anywhere in a run that ends where a scalar may end, since the regex then takes the run."""
    decided = []
    decimal = first != ord(".")  # [1-9][0-9]* or a lone 0 so far
    zero = first == ord("0")
    after_exp = np.zeros(len(starts), np.bool_)
    colon = np.zeros(len(starts), np.bool_)  # the run has a `:` so far
    odd = np.zeros(len(starts), np.bool_)  # and a character no number has after it
    for offset in range(1, _LOOKAHEAD + 1):
        kind = _KIND[codes[starts + offset]]
        hard = kind == _END
        ends = hard | (kind == _SOFT_END)
        foreign = (kind == _OTHER) | ((kind == _SIGN) & ~after_exp)
        drop = (ends & decimal) | (foreign & ~colon) | (hard & odd)
        keep = ends & ~drop
        decided.append(starts[keep])
        going = ~(keep | drop)
        decimal = (decimal & (kind == _DIGIT) & ~zero)[going]
        after_exp = (kind == _EXP)[going]
        odd = (odd | (foreign & colon))[going]
        colon = (colon | (kind == _COLON))[going]
        starts, zero = starts[going], zero[going]
    decided.append(starts)  # longer than the look-ahead: left to the regex
    return np.concatenate(decided)


def native_documents(
    text: str, max_depth: int, reference: Callable[[str], list[Any]]
) -> list[Any] | None:
    """Each YAML document of `text` read by fast_yaml, or None where that could differ from
    `reference`, the PyYAML path (which raises DocumentError for what it refuses)."""
    if not text.isascii() and any(mark in text for mark in _YAML_11_ONLY):
        return None
    if _COLON_IN_FLOW.search(text):
        return None
    words = plain_words(text)
    if any(word[0] in _LEFT_TO_LIBYAML for word in words):
        return None
    if words and not _resolve_alike(sorted(words), reference):
        return None
    if any(_NAN.fullmatch(word) for word in words):
        return None
    try:
        docs = list(fast_yaml.safe_load_all(text, max_depth=max_depth))
    except Exception:  # whatever fast_yaml refuses, the PyYAML path reads or explains
        return None
    if docs == [None]:  # a text of only comments: no document for PyYAML, a null for fast_yaml
        return None
    return docs


def _resolve_alike(words: list[str], reference: Callable[[str], list[Any]]) -> bool:
    """Both parsers give the same values (types included: repr tells True from 1) for
    `words` as plain scalars of one sequence."""
    probe = "".join(f"- {word}\n" for word in words)
    try:
        ours = reference(probe)
        theirs = list(fast_yaml.safe_load_all(probe, max_depth=2))
    except Exception:  # either refuses a word: the whole text goes to the PyYAML path
        return False
    return repr(ours) == repr(theirs)
