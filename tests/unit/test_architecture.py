"""The layout shows the architecture (docs/architecture.md): layers import only downward, the
core never imports a world nor does I/O, and the worlds use plugins through the registry."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "batchsched"

# Lowest first. A module may import its own layer and the layers below it, never above.
# `framework.interface` is the plugin contract, below the plugins; the rest of `framework` runs
# them, above. `framework.signature`, the one definition of pods that schedule alike, sits
# with `state`: the state interns demands by its first level and the queue names its groups
# by its last, and every other user is above (it imports nothing of `state` but types).
# The worlds (commands, sim, live, ui) share the top layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("batchsched.objects",),
    ("batchsched.state", "batchsched.framework.signature"),
    ("batchsched.decisions",),
    ("batchsched.framework.interface",),
    ("batchsched.preemption",),
    ("batchsched.plugins",),
    ("batchsched.config",),
    ("batchsched.framework",),
    ("batchsched.scheduling",),
    ("batchsched.controllers",),
    (
        "batchsched.commands",
        "batchsched.sim",
        "batchsched.live",
        "batchsched.ui",
        "batchsched.collector",
    ),
)
WORLDS = LAYERS[-1]
# What a world may import of the plugins: the registry and their arguments (configuration);
# the rest it reaches through the core's public modules (controllers, scheduling, preemption).
PLUGIN_FACES = {"batchsched.plugins.registry", "batchsched.plugins.args"}
# Reading a config or manifest file is the loaders' job; everything else in the core is pure.
FILE_READERS = {SRC / "config.py", SRC / "objects" / "load.py", SRC / "objects" / "documents.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                candidate = (len(prefix), rank)
                best = candidate if best is None or candidate > best else best
    return None if best is None else best[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "batchsched":
                names.update(f"batchsched.{alias.name}" for alias in node.names)
    return names


SOURCES = sorted(SRC.rglob("*.py"))
CORE = [p for p in SOURCES if layer_of(module_name(p)) not in (None, len(LAYERS) - 1)]


def test_every_module_has_a_layer() -> None:
    top = {"batchsched", "batchsched.__main__"}
    missing = [module_name(p) for p in SOURCES if layer_of(module_name(p)) is None]
    assert set(missing) <= top, missing


def test_layers_import_only_downward() -> None:
    upward = []
    for path in SOURCES:
        own = layer_of(module_name(path))
        if own is None:
            continue
        for module in imported_modules(path):
            other = layer_of(module)
            if other is not None and other > own:
                upward.append(f"{module_name(path)} imports {module}")
    assert not upward, "\n".join(upward)


def test_the_signature_reads_the_state_through_types_only() -> None:
    # At run time it imports only objects, so the state can import it without a cycle.
    path = SRC / "framework" / "signature.py"
    tree = ast.parse(path.read_text(), str(path))
    runtime = [
        node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("batchsched")
    ]
    assert runtime and all(m.startswith("batchsched.objects") for m in runtime), runtime


def test_core_never_imports_a_world() -> None:
    for path in CORE:
        for module in imported_modules(path):
            assert not module.startswith(WORLDS), f"{path.name} imports {module}"


def test_worlds_never_import_plugin_internals() -> None:
    inside = []
    for path in SOURCES:
        if not module_name(path).startswith(WORLDS):
            continue
        for module in imported_modules(path):
            plugin = module == "batchsched.plugins" or module.startswith("batchsched.plugins.")
            if plugin and module not in PLUGIN_FACES:
                inside.append(f"{module_name(path)} imports {module}")
    assert not inside, "\n".join(inside)


def test_core_never_reads_the_clock_or_the_network() -> None:
    for path in CORE:
        modules = imported_modules(path)
        assert not modules & {"time", "socket", "http", "urllib", "threading", "asyncio"}, path
        source = path.read_text()
        assert "datetime.now(" not in source and ".utcnow(" not in source, path
        if path not in FILE_READERS:
            assert "open(" not in source and "read_text(" not in source, path


def test_no_comment_cites_a_file_outside_the_repository() -> None:
    for path in SOURCES:
        assert not re.search(r"\bSPEC\b", path.read_text()), f"{module_name(path)} cites SPEC"


def test_unit_tests_mirror_the_source() -> None:
    units = SRC.parents[1] / "tests" / "unit"
    folders = {p.parent for p in units.rglob("test_*.py")} - {units}
    strays = [
        str(f.relative_to(units)) for f in folders if not (SRC / f.relative_to(units)).is_dir()
    ]
    assert not strays, f"tests/unit folders with no package of that name in src: {strays}"
