"""The defaults the manual quotes are the code's: each quote is found by its wording (a test
that cannot find it fails, so rewording a quote means updating it here) and its numbers are
compared with the configuration's defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from batchsched.live.settings import ClientSettings, LeaderElectionSettings
from batchsched.plugins.daemonsetpreemption.plugin import read_args as read_daemonset_args
from batchsched.plugins.interpodaffinity.plugin import InterPodAffinity
from batchsched.plugins.noderesources.fit import GPU_PACKING
from batchsched.plugins.registry import DEFAULT_PLUGINS
from batchsched.plugins.volumebinding.binding import VolumeBinding

DOCS = Path(__file__).parents[2] / "docs"
SCORE_WEIGHTS = dict(DEFAULT_PLUGINS["score"])
PACKING = {r["name"]: r["weight"] for r in GPU_PACKING["resources"]}


def _doc(name: str) -> str:
    # Quotes wrap across lines: compare words, not line breaks.
    return " ".join((DOCS / name).read_text().split())


def _quote(name: str, pattern: str) -> re.Match[str]:
    match = re.search(pattern, _doc(name))
    assert match is not None, f"docs/{name} no longer says {pattern!r}: update this test"
    return match


def test_the_score_table_gives_every_default_score_plugin_its_weight() -> None:
    rows = re.findall(r"\| (\w+) \| (\d+) \|", _doc("scheduling.md"))
    assert {name: int(weight) for name, weight in rows} == SCORE_WEIGHTS


def test_the_configuration_page_lists_the_default_score_weights() -> None:
    sentence = _quote(
        "configuration.md", r"The default score weights are kube-scheduler's: ([^(]+)"
    )
    pairs = re.findall(r"(\w+) (\d+)", sentence.group(1))
    assert {name: int(weight) for name, weight in pairs} == SCORE_WEIGHTS


@pytest.mark.parametrize(
    ("doc", "pattern"),
    [
        ("live.md", r"weights `nvidia.com/gpu` (\d+), `cpu` (\d+), `memory` (\d+)"),
        ("configuration.md", r"\(`nvidia.com/gpu`\) weighing (\d+) and cpu and memory (\d+)()"),
        ("scheduling.md", r"GPUs weighing (\d+), cpu and memory (\d+)()"),
    ],
)
def test_the_gpu_packing_weights_quoted_are_the_default(doc: str, pattern: str) -> None:
    assert GPU_PACKING["type"] == "MostAllocated"
    gpu, cpu, memory = _quote(doc, pattern).groups()
    assert int(gpu) == PACKING["nvidia.com/gpu"]
    assert int(cpu) == PACKING["cpu"] == PACKING["memory"]
    assert memory in ("", str(PACKING["memory"]))


def test_the_live_page_quotes_the_leader_election_and_client_defaults() -> None:
    lease = LeaderElectionSettings()
    found = _quote(
        "live.md",
        r"`leaseDuration` (\d+)s, `renewDeadline` (\d+)s, `retryPeriod` (\d+)s, "
        r"`resourceName` (\S+), `resourceNamespace` (\S+)\)",
    ).groups()
    assert found == (
        f"{lease.lease_duration:g}",
        f"{lease.renew_deadline:g}",
        f"{lease.retry_period:g}",
        lease.name,
        lease.namespace,
    )
    client = ClientSettings()
    qps, burst = _quote(
        "live.md", r"`clientConnection.qps` \(default (\d+)\) and `burst` \((\d+)\)"
    ).groups()
    assert (float(qps), int(burst)) == (client.qps, client.burst)


def test_the_plugin_pages_quote_their_args_defaults() -> None:
    delay, victims = read_daemonset_args(None)
    quoted = _quote(
        "daemonset.md",
        r"`preemptionStartDelaySeconds` old \(default (\d+)\).*?`victimSelectionStrategy` order "
        r"\(default `\[(\w+), (\w+)\]`\).*?`singleVictimDeviationPercent` \(default (\d+)\)"
        r".*?`maxVictims` \(default (\d+)\)",
    ).groups()
    assert quoted == (
        str(delay),
        *victims.strategies,
        str(victims.deviation_percent),
        str(victims.max_victims),
    )
    affinity = InterPodAffinity()
    weight, ignore = _quote(
        "inter-pod.md",
        r"`hardPodAffinityWeight` \(0\.\.100, default (\d+)\), "
        r"`ignorePreferredTermsOfExistingPods` \(default (\w+)\)",
    ).groups()
    assert (int(weight), ignore) == (affinity.hard_weight, str(affinity.ignore_existing).lower())
    [timeout] = _quote("volumes.md", r"`bindTimeoutSeconds` \(default (\d+),").groups()
    assert int(timeout) == VolumeBinding().bind_timeout
