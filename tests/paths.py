"""Where the repository's own files are, for tests wherever they sit in tests/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
