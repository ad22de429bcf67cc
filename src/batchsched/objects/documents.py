"""Read input files (manifests, KubeSchedulerConfiguration, scenarios) with bounded work.

Text is decoded as UTF-8 (an error names the byte offset otherwise). YAML is read by fast_yaml
where that gives the same values as the path below (see native_yaml.py: it is four times
faster on a big snapshot); everything else, and every error message, comes from libyaml
through PyYAML's C loader, with the values built here from its event stream rather than by
PyYAML's composer and constructor, because those recurse once per nesting level (a deeply
nested file overflows the C stack) and expand aliases without limit. Building from events
bounds both before the work happens:

- nesting deeper than MAX_DEPTH levels is refused as soon as it is met;
- aliases may expand a document to at most about a hundred times its written nodes, the rule
  kubectl's YAML reader (go-yaml) applies: the allowed share of nodes reached through aliases
  falls from 99% to 10% as a document grows from 400,000 to 4,000,000 nodes;
- timestamps stay the text they were written as (as sigs.k8s.io/yaml turns them into JSON
  strings), so `creationTimestamp: 2026-11-22T09:00:00Z` reads like its quoted form.

JSON is read by orjson, which refuses nesting deeper than 1,024 levels; callers that walk
values recursively bound their own depth.
"""

from __future__ import annotations

import base64
import gc
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml

from batchsched.objects.errors import InputError
from batchsched.objects.native_yaml import native_documents

T = TypeVar("T")

MAX_DEPTH = 100
_ALIAS_FLOOR = 1000  # nodes below which aliasing is not checked at all (go-yaml's rule)
_TAG = "tag:yaml.org,2002:"
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")


class DocumentError(InputError):
    """A file that cannot be read as text, YAML or JSON, or that exceeds an input limit."""


def read_text(path: Path) -> str:
    """The file's text, decoded as UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DocumentError(f"{path}: cannot read: {err.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DocumentError(
            f"{path}: not UTF-8 text (invalid byte {data[err.start]:#04x} at offset {err.start})"
        ) from None


def load_yaml_file(path: Path) -> Any:
    """The single YAML document of a file (None when the file is empty)."""
    docs = list(yaml_documents(read_text(path), str(path)))
    if len(docs) > 1:
        raise DocumentError(f"{path}: expected one YAML document, found {len(docs)}")
    return docs[0] if docs else None


def allowed_alias_ratio(nodes: int) -> float:
    """The share of a document's nodes that may come through aliases (go-yaml's rule)."""
    if nodes <= 400_000:
        return 0.99
    if nodes >= 4_000_000:
        return 0.10
    return 0.99 - 0.89 * (nodes - 400_000) / 3_600_000


def yaml_documents(text: str, source: str) -> Iterator[Any]:
    """Each YAML document of `text`, as plain dicts, lists and scalars: read natively by
    fast_yaml where that gives the same values (native_yaml.py), otherwise by libyaml."""
    native = without_gc(lambda: native_documents(text, MAX_DEPTH, _probe))
    if native is not None:
        yield from native
        return
    yield from _libyaml_documents(text, source)


def _probe(text: str) -> list[Any]:
    return list(_libyaml_documents(text, "<probe>"))


def _libyaml_documents(text: str, source: str) -> Iterator[Any]:
    loader = yaml.CSafeLoader(text)
    try:
        yield from _Builder(loader, source).documents()
    except yaml.YAMLError as err:
        raise DocumentError(f"{source}: not valid YAML: {_short(str(err))}") from None
    finally:
        loader.dispose()


def without_gc(build: Callable[[], T]) -> T:
    """Build a document (or records from one) with the cyclic garbage collector paused: a
    snapshot is millions of new dicts and lists, each allocation counting towards a collection
    that walks them all again, and the values built here hold no cycles (an alias to an open
    collection is refused), so there is nothing for it to find."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return build()
    finally:
        if was_enabled:
            gc.enable()


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_NO_KEY = object()
_COLLECTIONS = (dict, list)
_MERGE = object()
# A parent of the open collection: (container, is_list, pending key, expanded, anchor, merges)
_Frame = tuple[Any, bool, Any, int, str | None, list[tuple[Any, Any]]]


