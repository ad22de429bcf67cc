"""Every plugin's numeric args are told alike (docs/configuration.md): a bool, a string or a
fraction where an integer is wanted names `profiles[i].pluginConfig[j].args.<field>`, what is
allowed (the type and the field's bounds) and what was given, whichever plugin reads it."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.config import parse_config
from batchsched.plugins.args import ConfigError

SHAPE = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
EXISTS = {"key": "zone", "operator": "Exists"}

# (plugin, args with the value at "?", the field's path below args, what is allowed)
NUMERIC: list[tuple[str, dict[str, Any], str, str]] = [
    ("Backfill", {"reserveAfterSeconds": "?"}, "reserveAfterSeconds", "an integer of at least 0"),
    ("Backfill", {"maxReservations": "?"}, "maxReservations", "an integer of at least 0"),
    (
        "Coscheduling",
        {"podGroupBackoffSeconds": "?"},
        "podGroupBackoffSeconds",
        "an integer of at least 0",
    ),
    *(
        (
            plugin,
            {"minCandidateNodesPercentage": "?"},
            "minCandidateNodesPercentage",
            "an integer between 0 and 100",
        )
        for plugin in ("DefaultPreemption", "PreemptionToleration")
    ),
    *(
        (
            plugin,
            {"minCandidateNodesAbsolute": "?"},
            "minCandidateNodesAbsolute",
            "an integer of at least 0",
        )
        for plugin in ("DefaultPreemption", "PreemptionToleration")
    ),
    (
        "DaemonSetPreemption",
        {"preemptionStartDelaySeconds": "?"},
        "preemptionStartDelaySeconds",
        "an integer of at least 0",
    ),
    (
        "DaemonSetPreemption",
        {"singleVictimDeviationPercent": "?"},
        "singleVictimDeviationPercent",
        "an integer between 0 and 100",
    ),
    ("DaemonSetPreemption", {"maxVictims": "?"}, "maxVictims", "an integer of at least 1"),
    (
        "InterPodAffinity",
        {"hardPodAffinityWeight": "?"},
        "hardPodAffinityWeight",
        "an integer between 0 and 100",
    ),
    (
        "VolumeBinding",
        {"bindTimeoutSeconds": "?"},
        "bindTimeoutSeconds",
        "an integer of at least 0",
    ),
    (
        "VolumeBinding",
        {"shape": [{"utilization": "?", "score": 10}]},
        "shape[0].utilization",
        "an integer between 0 and 100",
    ),
    (
        "VolumeBinding",
        {"shape": [{"utilization": 0, "score": "?"}, SHAPE[1]]},
        "shape[0].score",
        "an integer between 0 and 10",
    ),
    (
        "NodeResourcesFit",
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu", "weight": "?"}],
            }
        },
        "scoringStrategy.resources[0].weight",
        "an integer between 1 and 100",
    ),
    (
        "NodeResourcesBalancedAllocation",
        {"resources": [{"name": "cpu", "weight": "?"}]},
        "resources[0].weight",
        "1",
    ),
    ("Queues", {"usageWeightK": "?"}, "usageWeightK", "a number of at least 0"),
    (
        "PodTopologySpread",
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": "?", "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
            ],
        },
        "defaultConstraints[0].maxSkew",
        "an integer of at least 1",
    ),
    (
        "NodeAffinity",
        {
            "addedAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": "?", "preference": {"matchExpressions": [EXISTS]}}
                ]
            }
        },
        "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        "an integer between 1 and 100",
    ),
]


def filled(value: Any, given: Any) -> Any:
    """`value` with "?" replaced by `given`."""
    if value == "?":
        return given
    if isinstance(value, dict):
        return {k: filled(v, given) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v, given) for v in value]
    return value


def error_of(plugin: str, args: dict[str, Any]) -> str:
    # Another plugin's entry first: the error names the entry of the args at fault.
    entries = [{"name": "ImageLocality"}, {"name": plugin, "args": args}]
    with pytest.raises(ConfigError) as info:
        parse_config({"profiles": [{"pluginConfig": entries}]})
    return str(info.value)


@pytest.mark.parametrize(("plugin", "args", "field", "allowed"), NUMERIC)
@pytest.mark.parametrize("given", [True, False, "1", 1.5], ids=repr)
def test_a_number_given_as_another_type_is_told_in_one_wording(
    plugin: str, args: dict[str, Any], field: str, allowed: str, given: Any
) -> None:
    if given == 1.5 and allowed.startswith("a number"):
        pytest.skip("a fraction is a number")
    assert error_of(plugin, filled(args, given)) == (
        f"config: profiles[0].pluginConfig[1].args.{field}: must be {allowed}, got {given!r}"
    )
