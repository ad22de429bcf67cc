"""Queue objects: batchsched's own, Volcano's and KAI's read into one record; what an API
server would refuse (per object and across the tree) is an error naming queue and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.objects.errors import ManifestError
from batchsched.objects.queues import (
    GPU,
    KAI_QUEUE_API,
    QUEUE_API,
    VOLCANO_QUEUE_API,
    QueueQuota,
    check_queue_tree,
    queue_tree_errors,
    read_queue,
)
from batchsched.state.cluster import ClusterState
from tests.builders import node, pod
from tests.unit.commands.test_cli_errors import run


def queue(name: str, parent: str = "", **resources: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {k.replace("_", "/"): v for k, v in resources.items()}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def gpus(**levels: Any) -> dict[str, Any]:
    return {"nvidia.com_gpu": levels}


def test_batchsched_queue_defaults_nominal_to_guaranteed_and_limits_only_what_it_names() -> None:
    obj = queue("team-a", "research", **gpus(guaranteed=4, limit=16), cpu={"nominal": "256"})
    obj["spec"].update(weight=2, priority=5, reclaimMinRuntime="10m")
    q = read_queue(obj)
    assert q.name == "team-a" and q.parent == "research" and q.api_version == QUEUE_API
    assert q.resources == {
        GPU: QueueQuota(guaranteed=4, nominal=4, limit=16),
        "cpu": QueueQuota(guaranteed=0, nominal=256_000, limit=None),
    }
    assert (q.weight, q.priority, q.reclaim_min_runtime, q.reclaimable) == (2.0, 5, 600.0, True)
    assert read_queue(queue("plain")).weight == 1.0


@pytest.mark.parametrize(
    ("spec", "field", "what"),
    [
        (gpus(guaranteed="lots"), "spec.resources.nvidia.com/gpu.guaranteed", "quantity"),
        (gpus(guaranteed=8, nominal=4), "spec.resources.nvidia.com/gpu.guaranteed", "nominal 4"),
        (gpus(nominal=20, limit=16), "spec.resources.nvidia.com/gpu.nominal", "limit 16"),
        (gpus(guaranteed=20, limit=16), "spec.resources.nvidia.com/gpu.nominal", "limit 16"),
        (gpus(gauranteed=1), "spec.resources.nvidia.com/gpu.gauranteed", "unknown field"),
        (gpus(limit=-1), "spec.resources.nvidia.com/gpu.limit", "negative"),
    ],
)
def test_a_bad_resource_entry_names_the_queue_and_the_field(
    spec: dict[str, Any], field: str, what: str
) -> None:
    with pytest.raises(ManifestError) as err:
        read_queue(queue("team-a", **spec))
    assert err.value.obj == "Queue team-a" and err.value.field == field
    assert what in err.value.what


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"weight": -1}, "spec.weight"),
        ({"weight": float("inf")}, "spec.weight"),  # YAML .inf: no share to compute
        ({"weight": float("nan")}, "spec.weight"),
        ({"reclaimMinRuntime": "ten minutes"}, "spec.reclaimMinRuntime"),
    ],
)
def test_bad_weight_or_runtime_is_refused(extra: dict[str, Any], field: str) -> None:
    obj = queue("q")
    obj["spec"].update(extra)
    with pytest.raises(ManifestError) as err:
        read_queue(obj)
    assert err.value.field == field


def _tree_error(*objs: dict[str, Any]) -> ManifestError:
    with pytest.raises(ManifestError) as err:
        check_queue_tree([read_queue(o) for o in objs])
    return err.value


def test_the_tree_refuses_an_unknown_parent_a_cycle_and_children_guaranteed_over_the_parent() -> (
    None
):
    unknown = _tree_error(queue("a", "nowhere"))
    assert (unknown.obj, unknown.field) == ("Queue a", "spec.parent")
    assert "no Queue 'nowhere'" in unknown.what
    cycle = _tree_error(queue("a", "b"), queue("b", "c"), queue("c", "a"))
    assert cycle.field == "spec.parent" and "a -> b -> c -> a" in cycle.what
    over = _tree_error(
        queue("org", **gpus(guaranteed=8)),
        queue("x", "org", **gpus(guaranteed=5)),
        queue("y", "org", **gpus(guaranteed=4)),
    )
    assert (over.obj, over.field) == ("Queue org", "spec.resources.nvidia.com/gpu.guaranteed")
    assert "8 is less than its children guarantee together (9: x 5, y 4)" in over.what
    # A parent limits only what it names, and children within its guarantee are fine.
    check_queue_tree(
        [
            read_queue(queue("org", **gpus(guaranteed=8))),
            read_queue(queue("x", "org", **gpus(guaranteed=4), cpu={"guaranteed": 64})),
            read_queue(queue("y", "org", **gpus(guaranteed=4))),
        ]
    )


def test_every_queue_that_breaks_the_tree_gets_its_own_error_parents_and_cycles_first() -> None:
    queues = [
        read_queue(o)
        for o in (
            queue("a", "b"),
            queue("b", "a"),
            queue("below", "a"),  # its parents lead into the cycle
            queue("lost", "nowhere"),
            queue("org", **gpus(guaranteed=1)),
            queue("x", "org", **gpus(guaranteed=2)),
            queue("fine"),
        )
    ]
    errors = queue_tree_errors(queues)
    assert [(e.obj, e.field) for e in errors] == [
        ("Queue a", "spec.parent"),
        ("Queue b", "spec.parent"),
        ("Queue below", "spec.parent"),
        ("Queue lost", "spec.parent"),
        ("Queue org", "spec.resources.nvidia.com/gpu.guaranteed"),
    ]
    assert "a -> b -> a" in errors[0].what and "below -> a -> b -> a" not in errors[2].what
    assert "a -> b -> a" in errors[2].what
    with pytest.raises(ManifestError) as first:
        check_queue_tree(queues)
    assert str(first.value) == str(errors[0])


def test_volcano_queue_maps_guarantee_deserved_capability() -> None:
    q = read_queue(
        {
            "apiVersion": VOLCANO_QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": "vq"},
            "spec": {
                "weight": 3,
                "parent": "root",  # Volcano's own root: ours is no parent
                "reclaimable": False,
                "guarantee": {"resource": {"nvidia.com/gpu": 2}},
                "deserved": {"nvidia.com/gpu": 4, "cpu": "8"},
                "capability": {"nvidia.com/gpu": 8, "memory": "64Gi"},
            },
        }
    )
    assert q.parent == "" and q.weight == 3.0 and q.reclaimable is False
    assert q.resources == {
        GPU: QueueQuota(2, 4, 8),
        "cpu": QueueQuota(0, 8000, None),
        "memory": QueueQuota(0, 0, 64 * 2**30),
    }
    with pytest.raises(ManifestError) as err:
        read_queue(
            {
                "apiVersion": VOLCANO_QUEUE_API,
                "kind": "Queue",
                "metadata": {"name": "vq"},
                "spec": {"deserved": {"cpu": "16"}, "capability": {"cpu": "8"}},
            }
        )
    assert err.value.field == "spec.deserved.cpu" and "capability 8" in err.value.what


def test_kai_queue_maps_quota_limit_and_units() -> None:
    q = read_queue(
        {
            "apiVersion": KAI_QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": "kq"},
            "spec": {
                "parentQueue": "org",
                "priority": 10,
                "reclaimMinRuntime": "5m",
                "resources": {
                    "gpu": {"quota": 4, "limit": -1, "overQuotaWeight": 2},
                    "cpu": {"quota": 8000, "limit": 16000},
                    "memory": {"quota": -1, "limit": -1},
                },
            },
        }
    )
    assert (q.parent, q.priority, q.weight, q.reclaim_min_runtime) == ("org", 10, 2.0, 300.0)
    # memory with neither quota nor limit is not limited at all
    assert q.resources == {GPU: QueueQuota(4, 4, None), "cpu": QueueQuota(8000, 8000, 16000)}
    assert read_queue(
        {
            "apiVersion": KAI_QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": "m"},
            "spec": {"resources": {"memory": {"quota": 1000}}},
        }
    ).resources == {"memory": QueueQuota(10**9, 10**9, None)}
    with pytest.raises(ManifestError) as err:
        read_queue(
            {
                "apiVersion": KAI_QUEUE_API,
                "kind": "Queue",
                "metadata": {"name": "kq"},
                "spec": {"resources": {"gpu": {"quota": 8, "limit": 4}}},
            }
        )
    assert err.value.field == "spec.resources.gpu.quota" and "limit 4" in err.value.what
    with pytest.raises(ManifestError) as err:
        read_queue(
            {
                "apiVersion": KAI_QUEUE_API,
                "kind": "Queue",
                "metadata": {"name": "kq"},
                "spec": {"resources": {"gpu": {"quota": 1, "overQuotaWeight": float("inf")}}},
            }
        )
    assert err.value.field == "spec.resources.gpu.overQuotaWeight"
    assert "finite" in err.value.what


def test_cluster_state_applies_and_removes_queues_through_the_registry() -> None:
    state = ClusterState()
    state.apply("Queue", read_queue(queue("org")))
    state.apply("Queue", read_queue(queue("a", "org")))
    assert state.queues.children("org") == ["a"] and state.queues.is_leaf("a")
    assert [q.name for q in state.queues.path("a")] == ["a", "org"]
    state.remove("Queue", "a")
    assert state.queues.is_leaf("org") and len(state.queues) == 1


def test_schedule_exits_2_naming_the_queue_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.yaml"
    docs = [node("n1"), pod("p"), queue("team-a", **gpus(nominal=20, limit=16))]
    path.write_text(yaml.safe_dump_all(docs))
    code, out, err = run(["schedule", str(path)], capsys)
    assert code == 2 and out == ""
    assert "Queue team-a: spec.resources.nvidia.com/gpu.nominal: 20 is more than limit 16" in err
    docs[-1] = queue("team-a", "research")
    path.write_text(yaml.safe_dump_all(docs))
    code, out, err = run(["schedule", str(path)], capsys)
    assert code == 2 and "Queue team-a: spec.parent: no Queue 'research'" in err
    docs.append(queue("research"))
    path.write_text(yaml.safe_dump_all(docs))
    code, out, _ = run(["schedule", str(path)], capsys)
    assert code == 0 and "BINDINGS (1)" in out


def test_the_three_teams_example_reads(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "queues" / "three-teams.yaml"
    code, out, _ = run(["schedule", str(example)], capsys)
    assert code == 0 and "BINDINGS" in out
