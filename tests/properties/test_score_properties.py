"""The default scores give the same placements whether a pod shape's results are refreshed
row by row from the cache (with the inter-pod plugins on top) or computed afresh for every
pod."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.framework.placements import Placements
from tests.builders import node, pod
from tests.conftest import schedule

IMAGES = ["trainer:1", "base:2"]


@st.composite
def scored_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes with labels, PreferNoSchedule taints and images; pods with preferences, images,
    tolerations, some with no requests at all, and some with a soft spread or anti-affinity
    (scores that read other nodes' pods, applied on top of the cached placement)."""
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
        app = draw(st.sampled_from(["web", "db"]))
        raw = pod(
            f"p{j}",
            labels={"app": app},
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
        selector = {"matchLabels": {"app": app}}
        inter_pod = draw(st.sampled_from(["", "", "spread", "anti"]))
        if inter_pod == "spread":
            raw["spec"]["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": selector,
                }
            ]
        elif inter_pod == "anti":
            term = {"labelSelector": selector, "topologyKey": "zone"}
            anti = [{"weight": draw(st.integers(1, 100)), "podAffinityTerm": term}]
            raw["spec"].setdefault("affinity", {})["podAntiAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": anti
            }
        manifests.append(raw)
    return manifests


@settings(max_examples=40, deadline=None)
@given(scored_clusters())
def test_cached_placements_agree_with_fresh_ones(manifests: list[dict[str, Any]]) -> None:
    cached = schedule(*manifests, config=default_config())
    # Without the placement cache every pod is filtered and scored afresh on every node (a
    # context of its own: the next example must find the cache on again).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Placements, "kept", lambda self, cycle: None)
        fresh = schedule(*manifests, config=default_config())
    assert cached.to_json() == fresh.to_json()