def _merge(
    mapping: dict[Any, Any],
    merges: list[tuple[Any, Any]],
    fail: Callable[[Any, str], DocumentError],
) -> None:
    """`<<: *base` (or a list of them): the keys the mapping does not set itself."""
    for value, event in merges:
        for source in value if isinstance(value, list) else [value]:
            if not isinstance(source, dict):
                raise fail(event, "a merge key (<<) needs a mapping or a list of mappings")
            for key, item in source.items():
                mapping.setdefault(key, item)


class _Builder:
    def __init__(self, loader: yaml.CSafeLoader, source: str) -> None:
        self.loader = loader
        self.source = source
        # anchor -> (value, expanded size); a size of -1 marks a collection still open.
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.nodes = 0
        self.aliased = 0

    def fail(self, event: Any, what: str) -> DocumentError:
        mark = event.start_mark
        return DocumentError(
            f"{self.source}: line {mark.line + 1}, column {mark.column + 1}: {what}"
        )

    def documents(self) -> Iterator[Any]:
        get = self.loader.get_event
        get()  # StreamStartEvent
        while not isinstance(self.loader.peek_event(), yaml.StreamEndEvent):
            get()  # DocumentStartEvent
            self.anchors.clear()
            self.nodes = self.aliased = 0
            value = without_gc(self.document)
            get()  # DocumentEndEvent
            yield value

    def document(self) -> Any:
        """One document's value. The loop is the hot path of reading a big snapshot (millions
        of events): the open collection lives in local names, its parents on a stack."""
        get = self.loader.get_event
        scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
        mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
        maybe_typed, words, anchors = _MAYBE_TYPED, _WORDS, self.anchors
        stack: list[_Frame] = []
        container: Any = None  # the open mapping or list; None at the document's top
        is_list = False
        key: Any = _NO_KEY  # a mapping's key waiting for its value
        expanded = 0  # the open collection's nodes, aliases expanded
        anchor: str | None = None
        merges: list[tuple[Any, Any]] = []
        written = 0  # nodes as written, for the aliasing rule
        while True:
            event: Any = get()
            written += 1
            kind = type(event)
            if kind is scalar_event:
                value = event.value
                if event.tag is not None or (
                    event.implicit[0] and (value[:1] in maybe_typed or value in words)
                ):
                    value = self.scalar(event)
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1)
                size = 1
            elif kind is mapping_start or kind is sequence_start:
                if len(stack) >= MAX_DEPTH:
                    raise self.fail(event, f"nests deeper than {MAX_DEPTH} levels")
                if event.tag is not None:
                    self.check_tag(event, "map" if kind is mapping_start else "seq")
                stack.append((container, is_list, key, expanded, anchor, merges))
                is_list = kind is sequence_start
                container = [] if is_list else {}
                key, expanded, anchor, merges = _NO_KEY, 1, event.anchor, []
                if anchor is not None:
                    anchors[anchor] = (container, -1)
                continue
            elif kind is alias_event:
                self.nodes = written
                value, size = self.alias(event)
            else:  # the end of the open mapping or sequence
                written -= 1
                if merges:
                    _merge(container, merges, self.fail)
                value, size = container, expanded
                if anchor is not None:
                    anchors[anchor] = (value, size)
                container, is_list, key, expanded, anchor, merges = stack.pop()
            if container is None:
                return value
            expanded += size
            if is_list:
                container.append(value)
            elif key is _NO_KEY:
                if type(value) is not str and isinstance(value, _COLLECTIONS):
                    raise self.fail(event, "a mapping key must be a scalar")
                key = value
            else:
                if key is _MERGE:
                    merges.append((value, event))
                else:
                    container[key] = value
                key = _NO_KEY

    def alias(self, event: Any) -> tuple[Any, int]:
        found = self.anchors.get(event.anchor)
        if found is None:
            raise self.fail(event, f"alias *{_short(event.anchor, 60)} is not defined")
        value, size = found
        if size < 0:
            raise self.fail(event, f"alias *{_short(event.anchor, 60)} refers to itself")
        self.aliased += size
        total = self.nodes + self.aliased
        if self.aliased > 100 and total > _ALIAS_FLOOR:
            allowed = allowed_alias_ratio(total)
            if self.aliased / total > allowed:
                raise self.fail(
                    event,
                    f"aliases expand the document to more than {total} nodes from "
                    f"{self.nodes} written (at most {allowed:.0%} of a document's nodes may "
                    "come through aliases)",
                )
        return value, size

    def check_tag(self, event: Any, kind: str) -> None:
        tag = event.tag
        if tag is not None and tag != "!" and tag != _TAG + kind:
            raise self.fail(event, f"tag {_short(tag, 60)} is not supported")

    def scalar(self, event: Any) -> Any:
        text: str = event.value
        tag = event.tag
        if tag is None or tag == "!":
            if not event.implicit[0]:
                return text  # quoted: always a string
            tag = _resolve(text)
        if not tag.startswith(_TAG):
            raise self.fail(event, f"tag {_short(tag, 60)} is not supported")
        name = tag[len(_TAG) :]
        try:
            if name in ("str", "timestamp", "value"):
                return text
            if name == "null":
                return None
            if name == "bool":
                return _BOOLS[text.lower()]
            if name == "int":
                return _integer(text)
            if name == "float":
                return _float(text)
            if name == "merge":
                return _MERGE
            if name == "binary":
                return base64.decodebytes(text.encode("ascii"))
        except (ValueError, KeyError, UnicodeError):
            raise self.fail(event, f"{_short(text, 60)!r} is not a valid {name}") from None
        raise self.fail(event, f"tag {_short(tag, 60)} is not supported")


