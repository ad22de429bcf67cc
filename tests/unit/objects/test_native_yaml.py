"""YAML read natively by fast_yaml gives what the libyaml path gives, or is left to it.

`yaml_documents` is the reader; `_libyaml_documents` is the path it had alone before, kept as
the reference and the fallback. Each case checks both the value (or error message) and which
path read it, so a case that silently stopped taking the fast path would show.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from batchsched.objects import native_yaml
from batchsched.objects.documents import (
    MAX_DEPTH,
    DocumentError,
    _libyaml_documents,
    _probe,
    yaml_documents,
)
from batchsched.objects.native_yaml import native_documents, plain_words


def native(text: str) -> list[Any] | None:
    return native_documents(text, MAX_DEPTH, _probe)


def outcome(read: Any, text: str) -> str:
    """The repr of what a reader gives (repr tells True from 1 and 1 from 1.0), or its error."""
    try:
        return repr(list(read(text, "f.yaml")))
    except DocumentError as err:
        return f"error: {err}"


def assert_same(text: str) -> str:
    ours = outcome(yaml_documents, text)
    assert ours == outcome(_libyaml_documents, text)
    return ours


KUBECTL = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2026-11-22T09:00:00Z"
    labels:
      app: trainer
    name: job-1
    namespace: ml
    ownerReferences:
    - apiVersion: batch/v1
      controller: true
      kind: Job
      name: job-1
    resourceVersion: "1001"
    uid: 10000000-0000-0000-0000-000000000001
  spec:
    containers:
    - args: ["--epochs=10", --batch-size=64]
      image: registry.example.com/ml/trainer:v1.2.3
      name: trainer
      resources:
        requests: {cpu: 100m, memory: 128Mi}
    nodeName: node-1
    terminationGracePeriodSeconds: 30
    tolerations:
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
  status:
    startTime: 2026-11-22T09:00:00Z
    ratio: 0.5
    nothing: null
    empty:
kind: List
metadata:
  resourceVersion: ""
"""


def test_a_kubectl_snapshot_is_read_natively_as_libyaml_reads_it() -> None:
    docs = native(KUBECTL)
    assert docs is not None
    assert repr(docs) == outcome(_libyaml_documents, KUBECTL)
    pod = docs[0]["items"][0]
    assert pod["status"]["startTime"] == "2026-11-22T09:00:00Z"  # a timestamp stays text
    assert pod["spec"]["terminationGracePeriodSeconds"] == 30


def test_on_a_kubectl_snapshot_the_regex_runs_only_where_a_word_may_matter() -> None:
    text = KUBECTL + "# " + "x" * 40 + "\n"
    places = native_yaml._word_starts(text)
    words = {
        m.group() for m in map(native_yaml._WORD_AT.match, itertools.repeat(text), places) if m
    }
    # the quantities and the decimal; the rest (`00Z`) from the `:`s of the unquoted timestamp
    assert words == {"100m", "128Mi", "0.5", "00:00Z", "00Z"}


TAIL = "\n# " + "x" * 40  # puts the word where native_yaml looks ahead of its first character


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("v: 0755", {"0755"}),
        ("v: 0755:30' x", {"0755"}),  # the run does not end as a scalar: the key before `:`
        ("v: 12:30", {"12:30"}),
        ("v: 1e-5", {"1e-5"}),
        ("v: 1.5e+3", {"1.5e+3"}),
        ("v: 07 # c", {"07"}),
        ("v: -0755", {"-0755"}),
        ("v: [-.inf, +.5]", {"-.inf", "+.5"}),
        ("v: [yes, Off, nope, on]", {"yes", "Off", "on"}),
        ("no: 1", {"no"}),
        ("é: 0755", {"0755"}),  # positions past a non-ASCII character
        ("日本: 0755", {"0755"}),  # past one beyond Latin-1
        ("\udc80 0755", {"0755"}),
        ("v: 0755\xa0", set()),  # no word: what follows is no place a scalar may end
        ("v: 2026-11-22", set()),
        ("v: '2026-11-22T09:00:00Z'", set()),
        ("v: 10.0.0.0/24", set()),
        ("v: 00000000-0000-0000-0000-000000000001", set()),
        ("v: [12, 3.25, -7]", set()),
        ("- --epochs=10", set()),
        ("v: 12\x0c", set()),
        # The regex's `\s` ends a run at any Unicode whitespace, the look-ahead too.
        ("v: 0:00:\x85", {"0:00", "00"}),
        ("v: 0:00:\xa0", {"0:00", "00"}),
        ("v: 0:00:\u3000", {"0:00", "00"}),
        ("日: 1:30:\u2009", {"1:30"}),
    ],
)
def test_plain_words_looked_ahead(text: str, words: set[str]) -> None:
    assert plain_words(text + TAIL) == words
    assert plain_words(text) == words  # among the last places: the regex alone


