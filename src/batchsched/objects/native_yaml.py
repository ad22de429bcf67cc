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
  document, and any difference sends the whole text to the PyYAML path;
- nesting is refused at the same depth (fast_yaml's `max_depth` counts levels as the PyYAML
  path does);
- a text fast_yaml refuses (a syntax error, a duplicate key that is `true` and `1`, more than
  100,000 documents, ...) is read by the PyYAML path, which gives the error message with its
  line and column, or the value when only fast_yaml refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import fast_yaml

# A plain scalar starts after a space, a tab, a line break, a flow indicator or a JSON-like
# key's `:`. Of those that start with a character some YAML version types (a digit, sign,
# dot, `<`, `=`, `~`, or y/n/o of yes/no/on/off), the word up to where a scalar may end; and
# any node that starts with an anchor, alias, tag, directive, `:` or `?` (left to libyaml).
# Words of both versions (true, false, null and their spellings) resolve alike in both
# (tests/unit/test_native_yaml.py checks every spelling), so they are not looked for.
# The search runs over the whole text, quoted strings and comments included, so it finds a
# superset of the plain scalars: an extra word costs a check, never a wrong value.
_WORD = (
    r"[-+.0-9<=~][^\s,\[\]{}#]*(?=[ \t]*(?:[\n\r,\]}#:]|\Z))"
    r"|[yYnNoO][a-zA-Z]{1,2}(?=[ \t]*(?:[\n\r,\]}#:]|\Z))"
    r"|[&*!%]"  # an anchor, alias, tag or directive
    r"|[:?]"  # an empty key, an explicit key, or a plain scalar YAML 1.2 lets start with them
)
_WORDS = re.compile(r"[ \t\n\r\[{,:](" + _WORD + ")")
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


def plain_words(text: str) -> set[str]:
    """The words of `text` that may be plain scalars typed differently by YAML 1.1 and 1.2."""
    words = set(_WORDS.findall(text))
    first = _FIRST_WORD.match(text)
    if first is not None:
        words.add(first.group(1))
    if any(word[0] in _LEFT_TO_LIBYAML for word in words):
        return {word for word in words if word[0] in _LEFT_TO_LIBYAML}
    keys = {word.rstrip(":") for word in words}  # `0755:` is the key 0755
    return {
        word for word in keys if _MAYBE_TYPED.fullmatch(word) and not _SAME_IN_BOTH.fullmatch(word)
    }


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
