from pathlib import Path
from typing import Any

import pytest

from batchsched.config import default_config, load_config, parse_config
from batchsched.plugins.args import ConfigError


def profile(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "batchsched", **fields}],
    }


def names(config: Any, point: str) -> list[str]:
    return [n for n, _ in config.profiles[0].plugins[point]]


def test_default_profile_is_batchsched_with_every_filter() -> None:
    config = default_config()
    assert config.scheduler_names == ["batchsched"]
    assert names(config, "filter")[:10] == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "PodTopology",  # a pod's own topology annotations
        "DynamicResources",  # the last static filter
        "DaemonSetPreemption",  # reserved nodes fail before (and instead of) resources
        "Backfill",  # so do nodes reserved for a waiting pod or gang (docs/backfill.md)
        "NodePorts",
        "NodeResourcesFit",
    ]


def test_disable_one_and_all() -> None:
    one = parse_config(profile(plugins={"filter": {"disabled": [{"name": "TaintToleration"}]}}))
    assert "TaintToleration" not in names(one, "filter")
    none = parse_config(
        profile(
            plugins={
                "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit"}]}
            }
        )
    )
    assert names(none, "filter") == ["NodeResourcesFit"]


def test_score_weight_is_kept() -> None:
    config = parse_config(
        profile(plugins={"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}})
    )
    assert dict(config.profiles[0].plugins["score"])["NodeResourcesFit"] == 5


def test_multi_point_enables_where_the_plugin_fits() -> None:
    config = parse_config(
        profile(
            plugins={
                "multiPoint": {
                    "disabled": [{"name": "*"}],
                    "enabled": [{"name": "NodeResourcesFit"}, {"name": "PrioritySort"}],
                }
            }
        )
    )
    assert names(config, "filter") == ["NodeResourcesFit"]
    assert names(config, "score") == ["NodeResourcesFit"]
    assert names(config, "queueSort") == ["PrioritySort"]


def test_several_profiles() -> None:
    raw = profile()
    raw["profiles"].append({"schedulerName": "batchsched-pack"})
    assert parse_config(raw).scheduler_names == ["batchsched", "batchsched-pack"]


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (
            profile(plugins={"filter": {"enabled": [{"name": "NodeFoo"}]}}),
            "unknown plugin 'NodeFoo' \\(known: ",
        ),
        (profile(plugins={"filtr": {}}), "unknown extension point \\(known: multiPoint"),
        (profile(pluginConfig=[{"name": "Nope", "args": {}}]), "unknown plugin 'Nope'"),
        (profile(pluginConfig=[{"name": "Backfill", "args": []}]), "args: must be a mapping"),
        (profile(pluginConfig=[{"name": "Backfill", "args": 0}]), "args: must be a mapping"),
        (
            profile(pluginConfig=[{"name": "TaintToleration", "args": {"x": 1}}]),
            "takes no arguments",
        ),
        (
            profile(pluginConfig=[{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": -1}}]),
            "profiles\\[0\\].pluginConfig\\[0\\].args.bindTimeoutSeconds: must be at least 0",
        ),
        (
            profile(pluginConfig=[{"name": "VolumeBinding", "args": {"shape": []}}]),
            "pluginConfig\\[0\\].args.shape: must list at least one point, got \\[\\]",
        ),
        (profile(plugins={"queueSort": {"disabled": [{"name": "*"}]}}), "exactly one plugin"),
        (
            profile(plugins={"score": {"enabled": [{"name": "NodeName"}]}}),
            "does not implement the score",
        ),
        ({"kind": "KubeSchedulerConfiguration", "profilez": []}, "unknown keys \\['profilez'\\]"),
        ({"apiVersion": "kubescheduler.config.k8s.io/v1beta1"}, "apiVersion: must be"),
        ({"podInitialBackoffSeconds": 0}, "podInitialBackoffSeconds: must be a positive number"),
        ({"podInitialBackoffSeconds": 20}, "at least podInitialBackoffSeconds"),
    ],
)
def test_bad_config_says_what_is_allowed(raw: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_config(raw)


def test_load_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text("profiles: [{schedulerName: ''}]\n")
    with pytest.raises(ConfigError, match=f"{path}: profiles\\[0\\].schedulerName"):
        load_config(path)
