"""What the report's plots share: a legend only where a panel drew something to name."""

from __future__ import annotations

from typing import Any


def legend(ax: Any, **options: Any) -> None:
    """The panel's legend, if any line or bar of it has a label (matplotlib warns "No
    artists with labels" otherwise: a class no job of which started, a queue no run has)."""
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(**options)