def test_text_beyond_latin_1_is_converted_a_piece_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "日: [0755, 1e3]\nv: 12\n" * 5 + TAIL
    monkeypatch.setattr(native_yaml, "_PIECE", 7)
    data = native_yaml._one_byte_each(text)
    assert len(data) == len(text)
    assert all(
        byte == ord(char) if char.isascii() else byte >= 0x80
        for byte, char in zip(data, text, strict=True)
    )
    assert plain_words(text) == {"0755", "1e3"}


def test_the_tables_classify_characters_as_the_regex_does() -> None:
    run = re.compile(r"[^\s,\[\]{}#]")  # the characters a word is taken from
    for code in range(128):
        char = chr(code)
        starts = bool(
            native_yaml._WORD_AT.match(char + "\n") or native_yaml._WORD_AT.match(char + "es\n")
        )
        assert bool(native_yaml._FLAGS[code] & 2) == starts, char
        assert bool(native_yaml._FLAGS[code] & 1) == (char in native_yaml._SEPARATORS), char
        kind = native_yaml._KIND[code]
        ends = kind in (native_yaml._END, native_yaml._SOFT_END)
        assert ends == (run.match(char) is None), char
        if ends:  # a word is ended right there only by _END
            ended = native_yaml._WORD_AT.match("1" + char + "x")
            assert (kind == native_yaml._END) == (ended is not None), char


def test_characters_beyond_ascii_end_a_run_where_the_regex_does() -> None:
    run = re.compile(r"[^\s,\[\]{}#]")
    for code in range(0x80, 0x100):
        ends = native_yaml._KIND[code] == native_yaml._SOFT_END
        assert ends == (run.match(chr(code)) is None), hex(code)
    wide = [c for c in range(0x100, 0x110000) if chr(c).isspace()]
    assert all(run.match(chr(c)) is None for c in wide)
    assert native_yaml._WIDE_WHITESPACE.tolist() == wide
    text = "".join(map(chr, wide)) + "日"
    assert set(native_yaml._one_byte_each(text)[:-1]) == {0xA0}


# Plain scalars YAML 1.1 (PyYAML, our reference) and YAML 1.2 (fast_yaml) type differently.
YAML_11 = {
    "yes": True,
    "No": False,
    "ON": True,
    "off": False,
    "0755": 493,
    "+0755": 493,
    "0b101": 5,
    "0x_1F": 31,
    "1_000": 1000,
    "1:30": 90,
    "1:30.5": 90.5,
    "1e3": "1e3",
    "1.5e3": "1.5e3",
    "12e+3": "12e+3",
    "09": "09",
    "0o17": "0o17",
}
PLACES = [
    "v: {}\n",
    "{}: v\n",
    "- {}\n",
    "- a\n- {}\n",
    "{}\n",
    "v: [a, {}]\n",
    "v: {{a: {}}}\n",
    '{{"a":{}}}\n',
    "v:\t{}\n",
    "v: {}  # why\n",
    "v: x\r\nw: {}\r\n",
    "v: x\rw: {}\r",
    "v:\n  - [\n    {}\n  ]\n",
    "a: 1\n---\nv: {}\n",
    "--- {}\n",
]


@pytest.mark.parametrize("tail", ["", TAIL + "\n"])
@pytest.mark.parametrize(("word", "place"), list(itertools.product(YAML_11, PLACES)))
def test_yaml_11_scalars_resolve_as_pyyaml_does(word: str, place: str, tail: str) -> None:
    text = place.format(word) + tail
    assert_same(text)
    assert native(text) is None  # the probe found the word and left the text to libyaml


@pytest.mark.parametrize(("word", "value"), YAML_11.items())
def test_yaml_11_values(word: str, value: Any) -> None:
    assert list(yaml_documents(f"v: {word}\n", "f")) == [{"v": value}]


