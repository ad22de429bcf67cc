"""Validation as the API server and kube-scheduler would: requests, fields, references."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.commands.cli import main
from batchsched.config import parse_config
from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import parse_time, read_pod
from batchsched.objects.schema import unknown_fields
from batchsched.plugins.args import ConfigError
from batchsched.sim.fields import ScenarioError
from batchsched.sim.scenario import load_scenario
from tests.builders import node, pod, priority_class
from tests.conftest import schedule
from tests.sim.test_scenario import base, write


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _containers(*cpus: str, sidecar: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, cpu in enumerate(cpus):
        c: dict[str, Any] = {"name": f"c{i}", "resources": {"requests": {"cpu": cpu}}}
        if sidecar:
            c["restartPolicy"] = "Always"
        out.append(c)
    return out


# ---- requests (upstream PodRequests) ------------------------------------------------------


def test_sidecars_add_to_the_containers_sum() -> None:
    manifest = pod("p", cpu="2", memory=None)
    manifest["spec"]["initContainers"] = _containers("1", "500m", sidecar=True)
    assert read_pod(manifest).requests["cpu"] == 3500


def test_init_containers_run_beside_the_sidecars_started_before_them() -> None:
    manifest = pod("p", cpu="100m", memory=None)
    init = _containers("3")
    manifest["spec"]["initContainers"] = [
        *_containers("1", sidecar=True),
        *init,
        *_containers("2", sidecar=True),
    ]
    # The init container runs beside the first sidecar only: 1 + 3 = 4 > 0.1 + 1 + 2.
    assert read_pod(manifest).requests["cpu"] == 4000


def test_pod_level_resources_replace_cpu_and_memory_then_overhead_is_added() -> None:
    manifest = pod("p", cpu="4", memory="8Gi", extra_requests={"nvidia.com/gpu": "1"})
    manifest["spec"]["resources"] = {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}}
    manifest["spec"]["overhead"] = {"cpu": "250m"}
    assert read_pod(manifest).requests == {
        "cpu": 1250,
        "memory": 2 * 2**30,
        "nvidia.com/gpu": 1,
        "pods": 1,
    }


def test_pod_level_resources_are_cpu_memory_and_hugepages_only() -> None:
    manifest = pod("p")
    manifest["spec"]["resources"] = {"requests": {"nvidia.com/gpu": "1"}}
    with pytest.raises(ManifestError, match=r"spec\.resources\.nvidia\.com/gpu: is not a pod"):
        read_pod(manifest)


def test_an_init_container_restart_policy_other_than_always_is_refused() -> None:
    manifest = pod("p")
    manifest["spec"]["initContainers"] = [{"name": "i", "restartPolicy": "OnFailure"}]
    with pytest.raises(ManifestError, match=r"initContainers\[0\]\.restartPolicy"):
        read_pod(manifest)


# ---- unknown fields ---------------------------------------------------------------------


def test_unknown_fields_are_named_by_path() -> None:
    manifest = pod("p")
    manifest["spec"]["nodeSelecter"] = {"zone": "a"}
    manifest["spec"]["containers"][0]["resources"]["request"] = {"cpu": "1"}
    manifest["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "efect": "NoSchedule"}]
    manifest["metadata"]["label"] = {}
    assert sorted(unknown_fields("Pod", manifest)) == [
        "metadata.label",
        "spec.containers[0].resources.request",
        "spec.nodeSelecter",
        "spec.tolerations[0].efect",
    ]
    assert unknown_fields("Pod", pod("q")) == []
    assert unknown_fields("Scenario", {"anything": 1}) == []


@pytest.mark.parametrize(
    ("manifest", "path"),
    [
        ({**node("n"), "spec": {"unschedulabel": True}}, "spec.unschedulabel"),
        ({**priority_class("c", 1), "globalDefualt": True}, "globalDefualt"),
        (
            {
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "b"},
                "spec": {"selector": {"matchLabel": {}}},
            },
            "spec.selector.matchLabel",
        ),
        (
            {"kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"minMembers": 2}},
            "spec.minMembers",
        ),
    ],
)
def test_unknown_fields_of_the_other_kinds(manifest: dict[str, Any], path: str) -> None:
    assert unknown_fields(manifest["kind"], manifest) == [path]


def _typo_file(tmp_path: Path) -> Path:
    typo = pod("p")
    typo["spec"]["nodeSelecter"] = {"zone": "a"}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([node("a"), typo]))
    return path


def test_unknown_fields_warn_once_and_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _typo_file(tmp_path)
    code, out, err = cli(["schedule", str(path), "-o", "json"], capsys)
    assert code == 0 and '"node": "a"' in out
    warning = f"warning: {path}: Pod default/p: unknown field 'spec.nodeSelecter'"
    assert err.count(warning) == 1


@pytest.mark.parametrize("command", ["schedule", "policy"])
def test_strict_turns_unknown_fields_into_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = _typo_file(tmp_path)
    code, out, err = cli([command, "--strict", str(path)], capsys)
    assert code == 2 and out == ""
    assert "--strict: 1 unknown field(s)" in err and "spec.nodeSelecter" in err


def test_simulate_strict_checks_the_scenario_manifests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = base()
    raw["priorityClasses"][0]["descripton"] = "typo"
    path = write(tmp_path, raw)
    assert load_scenario(path).warnings == [
        f"{path}: priorityClasses[0]: unknown field 'descripton'"
    ]
    code, _, err = cli(["simulate", "--strict", str(path)], capsys)
    assert code == 2 and "descripton" in err


# ---- references and times -----------------------------------------------------------------


def test_an_unknown_priority_class_name_is_an_error_in_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        yaml.safe_dump_all([node("a"), priority_class("low", 1), pod("p", priority_class="hgih")])
    )
    code, out, err = cli(["schedule", str(path)], capsys)
    assert code == 2 and out == ""
    assert "Pod default/p: spec.priorityClassName: no PriorityClass 'hgih' (known: low)" in err


def test_a_variant_naming_an_unknown_class_is_an_error(tmp_path: Path) -> None:
    raw = base()
    raw["variants"] = [{"name": "v", "classes": {"low": "urgent"}}]
    with pytest.raises(ScenarioError, match=r"variants\[0\]\.classes: PriorityClass 'urgent'"):
        load_scenario(write(tmp_path, raw))


@pytest.mark.parametrize(
    "text", ["2026-11-22", "2026-11-22T10:00:00", "2026-11-22 10:00:00Z", "20261122T100000Z"]
)
def test_times_must_be_rfc3339(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError):
        parse_time(text)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(node("a")))
    code, _, err = cli(["schedule", str(path), "--now", text], capsys)
    assert code == 2 and "is not an RFC 3339 time" in err


def test_rfc3339_times_with_offsets_and_nanoseconds() -> None:
    assert parse_time("2026-11-22T11:00:00.123456789+01:00") == parse_time(
        "2026-11-22T10:00:00.123456Z"
    )


# ---- configuration ------------------------------------------------------------------------


def test_profiles_must_share_one_queue_sort_plugin() -> None:
    sort_by_priority = {
        "queueSort": {"enabled": [{"name": "PrioritySort"}], "disabled": [{"name": "*"}]}
    }
    raw = {
        "profiles": [{"schedulerName": "a"}, {"schedulerName": "b", "plugins": sort_by_priority}]
    }
    with pytest.raises(
        ConfigError, match=r"profiles\[1\]\.plugins\.queueSort: PrioritySort differs"
    ):
        parse_config(raw)
    both = {"profiles": [{"schedulerName": n, "plugins": sort_by_priority} for n in "ab"]}
    assert len(parse_config(both).profiles) == 2


def test_ignored_resources_skip_only_extended_resources() -> None:
    config = parse_config(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {
                                "ignoredResources": ["cpu", "example.com/fpga"],
                                "ignoredResourceGroups": ["gpu.example.com", "kubernetes.io"],
                            },
                        }
                    ]
                }
            ]
        }
    )
    result = schedule(
        node("n", cpu="1"),
        pod("cpu-hungry", cpu="2"),
        pod("fpga", cpu="100m", extra_requests={"example.com/fpga": "1"}),
        pod("gpu", cpu="100m", extra_requests={"gpu.example.com/a100": "1"}),
        pod("native", cpu="100m", extra_requests={"kubernetes.io/batteries": "1"}),
        config=config,
    )
    assert [(b.pod, b.node) for b in result.bindings] == [
        ("default/fpga", "n"),
        ("default/gpu", "n"),
    ]
    assert "Insufficient kubernetes.io/batteries" in result.unschedulable["default/native"]
    assert "Insufficient cpu" in result.unschedulable["default/cpu-hungry"]


def test_simulate_prints_a_scenario_warning_once_for_all_its_variants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = base()
    raw["priorityClasses"][0]["descripton"] = "typo"
    raw["work"] = {"jobs": raw["work"]["jobs"]}
    raw["variants"] = [{"name": "a"}, {"name": "b", "classes": {"low": "high"}}]
    code, _, err = cli(["simulate", str(write(tmp_path, raw))], capsys)
    assert code == 0
    assert err.count("unknown field 'descripton'") == 1


@pytest.mark.parametrize(
    ("profile", "where"),
    [
        (
            {"pluginConfig": [{"name": "NodeResourcesFit", "arsg": {}}]},
            r"profiles\[0\]\.pluginConfig\[0\]: unknown keys \['arsg'\]",
        ),
        (
            {"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "wieght": 2}]}}},
            r"plugins\.score\.enabled\[0\]: unknown keys \['wieght'\]",
        ),
    ],
)
def test_typos_in_a_config_are_errors(profile: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        parse_config({"profiles": [profile]})
