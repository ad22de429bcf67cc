"""How every command prints its result: text for people, JSON or YAML for programs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import orjson
import yaml

FORMATS = ("text", "json", "yaml")


def emit(data: Any, fmt: str, text: Callable[[], str]) -> None:
    """Print `data` as JSON or YAML, or the command's text rendering of it."""
    if fmt == "json":
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "yaml":
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(text())
