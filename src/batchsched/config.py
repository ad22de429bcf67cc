"""The KubeSchedulerConfiguration subset batchsched reads (`kubescheduler.config.k8s.io/v1`).

Profiles with `schedulerName`, `plugins` enabled/disabled per extension point (and
`multiPoint`), and `pluginConfig` args. Unknown plugin names, extension points or args are
errors that list what is allowed; a config that loads is a config that runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchsched.framework.interface import (
    FilterPlugin,
    GroupPlugin,
    Plugin,
    PostFilterPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from batchsched.objects.documents import load_yaml_file
from batchsched.objects.numbers import INT32_MAX, NumberError, integer, number
from batchsched.plugins.args import ArgsError, ConfigError, check_known_keys
from batchsched.plugins.registry import DEFAULT_PLUGINS, EXTENSION_POINTS, REGISTRY

API_VERSION = "kubescheduler.config.k8s.io/v1"
DEFAULT_SCHEDULER_NAME = "batchsched"

_TOP_LEVEL = (
    "apiVersion",
    "kind",
    "profiles",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "leaderElection",
    "clientConnection",
    "parallelism",
    "percentageOfNodesToScore",
    "healthzBindAddress",
    "metricsBindAddress",
    "enableProfiling",
    "enableContentionProfiling",
)

_POINT_TYPES: dict[str, type[Plugin]] = {
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": GroupPlugin,
}


@dataclass
class Profile:
    scheduler_name: str
    plugins: dict[str, list[tuple[str, int]]]  # extension point -> [(plugin name, weight)]
    plugin_args: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def instantiate(self) -> dict[str, Plugin]:
        """One instance per plugin name, shared across the points it is enabled at."""
        instances: dict[str, Plugin] = {}
        for point, entries in self.plugins.items():
            for name, _ in entries:
                if name not in instances:
                    instances[name] = REGISTRY[name](self.plugin_args.get(name))
                plugin = instances[name]
                expected = _POINT_TYPES.get(point)
                if expected is not None and not isinstance(plugin, expected):
                    raise ConfigError(
                        f"profile {self.scheduler_name}: plugin {name} does not implement "
                        f"the {point} extension point"
                    )
        for name, args in self.plugin_args.items():
            if name not in instances:
                REGISTRY[name](args)  # validate args even for plugins not enabled
        return instances


@dataclass
class SchedulerConfig:
    profiles: list[Profile]
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    leader_election: Mapping[str, Any] = field(default_factory=dict)
    client_connection: Mapping[str, Any] = field(default_factory=dict)

    def profile(self, scheduler_name: str) -> Profile | None:
        for profile in self.profiles:
            if profile.scheduler_name == scheduler_name:
                return profile
        return None

    @property
    def scheduler_names(self) -> list[str]:
        return [p.scheduler_name for p in self.profiles]


def default_profile(name: str = DEFAULT_SCHEDULER_NAME) -> Profile:
    return Profile(scheduler_name=name, plugins={k: list(v) for k, v in DEFAULT_PLUGINS.items()})


def default_config() -> SchedulerConfig:
    return SchedulerConfig(profiles=[default_profile()])


def _names(raw: Any, where: str, with_weight: bool) -> list[tuple[str, int]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: must be a list of {{name: ...}}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ConfigError(f"{where}[{i}]: must be a mapping with a name")
        check_known_keys(item, ("name", "weight"), f"{where}[{i}]")
        name = item["name"]
        if name != "*" and name not in REGISTRY:
            raise ConfigError(
                f"{where}[{i}]: unknown plugin {name!r} (known: {', '.join(sorted(REGISTRY))})"
            )
        try:
            weight = integer(item.get("weight", 1 if with_weight else 0), 0, INT32_MAX)
        except NumberError as err:
            raise ConfigError(f"{where}[{i}].weight: {err}") from None
        out.append((name, weight))
    return out


def _apply_plugin_set(
    plugins: dict[str, list[tuple[str, int]]], point: str, raw: Any, where: str
) -> None:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping with enabled/disabled")
    check_known_keys(raw, ("enabled", "disabled"), where)
    disabled = {n for n, _ in _names(raw.get("disabled"), f"{where}.disabled", False)}
    enabled = _names(raw.get("enabled"), f"{where}.enabled", point == "score")
    points = EXTENSION_POINTS if point == "multiPoint" else (point,)
    for p in points:
        current = plugins[p]
        if "*" in disabled:
            current = []
        current = [(n, w) for n, w in current if n not in disabled]
        for name, weight in enabled:
            if point == "multiPoint" and not _implements(name, p):
                continue
            current = [(n, w) for n, w in current if n != name]
            current.append((name, weight if p == "score" else 0))
        plugins[p] = current


def _implements(name: str, point: str) -> bool:
    expected = _POINT_TYPES.get(point)
    if expected is None:
        return False
    try:
        plugin = REGISTRY[name](None)
    except ConfigError:
        return False
    return isinstance(plugin, expected)


def _profile(raw: Any, i: int) -> Profile:
    where = f"profiles[{i}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping")
    check_known_keys(raw, ("schedulerName", "plugins", "pluginConfig"), where)
    name = raw.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.schedulerName: must be a non-empty string")
    profile = default_profile(name)
    plugins_raw = raw.get("plugins") or {}
    if not isinstance(plugins_raw, Mapping):
        raise ConfigError(f"{where}.plugins: must be a mapping of extension points")
    # multiPoint first, then the specific points override it, as kube-scheduler does.
    for point in sorted(plugins_raw, key=lambda p: p != "multiPoint"):
        if point not in EXTENSION_POINTS and point != "multiPoint":
            allowed = ", ".join(("multiPoint", *EXTENSION_POINTS))
            raise ConfigError(
                f"{where}.plugins.{point}: unknown extension point (known: {allowed})"
            )
        _apply_plugin_set(profile.plugins, point, plugins_raw[point], f"{where}.plugins.{point}")
    if len(profile.plugins["queueSort"]) != 1:
        raise ConfigError(f"{where}.plugins.queueSort: exactly one plugin must be enabled")
    plugin_config = raw.get("pluginConfig") or []
    if not isinstance(plugin_config, list):
        raise ConfigError(f"{where}.pluginConfig: must be a list of {{name, args}}")
    entries: dict[str, int] = {}  # plugin -> its pluginConfig entry, which errors name
    for j, item in enumerate(plugin_config):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ConfigError(f"{where}.pluginConfig[{j}]: must be a mapping with a name")
        check_known_keys(item, ("name", "args"), f"{where}.pluginConfig[{j}]")
        pname = item["name"]
        if pname not in REGISTRY:
            raise ConfigError(
                f"{where}.pluginConfig[{j}]: unknown plugin {pname!r} "
                f"(known: {', '.join(sorted(REGISTRY))})"
            )
        args = item.get("args")
        if args is None:
            args = {}
        elif not isinstance(args, Mapping):  # `[]`, `0` or `""` are no more a mapping
            raise ConfigError(f"{where}.pluginConfig[{j}].args: must be a mapping")
        profile.plugin_args[pname] = args
        entries[pname] = j
    try:
        profile.instantiate()
    except ArgsError as err:
        entry = entries.get(err.plugin)
        if entry is None:
            raise ConfigError(f"{where}: {err}") from None
        raise err.located(f"{where}.pluginConfig[{entry}]") from None
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    return profile


def _check_common_queue_sort(profiles: list[Profile]) -> None:
    """One scheduling queue serves every profile, so all must sort it alike (upstream
    refuses a config whose profiles differ in their queueSort plugin or its args)."""
    first = profiles[0]
    sorter = first.plugins["queueSort"][0][0]
    for i, profile in enumerate(profiles[1:], start=1):
        other = profile.plugins["queueSort"][0][0]
        if other != sorter:
            raise ConfigError(
                f"profiles[{i}].plugins.queueSort: {other} differs from profiles[0]'s "
                f"{sorter}; all profiles must use the same queueSort plugin"
            )
        if profile.plugin_args.get(sorter) != first.plugin_args.get(sorter):
            raise ConfigError(
                f"profiles[{i}].pluginConfig: {sorter}'s args differ from profiles[0]'s; "
                "the queueSort plugin must have the same args in all profiles"
            )


# Backoffs longer than a day would never be waited for; the bound keeps time arithmetic finite.
_MAX_BACKOFF_SECONDS = 86_400.0


def _seconds(raw: Mapping[str, Any], key: str, default: float) -> float:
    try:
        return number(raw.get(key, default), 0.0, _MAX_BACKOFF_SECONDS, low_open=True)
    except NumberError as err:
        raise ConfigError(f"{key}: {err}") from None


def parse_config(raw: Any, source: str = "config") -> SchedulerConfig:
    try:
        return _parse_config(raw)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None


def _parse_config(raw: Any) -> SchedulerConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a KubeSchedulerConfiguration mapping")
    if raw.get("kind", "KubeSchedulerConfiguration") != "KubeSchedulerConfiguration":
        raise ConfigError(f"kind: must be KubeSchedulerConfiguration, got {raw.get('kind')!r}")
    if raw.get("apiVersion", API_VERSION) != API_VERSION:
        raise ConfigError(f"apiVersion: must be {API_VERSION}, got {raw.get('apiVersion')!r}")
    check_known_keys(raw, _TOP_LEVEL)
    profiles_raw = raw.get("profiles")
    if profiles_raw is None:
        profiles = [default_profile()]
    elif not isinstance(profiles_raw, list) or not profiles_raw:
        raise ConfigError("profiles: must be a non-empty list")
    else:
        profiles = [_profile(p, i) for i, p in enumerate(profiles_raw)]
    names = [p.scheduler_name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(f"profiles: schedulerName must be unique, got {names}")
    _check_common_queue_sort(profiles)
    initial = _seconds(raw, "podInitialBackoffSeconds", 1.0)
    maximum = _seconds(raw, "podMaxBackoffSeconds", 10.0)
    if maximum < initial:
        raise ConfigError("podMaxBackoffSeconds: must be at least podInitialBackoffSeconds")
    for key in ("leaderElection", "clientConnection"):
        if key in raw and not isinstance(raw[key], Mapping):
            raise ConfigError(f"{key}: must be a mapping")
    return SchedulerConfig(
        profiles=profiles,
        pod_initial_backoff_seconds=initial,
        pod_max_backoff_seconds=maximum,
        leader_election=raw.get("leaderElection") or {},
        client_connection=raw.get("clientConnection") or {},
    )


def load_config(path: Path | None) -> SchedulerConfig:
    if path is None:
        return default_config()
    return parse_config(load_yaml_file(path), str(path))
