"""Properties of the refusal guard, unknown-field checks and request arithmetic."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.objects.parse import ContainerRequests, pod_requests
from batchsched.objects.schema import unknown_fields
from batchsched.objects.support import refused_field

SETTINGS = settings(max_examples=80, deadline=None)

KEYS = st.sampled_from(
    [
        "affinity",
        "podAntiAffinity",
        "containers",
        "initContainers",
        "ports",
        "hostPort",
        "hostNetwork",
        "volumes",
        "persistentVolumeClaim",
        "resources",
        "requests",
        "tolerations",
        "schedulingGroup",
        "x",
    ]
)
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


@SETTINGS
@given(spec=st.dictionaries(KEYS, JSON, max_size=6))
def test_the_guard_and_the_field_check_take_any_shape(spec: dict[str, Any]) -> None:
    """Malformed specs are the readers' to report: these two never raise."""
    found = refused_field(spec)
    assert found == "" or found.startswith("spec.")
    for path in unknown_fields("Pod", {"kind": "Pod", "spec": spec}):
        assert path.startswith("spec.")


REQUESTS = st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=4)


@SETTINGS
@given(
    containers=REQUESTS,
    inits=st.lists(st.tuples(st.integers(min_value=0, max_value=5000), st.booleans()), max_size=5),
    overhead=st.integers(min_value=0, max_value=500),
)
def test_requests_are_the_peak_of_every_phase_of_the_pod(
    containers: list[int], inits: list[tuple[int, bool]], overhead: int
) -> None:
    """Another way to state upstream's rule: the pod needs, at its busiest, either the
    containers with every sidecar, or one init container with the sidecars started before."""
    got = pod_requests(
        [{"cpu": c} for c in containers],
        [ContainerRequests({"cpu": amount}, sidecar) for amount, sidecar in inits],
        {"cpu": overhead},
    ).get("cpu", 0)
    phases = [sum(containers) + sum(a for a, s in inits if s)]
    for i, (amount, sidecar) in enumerate(inits):
        if not sidecar:
            phases.append(amount + sum(a for a, s in inits[:i] if s))
    assert got == max(phases) + overhead
