"""Hostile input (issue 19): bounded work per input, finite typed numbers, valid names and text,
and a one-shot plan that can be applied as printed. Every case exits 2 with a short message
naming the file (and object and field), or is read as Kubernetes reads it."""

from __future__ import annotations

import contextlib
import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.commands.schedule import OneShotResult, _Plan
from batchsched.controllers import Dispatcher
from batchsched.decisions import Bind, Decision, Evict
from batchsched.objects import quantity
from batchsched.objects.documents import MAX_DEPTH, DocumentError, yaml_documents
from batchsched.objects.errors import MAX_MESSAGE_CHARS, InputError
from batchsched.objects.load import load_text
from batchsched.sim.scenario import load_scenario
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod, priority_class
from tests.sim.test_scenario import base as scenario_base

NOW = "2026-11-23T00:00:00Z"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert len(err) < MAX_MESSAGE_CHARS + 200
    return code, out, err


def schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str]:
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    code, out, err = run(["schedule", str(path), "--now", NOW, "-o", "json"], capsys)
    return code, out if code == 0 else err


def manifests(*objs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(list(objs), sort_keys=False)


# 1. Bounded work per input


def test_alias_expansion_is_refused_before_it_happens() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):  # 10^9 nodes once expanded, from a few hundred bytes
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]")
    with pytest.raises(DocumentError, match=r"bomb.yaml: line \d+.*aliases expand") as err:
        list(yaml_documents("\n".join(lines), "bomb.yaml"))
    assert "from 42 written" in str(err.value)  # stopped after reading a few dozen nodes


def test_modest_aliasing_is_read() -> None:
    docs = list(yaml_documents("base: &b {x: 1}\nuse: *b\nmerged: {<<: *b, y: 2}\n", "f"))
    assert docs == [{"base": {"x": 1}, "use": {"x": 1}, "merged": {"x": 1, "y": 2}}]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000,  # flow style: PyYAML's C composer would overflow the C stack
        "".join(f"{' ' * i}k:\n" for i in range(MAX_DEPTH + 5)),  # block style
        "- " * 1000 + "x",
    ],
)
def test_deep_nesting_names_the_limit(text: str) -> None:
    with pytest.raises(DocumentError, match=f"deep.yaml: line 1.*deeper than {MAX_DEPTH} levels"):
        list(yaml_documents(text, "deep.yaml"))


def test_deep_nesting_in_every_kind_of_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = "[" * 5000
    bad = tmp_path / "deep.yaml"
    bad.write_text(deep)
    good = tmp_path / "m.yaml"
    good.write_text(manifests(node("a")))
    for argv in (
        ["schedule", str(bad)],
        ["schedule", str(good), "--config", str(bad)],
        ["simulate", str(bad)],
    ):
        code, _, err = run(argv, capsys)
        assert code == 2 and f"{bad}: line 1" in err and "deeper than" in err


def test_deeply_nested_json_lists_name_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = schedule(tmp_path, capsys, "[" * 1000 + "]" * 1000)
    assert code == 2 and "m.yaml: lists nest deeper than 100 levels" in err


def test_huge_exponents_cost_no_big_number_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    powers: list[int] = []

    class Watched(Fraction):
        def __pow__(self, exponent: Any, modulo: Any = None) -> Any:
            powers.append(int(exponent))
            return Fraction(self) ** exponent

    monkeypatch.setattr(quantity, "Fraction", Watched)
    huge = ("1e99999999", "1e-99999999", "1e" + "9" * 5000, "0." + "0" * 10_000 + "1", "1.5e3")
    for text in huge:
        with contextlib.suppress(quantity.QuantityError):
            quantity.resource_amount("memory", text)
    assert powers and all(abs(p) <= 100 for p in powers)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1e99999999", "too large"),
        ("100000Ei", "too large"),
        ("1e20", "too large"),
        (10**30, "too large"),
        ("x" * 100_000, "is not a quantity"),
    ],
)
def test_quantities_beyond_int64_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object, message: str
) -> None:
    bad = pod("p", cpu="1")
    bad["spec"]["containers"][0]["resources"]["requests"]["memory"] = value
    code, err = schedule(tmp_path, capsys, manifests(node("a"), bad))
    assert code == 2
    assert "Pod default/p: spec.containers[0].resources.requests.memory:" in err
    assert message in err


