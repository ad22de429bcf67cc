"""Reading a plugin's `pluginConfig` args with errors that say what is allowed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from batchsched.objects.errors import InputError, shown
from batchsched.objects.numbers import INT32_MAX, NumberError, integer

T = TypeVar("T")


class ConfigError(InputError):
    pass


def check_known_keys(raw: Mapping[str, Any], known: tuple[str, ...], where: str = "") -> None:
    """A key that is not known is an error listing the known ones: a typo never passes."""
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}unknown keys {unknown} (known: {', '.join(known)})")


class ArgsReader:
    """Typed access to one plugin's args; unknown keys are an error listing the known ones."""

    def __init__(self, plugin: str, args: Mapping[str, Any] | None, allowed: tuple[str, ...]):
        self.plugin = plugin
        self.args: Mapping[str, Any] = args or {}
        if not isinstance(self.args, Mapping):
            raise self.fail("", f"args must be a mapping, got {shown(args)}")
        for key in self.args:
            if key in ("kind", "apiVersion"):
                continue
            if key not in allowed:
                known = ", ".join(allowed) if allowed else "none"
                raise self.fail(key, f"unknown argument (known: {known})")

    def fail(self, key: str, what: str) -> ConfigError:
        where = f"pluginConfig {self.plugin}" + (f" args.{key}" if key else "")
        return ConfigError(f"{where}: {what}")

    def get(self, key: str, expected: type[T], default: T) -> T:
        value = self.args.get(key, default)
        if expected is int and isinstance(value, bool):
            raise self.fail(key, f"must be an integer, got {shown(value)}")
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected):
            raise self.fail(key, f"must be of type {expected.__name__}, got {shown(value)}")
        return value

    def strings(self, key: str) -> list[str]:
        """A list of strings (empty when absent): kube-scheduler decodes it into a Go []string,
        which refuses a number or an object rather than reading its text."""
        values = self.get(key, list, [])
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise self.fail(f"{key}[{i}]", f"must be a string, got {shown(value)}")
        return values

    def int_in(self, key: str, default: int, low: int, high: int = INT32_MAX) -> int:
        """An integer argument; upstream's are int32 unless they say otherwise."""
        try:
            return integer(self.get(key, int, default), low, high)
        except NumberError as err:
            raise self.fail(key, str(err)) from None