# Plain scalars that may be something other than a string: those starting with a digit, sign,
# dot or `<` (merge), and the words YAML 1.1 reads as booleans or null.
_MAYBE_TYPED = frozenset("0123456789+-.<=~")
_WORDS = frozenset(
    word
    for base in ("yes", "no", "true", "false", "on", "off", "null")
    for word in (base, base.capitalize(), base.upper())
) | {""}

# First character -> [(tag, pattern)], YAML 1.1's implicit types as PyYAML's SafeLoader has them.
_IMPLICIT: dict[str, list[tuple[str, re.Pattern[str]]]] = {
    first: [(tag, pattern) for tag, pattern in entries if tag != _TAG + "yaml"]
    for first, entries in yaml.resolver.Resolver.yaml_implicit_resolvers.items()
}


def _resolve(text: str) -> str:
    """The tag of a plain scalar."""
    for tag, pattern in _IMPLICIT.get(text[:1], ()):
        if pattern.match(text):
            return tag
    return _TAG + "str"


def _integer(text: str) -> int:
    """A YAML 1.1 integer (`12`, `0x1F`, `0o17`, `017`, `0b101`, `1_000`, `1:30`)."""
    value = text.replace("_", "")
    sign = -1 if value.startswith("-") else 1
    value = value.lstrip("+-")
    if value == "0":
        return 0
    if value.startswith("0b"):
        return sign * int(value[2:], 2)
    if value.startswith("0x"):
        return sign * int(value[2:], 16)
    if value.startswith("0o"):
        return sign * int(value[2:], 8)
    if value.startswith("0"):
        return sign * int(value, 8)
    if ":" in value:
        return sign * _base60(value)
    return sign * int(value)  # Python refuses more than 4,300 digits: bounded work


def _base60(value: str) -> int:
    total = 0
    for part in value.split(":"):
        total = total * 60 + int(part)
    return total


def _float(text: str) -> float:
    value = text.replace("_", "").lower()
    sign = -1.0 if value.startswith("-") else 1.0
    value = value.lstrip("+-")
    if value == ".inf":
        return sign * float("inf")
    if value == ".nan":
        return float("nan")
    if _SEXAGESIMAL.match(value):
        whole, _, fraction = value.partition(".")
        return sign * (_base60(whole) + float(f"0.{fraction or 0}"))
    return sign * float(value)
