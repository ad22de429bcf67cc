"""read_pod reads a spec once per distinct spec (its nodeName aside): the pods it makes are the
pods a fresh reading makes, each with its own name-bound parts and its own dicts, and an error
names the pod it is in."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import _SPECS, read_pod
from tests.builders import pod

SPEC_VARIANTS: list[dict[str, Any]] = [
    {},
    {"priority": 7, "preemptionPolicy": "Never", "priorityClassName": "low"},
    {"nodeSelector": {"gpu": "a100"}, "terminationGracePeriodSeconds": 5},
    {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        }
    },
    {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
    {"schedulingGates": [{"name": "wait"}]},
]


def _manifest(name: str, variant: int, node_name: str = "", cpu: str = "1") -> dict[str, Any]:
    manifest = pod(name, cpu=cpu, node_name=node_name)
    manifest["spec"].update(copy.deepcopy(SPEC_VARIANTS[variant]))
    return manifest


def _fresh(manifest: dict[str, Any]) -> Any:
    _SPECS.kept.clear()
    return read_pod(manifest)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(SPEC_VARIANTS) - 1),
            st.sampled_from(["", "n1", "n2"]),
            st.sampled_from(["1", "250m"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_a_kept_reading_makes_the_pod_a_fresh_one_makes(
    pods: list[tuple[int, str, str]],
) -> None:
    manifests = [_manifest(f"p{i}", v, n, c) for i, (v, n, c) in enumerate(pods)]
    kept = [read_pod(m) for m in manifests]
    assert kept == [_fresh(m) for m in manifests]


def test_pods_of_one_template_share_the_reading_not_their_own_parts() -> None:
    a = read_pod(_manifest("a", 5))
    b = read_pod(_manifest("b", 5, node_name="n1"))
    assert (a.node_name, b.node_name) == ("", "n1")
    # A generic ephemeral volume's claim is named after its pod.
    assert [v.claim for v in a.volumes] == ["a-scratch"]
    assert [v.claim for v in b.volumes] == ["b-scratch"]
    assert a.tolerations is b.tolerations  # frozen records are shared
    a.requests["cpu"] = 0
    a.node_selector["x"] = "y"
    assert b.requests["cpu"] == 1000 and b.node_selector == {}


def test_an_error_names_each_pod_that_has_it() -> None:
    for name in ("first", "second"):
        bad = _manifest(name, 0)
        bad["spec"]["priority"] = "high"
        with pytest.raises(ManifestError, match=f"Pod default/{name}: spec.priority"):
            read_pod(bad)


def test_the_memo_keeps_a_bounded_number_of_specs() -> None:
    for i in range(_SPECS.size + 10):
        read_pod(_manifest(f"p{i}", 0, cpu=f"{i + 1}m"))
        assert 1 <= len(_SPECS.kept) <= _SPECS.size
