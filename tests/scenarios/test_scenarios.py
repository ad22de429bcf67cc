"""Scenario tests: manifest snapshots with the decisions they must produce.

Each `*.yaml` under this folder is an ordinary manifest file (`batchsched schedule` runs it as
is) with one extra document of `kind: Scenario` that the loader ignores:

    kind: Scenario
    description: what the scenario shows
    now: 2026-11-22T10:00:00Z          # optional
    config: {...}                       # optional KubeSchedulerConfiguration
    expect:
      bindings: {ns/pod: node}          # exactly these bindings
      evictions: {ns/pod: ns/preemptor} # exactly these evictions (default: none)
      unschedulable: {ns/pod: "substring of the message"}  # exactly these pods
      podGroups: {ns/group: {phase: Running, running: 3}}  # optional, fields compared
                                        # conditions: {Type: Status/Reason} (upstream groups)
      reservations: {node: ns/pod}      # optional
      backfillReservations: {"PodGroup ns/g": {nodes: [n1], expectedStart: T}}  # optional;
                                        # exactly these holders, the fields named compared
      volumeBindings: {ns/claim: pv}    # optional; null: provisioned on the pod's node
      claims: {ns/claim: [driver/pool/device, ...]}  # optional: exactly these allocations
      reclaims: {ns/victim: "ns/preemptor its-queue <- victim's-queue"}  # optional, exactly
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.commands.schedule import run
from batchsched.config import default_config, parse_config
from batchsched.objects.load import load_text
from batchsched.objects.parse import parse_time
from tests.conftest import NOW

HERE = Path(__file__).parent
FILES = sorted(HERE.rglob("*.yaml"))


def _scenario(text: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    headers = [d for d in docs if d.get("kind") == "Scenario"]
    assert len(headers) == 1, "a scenario file needs exactly one `kind: Scenario` document"
    return headers[0]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(HERE)) for p in FILES])
def test_scenario(path: Path) -> None:
    text = path.read_text()
    header = _scenario(text)
    expect = header["expect"]
    config = parse_config(header["config"]) if "config" in header else default_config()
    now = parse_time(str(header["now"])) if "now" in header else NOW
    result = run(load_text(text, str(path)), config, now)
    output = result.to_json()

    assert {b["pod"]: b["node"] for b in output["bindings"]} == expect.get("bindings", {})
    assert {e["pod"]: e["preemptor"] for e in output["evictions"]} == expect.get("evictions", {})
    messages = {u["pod"]: u["message"] for u in output["unschedulable"]}
    assert set(messages) == set(expect.get("unschedulable", {}))
    for pod, fragment in expect.get("unschedulable", {}).items():
        assert fragment in messages[pod], f"{pod}: {messages[pod]!r}"
    if "podGroups" in expect:
        groups = {g["name"]: g for g in output["podGroups"]}
        assert set(groups) == set(expect["podGroups"])
        for name, fields in expect["podGroups"].items():
            got = dict(groups[name])
            # Conditions compare as {type: "status/reason"}: times and messages vary.
            got["conditions"] = {
                c["type"]: f"{c['status']}/{c['reason']}" for c in got.get("conditions", [])
            }
            assert {k: got[k] for k in fields} == fields, name
    if "volumeBindings" in expect:
        chosen = {b["claim"]: b["volume"] for b in output["volumeBindings"]}
        assert chosen == expect["volumeBindings"]
    if "reclaims" in expect:
        reclaims = {
            r["victim"]: f"{r['preemptor']} {r['preemptorQueue']} <- {r['victimQueue']}"
            for r in output["reclaims"]
        }
        assert reclaims == expect["reclaims"]
    if "reservations" in expect:
        daemons = [r for r in output["reservations"] if r["kind"] == "DaemonSet"]
        assert {r["node"]: r["pod"] for r in daemons} == expect["reservations"]
    if "backfillReservations" in expect:
        # Exactly these holders; of each, the fields the scenario names.
        wanted = expect["backfillReservations"]
        held = {r["holder"]: r for r in output["reservations"] if r["kind"] == "Backfill"}
        assert set(held) == set(wanted)
        for holder, fields in wanted.items():
            assert {k: held[holder][k] for k in fields} == fields, holder
    if "claims" in expect:
        allocated = {
            c["claim"]: [
                f"{d['driver']}/{d['pool']}/{d['device']}"
                for d in c["status"]["allocation"]["devices"]["results"]
            ]
            for c in output["claims"]
        }
        assert allocated == expect["claims"]