def spellings(word: str) -> list[str]:
    return ["".join(c) for c in itertools.product(*[(ch.lower(), ch.upper()) for ch in word])]


# Words and numbers both versions read alike; the fast path reads them without a probe.
ALIKE = [
    *spellings("true"),
    *spellings("false"),
    *spellings("null"),
    "~",
    "",
    "0",
    "-0",
    "+12",
    "12",
    "1.0",
    "-0.0",
    "0.",
    "3.25",
    "99999999999999999999999",
    "2026-11-22",
    "2026-11-22T09:00:00Z",
    "2026-11-22 09:00:00.5 +01:00",
    "y",
    "N",
    "100m",
    "v1.2.3",
    "10.0.0.0/24",
    "a:b",
]


@pytest.mark.parametrize("word", ALIKE)
def test_words_alike_in_both_versions_are_read_natively(word: str) -> None:
    text = f"v: {word}\nw: [{word or '~'}]\n"
    docs = native(text)
    assert docs is not None
    assert repr(docs) == outcome(_libyaml_documents, text)


@pytest.mark.parametrize("number", ["1.5e+3", "1.2E-3", ".5", "-.inf", ".Inf", "1.0e+999", "0x1F"])
def test_numbers_in_notations_both_read_alike_pass_the_probe(number: str) -> None:
    text = f"v: {number}\n"
    assert number in plain_words(text)
    assert native(text) is not None
    assert_same(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x [1]\nb: *x\n",
        "a: !!str 12\n",
        "a: !custom x\n",
        "%YAML 1.1\n---\na: 1\n",
        "base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n",
        "\ufeffa: 1\n",
        "a: b\x85c\n",
        "a: b\u2028c\n",
        "# only a comment\n",
    ],
)
def test_anchors_tags_directives_and_yaml_11_breaks_are_left_to_libyaml(text: str) -> None:
    assert native(text) is None
    assert_same(text)


@pytest.mark.parametrize("text", ["y: {.NaN: {}, .NaN: {}}\n", "a: .nan\n", "- -.NAN\n"])
def test_nan_is_left_to_libyaml(text: str) -> None:
    # NaN is not equal to itself: PyYAML keeps each `.NaN` key, fast_yaml keeps one.
    assert native(text) is None
    assert_same(text)


def test_nan_keys_stay_apart() -> None:
    [doc] = yaml_documents("y: {.NaN: {}, .NaN: {}}\n", "f")
    assert len(doc["y"]) == 2


def test_merge_keys_keep_their_order() -> None:
    text = "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n"
    [doc] = yaml_documents(text, "f")
    assert list(doc["d"].items()) == [("y", 3), ("x", 1)]


def test_an_alias_bomb_is_refused_by_the_alias_limit() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]")
    text = "\n".join(lines) + "\n"
    assert native(text) is None
    assert "aliases expand the document" in assert_same(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\n---\nb: [1, 2]\n---\n",
        "---\na: 1\n...\n---\n# nothing\n---\nb: 2\n",
        "# head\n---\n- a\n---\n- b\n",
        "",
        "a: 1\nb: 2\na: 3\n",  # a duplicate key: the last value, in the first key's place
    ],
)
def test_streams_are_read_natively_as_libyaml_reads_them(text: str) -> None:
    assert native(text) is not None
    assert_same(text)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a:\n  b: 1\n c: 2\n", "line 3"),
        ("a: [1, 2\n", "line 2"),
        ("a: 1\n---\nb: {\n", "line 4"),
        ("a:\n\tb: 1\n", "line 2"),
        ("? [a]\n: b\n", "line 1, column 5: a mapping key must be a scalar"),
        ("a: 1\nb: \x01\n", "position 8"),
        ("v: " + "9" * 5000 + "\n", "line 1, column 4"),
    ],
)
def test_errors_are_libyamls_with_file_and_line(text: str, where: str) -> None:
    message = assert_same(text)
    assert message.startswith("error: f.yaml: ") and where in message


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 1000])
def test_nesting_is_refused_at_the_same_depth(depth: int) -> None:
    flow = "[" * depth + "]" * depth + "\n"
    block = "".join("  " * i + "k:\n" for i in range(depth)) + "  " * depth + "x: 1\n"
    for text, levels in ((flow, depth), (block, depth + 1)):
        assert ("deeper than" in assert_same(text)) == (levels > MAX_DEPTH)