def test_a_tiny_quantity_rounds_up_to_one_unit() -> None:
    assert quantity.resource_amount("cpu", "1e-99999999") == 1


def test_error_messages_are_capped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = node("a")
    bad["metadata"]["labels"] = {"zone": ["x" * 10_000] * 1000}
    code, err = schedule(tmp_path, capsys, manifests(bad))
    assert code == 2 and "metadata.labels.zone: must be a string" in err
    assert len(err) < 400


# 2. Finite, typed numbers everywhere


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "0", "1e400", "'3'", "[1]"])
def test_config_seconds_are_finite_positive_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"podInitialBackoffSeconds: {value}\n")
    good = tmp_path / "m.yaml"
    good.write_text(manifests(node("a")))
    code, _, err = run(["schedule", str(good), "--config", str(config)], capsys)
    assert code == 2 and f"{config}: podInitialBackoffSeconds: must be" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("profiles: [{pluginConfig: 5}]", "profiles[0].pluginConfig: must be a list"),
        (
            "profiles: [{plugins: {score: {enabled: [{name: NodeResourcesFit, weight: 1e99}]}}}]",
            "weight: must be an integer",
        ),
        (
            "profiles: [{pluginConfig: [{name: Coscheduling, "
            "args: {podGroupBackoffSeconds: 99999999999999}}]}]",
            "podGroupBackoffSeconds: must be at most 2147483647",
        ),
    ],
)
def test_config_types_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    good = tmp_path / "m.yaml"
    good.write_text(manifests(node("a")))
    code, _, err = run(["schedule", str(good), "--config", str(config)], capsys)
    assert code == 2 and message in err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p["spec"].update(priority=2**40), "spec.priority: must be at most 2147483647"),
        (lambda p: p["spec"].update(priority=float("nan")), "spec.priority: must be an integer"),
        (
            lambda p: p["spec"].update(terminationGracePeriodSeconds=10**30),
            "terminationGracePeriodSeconds: must be at most 9223372036854775807",
        ),
        (lambda p: p.update(spec={"containers": "x"}), "spec.containers: must be a list"),
        (lambda p: p["metadata"].update(labels="x"), "metadata.labels: must be a mapping"),
        (
            lambda p: p["metadata"].update(creationTimestamp="9999-12-31T23:59:59Z"),
            "metadata.creationTimestamp: '9999-12-31T23:59:59Z' is outside the years 1 to 9000",
        ),
    ],
)
def test_pod_numbers_and_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, message: str
) -> None:
    bad = pod("p", cpu="1")
    change(bad)
    code, err = schedule(tmp_path, capsys, manifests(node("a"), bad))
    assert code == 2 and message in err


def test_podgroup_spec_null_is_an_error_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": None,
    }
    code, err = schedule(tmp_path, capsys, manifests(node("a"), group))
    assert code == 2 and "PodGroup default/g: spec.minMember: is required" in err


