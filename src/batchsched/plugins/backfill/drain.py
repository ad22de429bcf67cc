"""Where other pods go: Backfill's score (docs/backfill.md, "Where other pods go: nodes about
to empty are left to empty").

A node's expected free time is the latest expected end of its pods and of the reservations
holding room there (never if one of them states no runtime; already, with neither). A pod
scores a node by how much of its own stay, from now for its stated runtime, that node is
busy anyway, in tenths: 100 where the pod ends by the node's free time (it does not push it
back), 0 on a node that is free already or would be by the time the pod ends only a tenth
into its stay. So pods go where the nodes stay busy longest, and nodes about to empty are
left to empty, which a waiting gang of whole nodes needs (as Slurm's select plugin packs
jobs rather than spreading them). The plugin scores a pod stating no runtime alike on every
node (it never ends, for planning), so the other scores place it as before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from batchsched.state.reservations import StartReservation

TIERS = 10  # tenths of the pod's stay
MAX_SCORE = 100


def free_at(pods_end: float, held: Sequence[StartReservation], now: float) -> float:
    """The node's expected free time (seconds since the epoch; inf: never, -inf: free now):
    the latest of its pods' expected end `pods_end` and the ends of the reservations `held`
    there (no expected start, or a holder stating no runtime: never; a start that has come
    counts from now, as `room.window` does)."""
    latest = pods_end
    for reservation in held:
        if reservation.start is None or reservation.until is None:
            return math.inf
        late = max(0.0, now - reservation.start.timestamp())
        latest = max(latest, reservation.until.timestamp() + late)
    return latest


def drain_score(free: float, now: float, bound: float) -> tuple[int, float]:
    """The pod's score on a node expected to be free at `free`, for a pod staying `bound`
    seconds from `now` (inf: it states no runtime); and the time before which that score
    holds as the clock moves (inf: for good), the node's pods unchanged."""
    if math.isinf(free) and free > 0:
        return MAX_SCORE, math.inf  # busy for good: nothing is pushed back
    ahead = free - now
    if math.isinf(bound) or ahead <= 0:
        return 0, math.inf  # it pushes the node's free time back for good, or by all of it
    tenths = min(TIERS, math.floor(TIERS * ahead / bound))
    if tenths == 0:
        return 0, math.inf
    # The node stays busy for `tenths` tenths of the stay up to free - tenths * bound / 10
    # inclusive: the score holds at every time before the next float.
    return tenths * (MAX_SCORE // TIERS), math.nextafter(free - tenths * bound / TIERS, math.inf)
