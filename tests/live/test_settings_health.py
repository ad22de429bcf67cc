"""Live settings from the config and the rate limiter (the endpoints: test_endpoints.py)."""

from __future__ import annotations

import pytest

from batchsched.config import parse_config
from batchsched.live.ratelimit import TokenBucket
from batchsched.live.settings import LiveSettings, parse_duration
from batchsched.plugins.args import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"), [("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "x") == seconds


@pytest.mark.parametrize("text", ["15", "15 s", "-1s", "0s", "s", 15])
def test_bad_durations_name_the_field(text: object) -> None:
    with pytest.raises(ConfigError, match=r"^leaderElection\.leaseDuration: "):
        parse_duration(text, "leaderElection.leaseDuration")


def test_defaults_are_kube_schedulers() -> None:
    settings = LiveSettings.from_config(parse_config({}))
    assert settings.client.qps == 50 and settings.client.burst == 100
    le = settings.leader_election
    assert (le.enabled, le.lease_duration, le.renew_deadline, le.retry_period) == (
        True,
        15,
        10,
        2,
    )
    assert (le.name, le.namespace) == ("batchsched", "kube-system")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"leaderElection": {"renewDeadline": "20s"}}, "must be shorter than leaseDuration"),
        ({"leaderElection": {"retryPeriod": "9s"}}, "retryPeriod: must be under"),
        ({"leaderElection": {"resourceLock": "endpoints"}}, "only 'leases' is supported"),
        ({"leaderElection": {"leaderElect": "yes"}}, "leaderElect: must be true or false"),
        ({"leaderElection": {"leaseDuraton": "1s"}}, "unknown keys ['leaseDuraton']"),
        ({"clientConnection": {"burst": 0}}, "burst: must be a positive integer"),
        ({"clientConnection": {"qps": "fast"}}, "qps: must be a number"),
    ],
)
def test_bad_settings_are_clear_errors(section: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        LiveSettings.from_config(parse_config(section))
    assert message in str(err.value)


def test_negative_qps_lifts_the_limit() -> None:
    settings = LiveSettings.from_config(parse_config({"clientConnection": {"qps": -1}}))
    assert not TokenBucket(settings.client.qps, settings.client.burst).limited


def test_token_bucket_allows_a_burst_then_paces_at_qps() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(10.0, 3, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        bucket.acquire()
    assert slept == []
    for _ in range(2):
        bucket.acquire()
    assert slept == pytest.approx([0.1, 0.1])
    now[0] += 10.0  # idle: the bucket refills up to the burst, not beyond
    for _ in range(3):
        bucket.acquire()
    assert len(slept) == 2
