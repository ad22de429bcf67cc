"""Nothing in the input passes silently: files and directories that give no object, kinds not
read (once per kind and API), other schedulers' objects and mistyped kinds (errors with
--strict), versions of a known kind that are not read (always errors), and input without a
Node or without a pending pod for batchsched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.objects.unread import Unread
from tests.builders import node, pod
from tests.unit.commands.test_cli_errors import run


def _other(kind: str, api_version: str, name: str, namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {"minMember": 2}}


def _write(tmp_path: Path, *docs: dict[str, Any], name: str = "in.yaml") -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


OTHERS = [
    _other("ClusterQueue", "kueue.x-k8s.io/v1beta1", "cq"),
    _other("LocalQueue", "kueue.x-k8s.io/v1beta1", "a", "ml"),
    _other("LocalQueue", "kueue.x-k8s.io/v1beta1", "b", "ml"),
    _other("ResourceFlavor", "kueue.x-k8s.io/v1beta1", "gpu"),
    _other("ElasticQuota", "scheduling.x-k8s.io/v1alpha1", "q", "ml"),
    _other("PodGroup", "scheduling.volcano.sh/v1beta1", "vg", "ml"),
    _other("DeviceTaintRule", "resource.k8s.io/v1alpha3", "taint"),
    _other("Pood", "v1", "typo"),
    _other("Deployment", "apps/v1", "web"),
    _other("Deployment", "apps/v1", "api"),
]


def test_kinds_not_read_are_summed_up_once_per_kind_and_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, node("n1"), pod("p"), *OTHERS)
    code, out, err = run(["schedule", path, "--now", "2026-11-22T10:00:00Z"], capsys)
    assert code == 0 and "BINDINGS (1)" in out
    lines = [line for line in err.splitlines() if "not read:" in line]
    assert lines == [
        f"warning: not read: 1 ClusterQueue (kueue.x-k8s.io/v1beta1) in {path}: Kueue's: "
        "batchsched reads its own, Volcano's and KAI's Queues, not Kueue's quotas",
        f"warning: not read: 2 LocalQueue (kueue.x-k8s.io/v1beta1) in {path}: Kueue's: "
        "batchsched reads its own, Volcano's and KAI's Queues, not Kueue's quotas",
        f"warning: not read: 1 ResourceFlavor (kueue.x-k8s.io/v1beta1) in {path}: Kueue's: "
        "batchsched reads its own, Volcano's and KAI's Queues, not Kueue's quotas",
        f"warning: not read: 1 ElasticQuota (scheduling.x-k8s.io/v1alpha1) in {path}: "
        "scheduler-plugins': batchsched reads its PodGroup, not ElasticQuota (its Queue instead)",
        # Volcano's PodGroup under its own API, never read as the scheduler-plugins one.
        f"warning: not read: 1 PodGroup (scheduling.volcano.sh/v1beta1) in {path}: Volcano's: "
        "batchsched reads only the scheduler-plugins and upstream PodGroups, and Volcano's Queue",
        f"warning: not read: 1 DeviceTaintRule (resource.k8s.io/v1alpha3) in {path}: a DRA "
        "kind batchsched does not read: allocations ignore it",
        f"warning: not read: 1 Pood (v1) in {path}: unknown kind; did you mean Pod?",
        f"warning: not read: 2 Deployment (apps/v1) in {path}: batchsched does not read this kind",
    ]
    # The plan itself does not change: the Volcano group was not taken for a gang.
    assert "POD GROUPS (0)" in out


def test_strict_refuses_typos_and_other_schedulers_objects_not_plain_kinds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _write(tmp_path, node("n1"), pod("p"), OTHERS[-1], name="plain.yaml")
    code, _, err = run(["schedule", plain, "--strict"], capsys)
    assert code == 0 and "not read: 1 Deployment" in err
    for other in OTHERS[:-2]:
        path = _write(tmp_path, node("n1"), pod("p"), other, name=f"{other['kind']}.yaml")
        code, out, err = run(["schedule", path, "--strict"], capsys)
        assert code == 2 and out == "", other
        assert "--strict: 1 kind(s) not read:" in err and other["kind"] in err


def test_a_scheduler_configuration_given_with_f_says_to_use_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    path = _write(tmp_path, node("n1"), pod("p"), config)
    code, _, err = run(["schedule", path], capsys)
    assert code == 0
    assert "KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)" in err
    assert "give it with --config, not -f" in err
    assert run(["schedule", path, "--strict"], capsys)[0] == 2


@pytest.mark.parametrize(
    ("kind", "api_version", "read_as"),
    [
        ("PodGroup", "scheduling.x-k8s.io/v1beta1", "scheduling.x-k8s.io/v1alpha1"),
        ("Pod", "v2", "v1"),
        ("PriorityClass", "scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1"),
        ("ResourceClaim", "resource.k8s.io/v1beta1", "resource.k8s.io/v1"),
    ],
)
def test_an_unknown_version_of_a_known_kind_is_an_error_naming_the_versions_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, api_version: str, read_as: str
) -> None:
    path = _write(tmp_path, node("n1"), _other(kind, api_version, "x", "ml"))
    code, out, err = run(["schedule", path], capsys)
    assert code == 2 and out == ""
    assert f"{path}: {kind} " in err
    assert f"apiVersion: {api_version!r} is not a version batchsched reads" in err
    assert read_as in err


def test_an_empty_file_and_no_node_or_pod_are_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n---\n")
    code, out, err = run(["schedule", str(empty)], capsys)
    assert code == 0 and "BINDINGS (0)" in out
    assert err.splitlines() == [
        f"warning: {empty}: no object in it",
        "warning: no Node in the input: every pending pod stays pending",
        "warning: no Pod in the input: nothing to schedule",
    ]


def test_pods_all_of_other_schedulers_are_counted_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = [pod(f"p{i}", schedulerName="default-scheduler") for i in range(3)]
    volcano = pod("v", schedulerName="volcano")
    bound = pod("b", nodeName="n1")
    path = _write(tmp_path, node("n1"), *theirs, volcano, bound)
    code, _, err = run(["schedule", path], capsys)
    assert code == 0
    assert err.splitlines() == [
        "warning: no pending Pod for batchsched (spec.schedulerName): the pending pods name "
        "other schedulers (3 default-scheduler, 1 volcano)"
    ]
    mine = _write(tmp_path, node("n1"), pod("mine"), name="mine.yaml")
    assert run(["schedule", mine], capsys)[2] == ""


def test_a_directory_without_r_says_what_it_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, node("n1"), pod("p"), name="cluster/sub/a.yaml")
    folder = tmp_path / "cluster"
    code, _, err = run(["schedule", "-f", str(folder)], capsys)
    assert code == 0
    assert f"warning: {folder}: no manifest file in it, 1 in its subdirectories (give -R" in err
    code, out, err = run(["schedule", "-f", str(folder), "-R"], capsys)
    assert code == 0 and err == "" and "BINDINGS (1)" in out
    _write(tmp_path, node("n2"), name="cluster/top.yaml")
    err = run(["schedule", "-f", str(folder)], capsys)[2]
    assert f"warning: {folder}: 1 manifest file(s) in its subdirectories not read" in err
    (tmp_path / "bare").mkdir()
    err = run(["schedule", "-f", str(tmp_path / "bare")], capsys)[2]
    assert f"{tmp_path / 'bare'}: no manifest file (.json, .yaml, .yml) in it" in err


def test_a_typo_needs_the_kinds_api_group() -> None:
    assert Unread("Pood", "v1").typo_of == "Pod"
    assert Unread("pod", "").typo_of == "Pod"
    assert Unread("PodGroups", "scheduling.x-k8s.io/v1alpha1").typo_of == "PodGroup"
    # A close name in another API is that API's own kind, not a typo of ours.
    assert Unread("Nodes", "example.com/v1").typo_of == ""
    assert Unread("Service", "v1").typo_of == ""
