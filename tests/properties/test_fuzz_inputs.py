"""Fuzzing the inputs other people write (issue 19): mutated manifests, KubeSchedulerConfigurations
and scenario files, each run as a user would run it.

Whatever the mutation (a hostile value at a random field, a field removed, an unknown field,
then maybe deep nesting, an alias bomb, a byte that is not UTF-8 or a truncated file), the
command exits 0 or 2, never raises, and an error is a short message. Work per input is bounded
by construction (the limits tested one by one in
tests/unit/objects/test_load_hostile_input.py), so the suite has no time threshold; a
regression there would show as a hang, not a flaky failure.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchsched.commands.cli import main
from batchsched.objects.documents import load_yaml_file, yaml_documents
from batchsched.objects.errors import MAX_MESSAGE_CHARS, InputError
from batchsched.sim.scenario import load_scenario
from tests.sim.test_scenario import base as scenario_base

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = next(yaml_documents((ROOT / "examples/basic/cluster.yaml").read_text(), "basic"))
CONFIGS = [
    load_yaml_file(ROOT / "examples/daemonset/config.yaml"),
    load_yaml_file(ROOT / "examples/gang/binpack-config.yaml"),
]
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

HOSTILE: list[Any] = [
    float("nan"),
    float("inf"),
    -float("inf"),
    10**30,
    2**63,
    -1,
    0,
    1e308,
    "1e99999999",
    "1e-99999999",
    "100000Ei",
    "-5Gi",
    "",
    None,
    [],
    {},
    5,
    True,
    "x" * 3000,
    "Bad_Name",
    "a.b",
    "2026-11-22T09:00:00Z",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00+01:00",
    "315360000000",
    "9" * 400,
    [[[[[["deep"]]]]]],
    {"a": {"b": {"c": 1}}},
]


@st.composite
def mutated(draw: st.DrawFn, original: Any) -> Any:
    """The document with one to three fields replaced by a hostile value, removed or added."""
    doc = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        holder: Any = None
        key: Any = None
        here = doc
        while isinstance(here, dict | list) and here and draw(st.integers(0, 4)) > 0:
            keys = list(here) if isinstance(here, dict) else list(range(len(here)))
            holder, key = here, draw(st.sampled_from(keys))
            here = here[key]
        if holder is None:
            continue
        action = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
        hostile = copy.deepcopy(draw(st.sampled_from(HOSTILE)))  # later mutations edit it
        if action == "replace":
            holder[key] = hostile
        elif action == "remove":
            holder.pop(key)
        elif isinstance(holder, dict):
            holder[draw(st.sampled_from(["nodeSelecter", "x" * 200, "spec", "items"]))] = hostile
    return doc


def _bomb() -> str:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join(['*' + chr(96 + i)] * 10)}]")
    return "\n".join(lines) + "\n"


@st.composite
def written(draw: st.DrawFn, doc: Any) -> bytes:
    """The document as a file, maybe damaged in a way no mutation of values can express."""
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    damage = draw(st.sampled_from(["none", "none", "deep", "json", "bomb", "bytes", "truncate"]))
    if damage == "deep":
        text = "[" * draw(st.integers(90, 5000)) + "\n" + text
    elif damage == "json":  # orjson reads it, and allows 1,024 levels of nesting
        depth = draw(st.integers(0, 1020))
        text = "[" * depth + json.dumps(doc) + "]" * depth
    elif damage == "bomb":
        text = _bomb()
    elif damage == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    data = text.encode()
    if damage == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff\xfe" + data[at:]
    return data


def assert_handled(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)  # an exception here is the traceback a user would see
    _, err = capsys.readouterr()
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        # Warnings (of what was not read, or unknown fields) may come first, each on a line.
        warnings, _, error = err.partition("batchsched: error: ")
        assert error, err
        assert all(line.startswith("warning: ") for line in warnings.splitlines()), err
        assert len(error) <= MAX_MESSAGE_CHARS + 20


@SETTINGS
@given(data=st.data())
def test_mutated_manifests(
    data: st.DataObject, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(data.draw(written(data.draw(mutated(MANIFESTS)))))
    command = data.draw(st.sampled_from(["schedule", "policy"]))
    assert_handled([command, str(path), "--now", "2026-11-23T00:00:00Z"], capsys)


@SETTINGS
@given(data=st.data())
def test_mutated_configs(
    data: st.DataObject, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(data.draw(written(data.draw(mutated(data.draw(st.sampled_from(CONFIGS)))))))
    manifests = str(ROOT / "examples/basic/cluster.yaml")
    assert_handled(
        ["schedule", manifests, "--config", str(config), "--now", "2026-11-23T00:00:00Z"], capsys
    )


@SETTINGS
@given(data=st.data())
def test_mutated_scenarios(data: st.DataObject, tmp_path: Path) -> None:
    """Read and generate the work (the simulation itself runs the same core as `schedule`)."""
    path = tmp_path / "scenario.yaml"
    path.write_bytes(data.draw(written(data.draw(mutated(scenario_base())))))
    try:
        scenario = load_scenario(path)
        scenario.jobs(scenario.seed)
    except InputError as err:
        assert len(str(err)) <= MAX_MESSAGE_CHARS
