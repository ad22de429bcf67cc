"""Live-mode settings from the config's `leaderElection` and `clientConnection` sections.

Names and defaults follow kube-scheduler's KubeSchedulerConfiguration (v1): durations are Go
duration strings (`15s`, `1m30s`, `500ms`); `clientConnection.qps` defaults to 50 and `burst`
to 100; a negative qps lifts the client-side rate limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batchsched.config import SchedulerConfig
from batchsched.objects.go_duration import go_duration_seconds
from batchsched.plugins.args import ConfigError, check_known_keys

_LEADER_KEYS = (
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
)
_CLIENT_KEYS = ("qps", "burst", "kubeconfig", "contentType", "acceptContentTypes")


def parse_duration(raw: Any, where: str) -> float:
    """A Go duration string in seconds; `where` names the field in the error."""
    if not isinstance(raw, str) or not raw:
        raise ConfigError(f"{where}: must be a duration such as '15s' or '1m30s', got {raw!r}")
    total = go_duration_seconds(raw)
    if total is None or total <= 0:
        raise ConfigError(
            f"{where}: {raw!r} is not a positive duration (use units h, m, s, ms: '15s', '1m30s')"
        )
    return total


@dataclass(frozen=True)
class LeaderElectionSettings:
    enabled: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    name: str = "batchsched"
    namespace: str = "kube-system"


@dataclass(frozen=True)
class ClientSettings:
    qps: float = 50.0
    burst: int = 100


@dataclass(frozen=True)
class LiveSettings:
    leader_election: LeaderElectionSettings
    client: ClientSettings

    @classmethod
    def from_config(cls, config: SchedulerConfig) -> LiveSettings:
        return cls(_leader(config.leader_election), _client(config.client_connection))


def _string(raw: Mapping[str, Any], key: str, default: str, where: str) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}.{key}: must be a non-empty string, got {value!r}")
    return value


def _leader(raw: Mapping[str, Any]) -> LeaderElectionSettings:
    where = "leaderElection"
    check_known_keys(raw, _LEADER_KEYS, where)
    default = LeaderElectionSettings()
    enabled = raw.get("leaderElect", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}.leaderElect: must be true or false, got {enabled!r}")
    lock = raw.get("resourceLock", "leases")
    if lock != "leases":
        raise ConfigError(f"{where}.resourceLock: only 'leases' is supported, got {lock!r}")

    def duration(key: str, fallback: float) -> float:
        return parse_duration(raw[key], f"{where}.{key}") if key in raw else fallback

    settings = LeaderElectionSettings(
        enabled=enabled,
        lease_duration=duration("leaseDuration", default.lease_duration),
        renew_deadline=duration("renewDeadline", default.renew_deadline),
        retry_period=duration("retryPeriod", default.retry_period),
        name=_string(raw, "resourceName", default.name, where),
        namespace=_string(raw, "resourceNamespace", default.namespace, where),
    )
    if settings.renew_deadline >= settings.lease_duration:
        raise ConfigError(f"{where}.renewDeadline: must be shorter than leaseDuration")
    # As client-go: a retry (with its up to 20% jitter) must fit inside the renew deadline.
    if settings.retry_period * 1.2 >= settings.renew_deadline:
        raise ConfigError(f"{where}.retryPeriod: must be under renewDeadline / 1.2")
    return settings


def _client(raw: Mapping[str, Any]) -> ClientSettings:
    where = "clientConnection"
    check_known_keys(raw, _CLIENT_KEYS, where)
    qps = raw.get("qps", 50.0)
    if isinstance(qps, bool) or not isinstance(qps, int | float):
        raise ConfigError(f"{where}.qps: must be a number (negative: no limit), got {qps!r}")
    burst = raw.get("burst", 100)
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
        raise ConfigError(f"{where}.burst: must be a positive integer, got {burst!r}")
    # kube-scheduler defaults an unset (zero) qps to 50.
    return ClientSettings(qps=float(qps) if qps != 0 else 50.0, burst=burst)
