"""`batchsched run` and `batchsched schedule --kubeconfig` through the command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from batchsched.commands.cli import main
from tests.live.conftest import free_port, get, node, node_of, pod
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer


def test_schedule_reads_the_cluster_through_a_kubeconfig(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.create("nodes", node("n1", cpu="2"))
    api.create("pods", pod("running", cpu="1", node_name="n1"))
    api.create("pods", pod("waiting", cpu="1"))
    extra = tmp_path / "extra.yaml"
    extra.write_text(
        "kind: Pod\napiVersion: v1\nmetadata: {name: extra}\n"
        "spec: {schedulerName: batchsched, containers: [{name: c, resources: "
        "{requests: {cpu: '1'}}}]}\n"
    )
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    assert main(["schedule", "--kubeconfig", str(kubeconfig), str(extra), "-o", "json"]) == 0
    report = orjson.loads(capsys.readouterr().out)
    assert [b["pod"] for b in report["bindings"]] == ["default/waiting"]
    assert [u["pod"] for u in report["unschedulable"]] == ["default/extra"]
    assert [r for r in api.requests if r[0] != "GET"] == []  # reading only
    assert api.credentials == {"Bearer fake-token"}


def test_schedule_needs_files_or_a_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["schedule"]) == 2
    assert "give manifest FILEs, a cluster (--kubeconfig PATH" in capsys.readouterr().err


def test_a_bad_kubeconfig_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert main(["run", "--kubeconfig", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("batchsched: error:") and str(missing) in err


def test_bad_leader_election_settings_are_a_clear_error(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("leaderElection:\n  leaseDuration: 15 seconds\n")
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    assert main(["run", "--kubeconfig", str(kubeconfig), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "leaderElection.leaseDuration: '15 seconds' is not a positive duration" in err


def test_run_binds_pods_and_releases_the_lease_on_sigterm(
    api: FakeApiServer, tmp_path: Path
) -> None:
    api.create("nodes", node("n1"))
    api.create("pods", pod("p"))
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "leaderElection: {leaseDuration: 2s, renewDeadline: 1s, retryPeriod: 200ms,"
        " resourceNamespace: kube-system}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    args = ["run", "--kubeconfig", str(kubeconfig), "--config", str(cfg)]
    port = free_port()
    args += ["--bind-address", "127.0.0.1", "--secure-port", str(port), "--identity", "cli"]
    api.tokens["reader-token"] = {"username": "reader"}
    api.grants.add(("reader", "/metrics", "get"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchsched", *args],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert api.wait_for(lambda s: node_of(s, "p") == "n1")
        lease = api.get("leases", "batchsched", "kube-system")
        assert lease is not None and lease["spec"]["holderIdentity"] == "cli"
        # The endpoints over HTTPS, /metrics for the user the API server allows.
        assert get(f"https://127.0.0.1:{port}/healthz") == (200, b"ok\n")
        code, body = get(f"https://127.0.0.1:{port}/metrics", token="reader-token")
        assert code == 200 and b'batchsched_binds_total{result="bound"} 1.0' in body
        assert get(f"https://127.0.0.1:{port}/metrics")[0] == 403
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT_SECONDS)
    assert proc.returncode == 0, err
    assert "caches synced: 1 nodes, 1 pods (1 pending)" in err
    lease = api.get("leases", "batchsched", "kube-system")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""  # released on exit


def test_policy_reads_the_classes_from_the_cluster(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.create("priorityclasses", {"metadata": {"name": "high"}, "value": 9000})
    api.create("priorityclasses", {"metadata": {"name": "low"}, "value": 8000})
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    assert main(["policy", "--kubeconfig", str(kubeconfig), "-o", "json"]) == 0
    out = capsys.readouterr().out
    assert '"high"' in out and '"low"' in out


def test_an_unreachable_cluster_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeApiServer().start()
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    api.stop()
    assert main(["schedule", "--kubeconfig", str(kubeconfig)]) == 2
    assert "cannot list /apis/scheduling.k8s.io/v1/priorityclasses" in capsys.readouterr().err


def test_schedule_checks_the_files_pods_classes_against_the_cluster(
    api: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.create("nodes", node("n1", cpu="2"))
    api.create("priorityclasses", {"metadata": {"name": "high"}, "value": 1000})
    # A cluster pod whose class has gone since it was admitted is not the files' problem.
    gone = pod("old", cpu="1", node_name="n1")
    gone["spec"]["priorityClassName"] = "retired"
    api.create("pods", gone)
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    extra = tmp_path / "extra.yaml"
    for name, code in (("high", 0), ("hihg", 2)):
        extra.write_text(
            "kind: Pod\napiVersion: v1\nmetadata: {name: extra}\n"
            f"spec: {{priorityClassName: {name}, containers: [{{name: c}}]}}\n"
        )
        assert main(["schedule", "--kubeconfig", str(kubeconfig), str(extra)]) == code
    err = capsys.readouterr().err
    assert "Pod default/extra: spec.priorityClassName: no PriorityClass 'hihg' (known: high)" in err
