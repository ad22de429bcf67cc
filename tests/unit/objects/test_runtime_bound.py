"""Stated runtimes: where they are read from, in which order, and bad values named."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.objects.errors import ManifestError
from batchsched.objects.parse import read_pod, read_pod_group
from batchsched.objects.records import Pod, PodGroup
from batchsched.objects.runtime_bound import (
    BoundError,
    duration_seconds,
    label_seconds,
    stated_runtime,
)
from batchsched.objects.workload_api import read_any_pod_group


def _pod(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    deadline: Any = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"kind": "Pod", "metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("text", "seconds"), [("90m", 5400), ("2h", 7200), ("3600s", 3600), ("1h30m", 5400)]
)
def test_durations(text: str, seconds: int) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "90", "1.5h", "2d", "-1h", "0s", "h", "9999999h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(BoundError):
        duration_seconds(text)


def test_label_seconds() -> None:
    assert label_seconds("600") == 600
    for bad in ("0", "10m", "-5", "", "+5", "\u0663", "99999999999999999999"):
        with pytest.raises(BoundError):
            label_seconds(bad)


def test_active_deadline_comes_first() -> None:
    pod = read_pod(
        _pod(
            labels={"kueue.x-k8s.io/max-exec-time-seconds": "100"},
            annotations={"batchsched.io/max-runtime": "1h"},
            deadline=50,
        )
    )
    assert pod.max_runtime_seconds == 50


def test_label_before_annotation() -> None:
    pod = read_pod(
        _pod(
            labels={"kueue.x-k8s.io/max-exec-time-seconds": "100"},
            annotations={"batchsched.io/max-runtime": "1h"},
        )
    )
    assert pod.max_runtime_seconds == 100


def test_annotation_alone_and_none() -> None:
    assert (
        read_pod(_pod(annotations={"batchsched.io/max-runtime": "90m"})).max_runtime_seconds == 5400
    )
    assert read_pod(_pod()).max_runtime_seconds is None


def test_bad_annotation_names_object_and_field_and_states_no_runtime() -> None:
    # Read, not refused: a running pod stating a bad bound still holds its room; admission
    # keeps a pending one pending with the error (tests/unit/scheduling/test_admission.py).
    pod = read_pod(_pod(annotations={"batchsched.io/max-runtime": "soon"}))
    assert pod.max_runtime_seconds is None
    assert pod.runtime_error == (
        "Pod ns/p: metadata.annotations.batchsched.io/max-runtime: 'soon' is not a duration: "
        "whole numbers with units h, m or s (e.g. 90m, 2h, 3600s, 1h30m)"
    )


def test_bad_label_names_field_and_is_not_passed_over_for_the_annotation() -> None:
    pod = read_pod(
        _pod(
            labels={"kueue.x-k8s.io/max-exec-time-seconds": "1h"},
            annotations={"batchsched.io/max-runtime": "1h"},
        )
    )
    assert pod.max_runtime_seconds is None
    assert pod.runtime_error.startswith(
        "Pod ns/p: metadata.labels.kueue.x-k8s.io/max-exec-time-seconds: '1h' is not a whole"
    )


def test_a_bad_label_beside_an_active_deadline_is_still_named() -> None:
    pod = read_pod(_pod(labels={"kueue.x-k8s.io/max-exec-time-seconds": "0"}, deadline=50))
    assert pod.max_runtime_seconds == 50 and pod.runtime_enforced
    assert "'0' must be more than 0 seconds" in pod.runtime_error


def test_bad_active_deadline() -> None:
    with pytest.raises(ManifestError, match="spec.activeDeadlineSeconds"):
        read_pod(_pod(deadline=0))


def test_pod_group_annotation() -> None:
    group = {
        "kind": "PodGroup",
        "metadata": {
            "name": "g",
            "namespace": "ns",
            "annotations": {"batchsched.io/max-runtime": "2h"},
        },
        "spec": {"minMember": 2},
    }
    assert read_pod_group(group).max_runtime_seconds == 7200
    group["metadata"]["annotations"] = {"batchsched.io/max-runtime": "2 hours"}
    bad = read_pod_group(group)
    assert bad.max_runtime_seconds is None
    assert bad.runtime_error.startswith(
        "PodGroup ns/g: metadata.annotations.batchsched.io/max-runtime: '2 hours' is not"
    )


@pytest.mark.parametrize("version", ["v1alpha2", "v1beta1"])
def test_workload_api_pod_group_annotation(version: str) -> None:
    group = {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "PodGroup",
        "metadata": {
            "name": "g",
            "namespace": "ns",
            "annotations": {"batchsched.io/max-runtime": "1h30m"},
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    assert read_any_pod_group(group).max_runtime_seconds == 5400
    group["metadata"]["annotations"] = {"batchsched.io/max-runtime": "5d"}
    assert read_any_pod_group(group).runtime_error.startswith(
        "PodGroup ns/g: metadata.annotations.batchsched.io/max-runtime: '5d' is not a duration"
    )


def test_a_pods_own_bound_comes_before_its_groups() -> None:
    group = PodGroup(namespace="ns", name="g", min_member=2, max_runtime_seconds=7200)
    assert stated_runtime(Pod(namespace="ns", name="p", max_runtime_seconds=60), group) == 60
    assert stated_runtime(Pod(namespace="ns", name="p"), group) == 7200
    assert stated_runtime(Pod(namespace="ns", name="p"), None) is None