def write_scenario(tmp_path: Path, change: Any) -> Path:
    raw = scenario_base()
    change(raw)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: s["cluster"]["pools"][0].update(allocatable=[1, 2]),
            "cluster.pools[0].allocatable: is required: a mapping",
        ),
        (
            lambda s: s["cluster"]["pools"][0].update(labels=float("nan")),
            "cluster.pools[0].labels: must be a mapping of label keys to values",
        ),
        (
            lambda s: s["cluster"]["pools"][0].update(count=float("inf")),
            "cluster.pools[0].count: must be a finite number",
        ),
        (
            lambda s: s["cluster"]["pools"][0].update(count=10**30),
            "cluster.pools[0].count: must be between 1 and 100000",
        ),
        (
            lambda s: s["work"]["jobs"][0]["requests"].update({"nvidia.com/gpu": 10**30}),
            "work.jobs[0].requests.nvidia.com/gpu: 1000000000000...00000000000000 is too large",
        ),
        (lambda s: s.update(until=".nan"), "until: '.nan' is not a duration"),
        (lambda s: s.update(until=float("nan")), "until: nan is not a duration"),
        (lambda s: s.update(until="1e999"), "until: '1e999' is longer than 100 years"),
        (
            lambda s: s["work"].update(trace={"format": "philly", "path": "x" * 5000}),
            "work.trace.path: cannot read",
        ),
        (
            lambda s: s["work"]["generators"][0].update(arrivalsPerHour=1e300),
            "work.generators[0].arrivalsPerHour: would submit about 1e+301 jobs",
        ),
    ],
)
def test_scenario_numbers_and_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, message: str
) -> None:
    path = write_scenario(tmp_path, change)
    code, _, err = run(["simulate", str(path), "--until", "1h"], capsys)
    assert code == 2 and f"{path}: {message}" in err


# 3. Names and text


@pytest.mark.parametrize(
    ("name", "field"),
    [("Bad_Name", "metadata.name"), ("a" * 254, "metadata.name"), ("-x", "metadata.name")],
)
def test_names_are_validated_as_kubernetes_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, field: str
) -> None:
    code, err = schedule(tmp_path, capsys, manifests(node("a"), pod(name, cpu="1")))
    assert code == 2 and f"{field}: must be a DNS-1123 subdomain" in err


def test_namespace_must_be_a_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = pod("p", cpu="1")
    bad["metadata"]["namespace"] = "a.b"
    code, err = schedule(tmp_path, capsys, manifests(node("a"), bad))
    assert code == 2 and "metadata.namespace: must be a DNS-1123 label" in err


@pytest.mark.parametrize("escaped", ['"p\\ud800"', '"p\\udfff"'])
def test_lone_surrogates_never_reach_the_writers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], escaped: str
) -> None:
    text = manifests(node("a")) + f"---\nkind: Pod\nmetadata: {{name: {escaped}}}\n"
    code, err = schedule(tmp_path, capsys, text)
    assert code == 2 and "not valid YAML" in err
    as_json = orjson.dumps(node("a")).decode()
    code, err = schedule(tmp_path, capsys, f'[{as_json}, {{"kind": "Pod", "x": {escaped}}}]')
    assert code == 2


def test_files_must_be_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(manifests(node("caf")).encode() + b"# caf\xe9\n")
    code, _, err = run(["schedule", str(path)], capsys)
    assert code == 2 and f"{path}: not UTF-8 text (invalid byte 0xe9 at offset" in err


def test_unquoted_timestamps_read_like_quoted_ones() -> None:
    quoted = pod("p", cpu="1")
    quoted["metadata"]["creationTimestamp"] = "2026-11-22T09:00:00Z"
    text = yaml.safe_dump(quoted).replace("'2026-11-22T09:00:00Z'", "2026-11-22T09:00:00Z")
    assert "'2026" not in text
    assert (
        load_text(text, "f").pods[0].creation_timestamp
        == load_text(yaml.safe_dump(quoted), "f").pods[0].creation_timestamp
    )


# Issue 10 item 4: a toleration too long for any date is as good as forever.

LONG = {
    "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "10000",
    "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "315360000000",
}


def long_toleration_cluster() -> list[dict[str, Any]]:
    victim = pod("victim", cpu="4", node_name="a", priority_class="protected")
    victim["status"] = {
        "phase": "Running",
        "startTime": "2026-11-22T08:00:00Z",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-22T08:00:00Z"}
        ],
    }
    protected = priority_class("protected", 100)
    protected["metadata"]["annotations"] = LONG
    return [
        protected,
        priority_class("urgent", 1000),
        node("a", cpu="4"),
        victim,
        pod("preemptor", cpu="2", priority_class="urgent"),
    ]


