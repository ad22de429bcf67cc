"""The Queues plugin's args: usageHalfLife (a positive duration, unset: off) and usageWeightK
(>= 0, default 1); a bad value exits 2 naming the field, and profiles must agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.config import parse_config
from batchsched.scheduling.scheduler import Scheduler
from batchsched.state.cluster import ClusterState
from batchsched.state.queue_decay import Decay
from tests.builders import node
from tests.unit.commands.test_cli_errors import run


def config(*profiles: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": list(profiles),
    }


def profile(name: str = "batchsched", **args: Any) -> dict[str, Any]:
    return {"schedulerName": name, "pluginConfig": [{"name": "Queues", "args": args}]}


def test_the_half_life_turns_decay_on_for_the_state() -> None:
    state = ClusterState()
    Scheduler(state, parse_config(config(profile(usageHalfLife="168h", usageWeightK=0.5))))
    assert state.queues.decayed is not None
    assert state.queues.decayed.decay == Decay(168 * 3600.0, 0.5)
    off = ClusterState()
    Scheduler(off, parse_config(config(profile())))
    assert off.queues.decayed is None  # the default: fair share forgets past usage


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"usageHalfLife": "a week"},
            "profiles[0].pluginConfig[0].args.usageHalfLife: 'a week' is not a positive duration",
        ),
        (
            {"usageHalfLife": "-1h"},
            "profiles[0].pluginConfig[0].args.usageHalfLife: '-1h' is not a positive duration",
        ),
        ({"usageHalfLife": "0s"}, "args.usageHalfLife: '0s' is not a positive duration"),
        ({"usageHalfLife": 3600}, "args.usageHalfLife: must be of type str, got 3600"),
        ({"usageWeightK": -1}, "pluginConfig[0].args.usageWeightK: must be at least 0, got -1"),
        ({"usageWeightK": "1"}, "args.usageWeightK: must be a number of at least 0, got '1'"),
        ({"usageDecay": "1h"}, "args.usageDecay: unknown argument (known: usageHalfLife"),
    ],
)
def test_bad_args_exit_2_naming_the_field(
    args: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config(profile(**args))))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(node("n1")))
    code, out, err = run(["schedule", "--config", str(path), str(cluster)], capsys)
    assert code == 2 and out == ""
    assert message in err


def test_profiles_asking_for_different_decays_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    two = config(profile("a", usageHalfLife="1h"), profile("b", usageHalfLife="2h"))
    path.write_text(yaml.safe_dump(two))
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(node("n1")))
    code, _, err = run(["schedule", "--config", str(path), str(cluster)], capsys)
    assert code == 2
    assert "args.usageHalfLife: profiles ask for different decays" in err
