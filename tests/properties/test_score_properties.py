"""The default scores give the same placements whether a pod shape's results are refreshed
row by row from the cache or computed afresh for every pod."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from tests.builders import node, pod
from tests.conftest import schedule
from tests.faults import exploding_for

IMAGES = ["trainer:1", "base:2"]


@st.composite
def scored_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes with labels, PreferNoSchedule taints and images; pods with preferences, images,
    tolerations, and some with no requests at all."""
    manifests: list[dict[str, Any]] = []
    names = []
    for i in range(draw(st.integers(2, 6))):
        name = f"n{i}"
        names.append(name)
        raw = node(
            name,
            cpu=str(draw(st.sampled_from([2, 4, 8]))),
            memory=f"{draw(st.sampled_from([4, 8, 16]))}Gi",
            labels={"zone": draw(st.sampled_from(["a", "b", "c"]))},
            taints=[{"key": "spot", "effect": "PreferNoSchedule"}] if draw(st.booleans()) else None,
        )
        held = draw(st.lists(st.sampled_from(IMAGES), unique=True, max_size=2))
        raw["status"]["images"] = [{"names": [n], "sizeBytes": 300 * 2**20} for n in held]
        manifests.append(raw)
    for j in range(draw(st.integers(1, 12))):
        empty = draw(st.integers(0, 3)) == 0
        weight = draw(st.integers(1, 100))
        zone = draw(st.sampled_from(["a", "b", "c"]))
        prefers = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
        preferred = [{"weight": weight, "preference": prefers}]
        raw = pod(
            f"p{j}",
            cpu=None if empty else f"{draw(st.sampled_from([100, 500, 1000]))}m",
            memory=None if empty else f"{draw(st.integers(1, 3))}Gi",
            node_name=draw(st.sampled_from(["", "", *names])),
            tolerations=[{"key": "spot", "operator": "Exists"}] if draw(st.booleans()) else None,
            affinity={
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}
            }
            if draw(st.booleans())
            else None,
        )
        raw["spec"]["containers"][0]["image"] = draw(st.sampled_from([*IMAGES, "other"]))
        manifests.append(raw)
    return manifests


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(scored_clusters())
def test_cached_placements_agree_with_fresh_ones(
    monkeypatch: pytest.MonkeyPatch, manifests: list[dict[str, Any]]
) -> None:
    # A filter that is not row-local (here one that never fails) turns the cache off.
    fresh = exploding_for(monkeypatch)
    cached = schedule(*manifests, config=default_config())
    assert cached.to_json() == schedule(*manifests, config=fresh).to_json()