def test_ten_thousand_years_of_toleration_protects_without_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = schedule(tmp_path, capsys, manifests(*long_toleration_cluster()))
    assert code == 0
    result = orjson.loads(out)
    assert result["evictions"] == [] and result["bindings"] == []
    assert "victims tolerate preemption (protected)." in result["unschedulable"][0]["message"]
    path = tmp_path / "m.yaml"
    code, out, _ = run(["policy", str(path), "--now", NOW, "-o", "json"], capsys)
    assert code == 0
    assert orjson.loads(out)["protectedPods"][0]["until"] is None  # forever


def test_toleration_seconds_beyond_int64_is_an_invalid_annotation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objs = long_toleration_cluster()
    objs[0]["metadata"]["annotations"] = {**LONG, LONG_KEY: "9" * 5000}
    code, out, err = run(["policy", *_written(tmp_path, objs), "--now", NOW], capsys)
    assert code == 0 and "outside the 64-bit integer range" in " ".join((out + err).split())


LONG_KEY = "preemption-toleration.scheduling.x-k8s.io/toleration-seconds"


def _written(tmp_path: Path, objs: list[dict[str, Any]]) -> list[str]:
    path = tmp_path / "m.yaml"
    path.write_text(manifests(*objs))
    return [str(path)]


# 4. The one-shot output is a plan


def _apply(decisions: list[Decision], state: ClusterState, result: OneShotResult) -> None:
    """One pass's decisions carried out as the one-shot run does."""
    dispatcher = Dispatcher()
    _Plan(state, result, dispatcher)
    dispatcher.dispatch(decisions)


def test_a_pod_bound_then_preempted_is_withdrawn_from_the_plan() -> None:
    state = ClusterState()
    result = OneShotResult()
    result.passes = 1
    _apply([Bind("default/early", "a"), Bind("default/other", "b")], state, result)
    result.passes = 3
    _apply(
        [
            Evict("default/early", "a", "default/urgent", "preempted"),
            Evict("default/running", "a", "default/urgent", "preempted"),
        ],
        state,
        result,
    )
    result.net()
    assert [b.pod for b in result.bindings] == ["default/other"]
    assert [e.pod for e in result.evictions] == ["default/running"]
    assert result.unschedulable["default/early"].startswith(
        "bound to a in pass 1, then preempted by default/urgent in pass 3"
    )
    assert result.to_json()["applyOrder"] == ["evictions", "bindings"]


def test_a_gang_is_withdrawn_whole() -> None:
    state = ClusterState()
    state.groups.members["default/g"] = {"default/w0", "default/w1"}
    result = OneShotResult()
    result.passes = 1
    _apply([Bind("default/w0", "a"), Bind("default/w1", "b")], state, result)
    result.passes = 2
    _apply([Evict("default/w0", "a", "default/urgent", "preempted")], state, result)
    result.net()
    assert result.bindings == [] and result.evictions == []
    assert "PodGroup default/g" in result.unschedulable["default/w1"]


def test_cli_text_states_the_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = pod("victim", cpu="4", node_name="a", priority_class="low")
    objs = [
        priority_class("low", 10),
        priority_class("high", 1000),
        node("a", cpu="4"),
        victim,
        pod("p", cpu="4", priority_class="high"),
    ]
    code, out, _ = run(["schedule", *_written(tmp_path, objs), "--now", NOW, "-o", "text"], capsys)
    assert code == 0
    assert out.startswith("Apply the evictions first, then the bindings")
    assert copy.deepcopy(objs) == objs


@pytest.mark.parametrize(
    ("duration", "message"),
    [("nan", "duration: must be a finite number"), ("1e300", "duration: must be between 0")],
)
def test_trace_numbers_are_finite(tmp_path: Path, duration: str, message: str) -> None:
    (tmp_path / "philly.csv").write_text(
        f"timestamp,duration,num_gpus\n2017-10-03 12:00:00,{duration},8\n"
    )
    path = write_scenario(
        tmp_path,
        lambda s: s.update(work={"trace": {"format": "philly", "path": "philly.csv"}}),
    )
    with pytest.raises(InputError, match=f"philly.csv: line 2: {message}"):
        load_scenario(path).jobs(0)
