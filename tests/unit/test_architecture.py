"""The layout shows the architecture: the core never imports the worlds, nor does I/O."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "batchsched"
WORLDS = ("batchsched.sim", "batchsched.live", "batchsched.oneshot", "batchsched.cli")
CORE = [
    *sorted((SRC / "objects").glob("*.py")),
    *sorted((SRC / "state").glob("*.py")),
    *sorted((SRC / "plugins").rglob("*.py")),
    SRC / "scheduler.py",
    SRC / "framework.py",
    SRC / "decisions.py",
    SRC / "config.py",
]
# Reading a config or manifest file is the loaders' job; everything else in the core is pure.
FILE_READERS = {SRC / "config.py", SRC / "objects" / "load.py", SRC / "objects" / "documents.py"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_never_imports_a_world() -> None:
    for path in CORE:
        for module in imported_modules(path):
            assert not module.startswith(WORLDS), f"{path.name} imports {module}"


def test_core_never_reads_the_clock_or_the_network() -> None:
    for path in CORE:
        modules = imported_modules(path)
        assert not modules & {"time", "socket", "http", "urllib", "threading", "asyncio"}, path
        source = path.read_text()
        assert "datetime.now(" not in source and ".utcnow(" not in source, path
        if path not in FILE_READERS:
            assert "open(" not in source and "read_text(" not in source, path
