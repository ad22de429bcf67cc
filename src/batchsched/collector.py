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


@contextmanager
def kept_to_the_end() -> Iterator[None]:
    """For a run that keeps what it allocates until it ends (a simulation's pods, records,
    events): `fewer_collections`, except that the older generations are never walked during
    it, and at the end its survivors are filed in the oldest generation unwalked.

    The youngest generation is still collected (cycles among new objects are freed), but
    each walk of the middle one scans all the run has kept so far and finds nothing: 0.5 s
    of the whole Philly replay; restoring the default pace at the end would walk it all
    once more. The oldest generation is walked when the interpreter next makes a full
    collection, as for any long-lived object. If something froze objects already
    (gc.freeze), nothing is filed: unfreezing would hand those back too."""
    thresholds = gc.get_threshold()
    frozen = gc.get_freeze_count()
    gc.set_threshold(max(thresholds[0], _COLLECTION_THRESHOLDS[0]), _NEVER, _NEVER)
    try:
        yield
    finally:
        if frozen == 0:
            gc.freeze()  # the young generations, whole, into the permanent one...
            gc.unfreeze()  # ...which goes back as the oldest
        gc.set_threshold(*thresholds)


# A generation's threshold no count reaches in a run.
_NEVER = 2**31 - 1
