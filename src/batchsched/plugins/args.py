"""Reading a plugin's `pluginConfig` args with errors that say what is allowed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from batchsched.objects.errors import InputError, shown
from batchsched.objects.numbers import INT32_MAX, NumberError, integer, number

T = TypeVar("T")


class ConfigError(InputError):
    pass


class ArgsError(ConfigError):
    """A plugin's args are wrong at `field` (a path below `args`; "": the args as a whole).
    Read alone it names the plugin; the configuration's reader names where its args are
    (`located`: `profiles[i].pluginConfig[j]`), as every error of a file names its place."""

    def __init__(self, plugin: str, field: str, what: str) -> None:
        self.plugin, self.field, self.what = plugin, field, what
        super().__init__(f"pluginConfig {plugin} {self._path()}: {what}")

    def _path(self) -> str:
        return f"args.{self.field}" if self.field else "args"

    def located(self, where: str) -> ConfigError:
        return ConfigError(f"{where}.{self._path()}: {self.what}")


def check_known_keys(raw: Mapping[str, Any], known: tuple[str, ...], where: str = "") -> None:
    """A key that is not known is an error listing the known ones: a typo never passes."""
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}unknown keys {unknown} (known: {', '.join(known)})")


class ArgsReader:
    """Typed access to one plugin's args (or to a mapping `within` them, such as
    NodeResourcesFit's `scoringStrategy`); unknown keys are an error listing the known ones."""

    def __init__(
        self,
        plugin: str,
        args: Mapping[str, Any] | None,
        allowed: tuple[str, ...],
        within: str = "",
    ):
        self.plugin = plugin
        self.within = within
        self.args: Mapping[str, Any] = args or {}
        if not isinstance(self.args, Mapping):
            raise self.fail("", f"args must be a mapping, got {shown(args)}")
        for key in self.args:
            if key in ("kind", "apiVersion"):
                continue
            if key not in allowed:
                known = ", ".join(allowed) if allowed else "none"
                raise self.fail(key, f"unknown argument (known: {known})")

    def fail(self, key: str, what: str) -> ArgsError:
        field = ".".join(p for p in (self.within, key) if p)
        return ArgsError(self.plugin, field, what)

    def get(self, key: str, expected: type[T], default: T) -> T:
        """A value of one type; numbers are read by `int_in` and `number_from`."""
        value = self.args.get(key, default)
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
        return self.integer_at(key, self.args.get(key, default), low, high)

    def integer_at(self, field: str, value: object, low: int, high: int = INT32_MAX) -> int:
        """`value`, at `field` of the args (a key, or a path such as `resources[0].weight`), as
        an integer in [low, high]; a bool or a string is told as a value out of range is, in
        the one wording of objects/numbers.py, whatever the plugin."""
        try:
            return integer(value, low, high)
        except NumberError as err:
            raise self.fail(field, str(err)) from None

    def number_from(self, key: str, default: float, low: float) -> float:
        """A finite number argument of at least `low`, told as `integer_at` tells integers."""
        try:
            return number(self.args.get(key, default), low)
        except NumberError as err:
            raise self.fail(key, str(err)) from None
