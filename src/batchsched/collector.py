"""The cycle collector's pace while a one-shot run or a simulation works on a big cluster.

Both keep a great many long-lived objects (nodes, pods, their records, jobs) and allocate
fast; at Python's default pace (700, 10, 10) the collector walks them again and again, and
the oldest generation's walks grow with the cluster as well as with the work: about 15% of
TraceReplay/philly, and 0.47 s of the 5000-node contended run against 0.03 s at 1000 nodes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between two collections of the youngest generation, and collections of each
# generation between two of the next.
_COLLECTION_THRESHOLDS = (100_000, 50, 100)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the cycle collector less often. Memory is still freed by reference counting as
    before; only cycles wait a little longer. Thresholds already higher are kept."""
    thresholds = gc.get_threshold()
    gc.set_threshold(
        *(max(now, less) for now, less in zip(thresholds, _COLLECTION_THRESHOLDS, strict=True))
    )
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
