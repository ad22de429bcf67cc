"""A pod deleted leaves nothing behind in the scheduler (issue 32, point 14).

Pods of every kind the scheduler keeps something for come and go while it schedules them:
plain pods, gang members with their PodGroup, pods with a ResourceClaim of their own,
high-priority pods that preempt others, and pods that never fit. The world applies each pass's
decisions as a cluster would (binds reported back, victims deleted) through the readers the
live loop uses. Once every pod is gone, the scheduler holds nothing that names one of them,
and every container of its state, queue and plugins is as long as in a scheduler that only
ever saw the empty cluster.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.churn import MARKER, job, play, world
from tests.leftovers import holders, outside_snapshots, sizes

# The state's, the queue's and the scheduler's own containers are compared by length; these
# among them are not kept per pod.
PER_POD = ("Scheduler.state", "Scheduler.queue", "Scheduler.messages", "Scheduler.twins")
NOT_PER_POD = (
    "Scheduler.queue.incoming",  # counts by event
    "Scheduler.state.nodes._changed_rows",  # the log of node rows changed: numbers, at most 65,536
    "Scheduler.state.pods._demand_of",  # demands by request set, at most 4096
    "Scheduler.state._requests_by_name",  # requests by name per demand, at most 4096
    "Scheduler.state.devices._index",  # the index of ResourceSlices, made when first asked
)


jobs = st.lists(
    st.tuples(
        st.sampled_from(["plain", "gang", "claimed", "urgent", "huge"]),
        st.integers(0, 5),  # created before this pass
        st.integers(0, 3),  # passes it lasts
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(jobs)
def test_deleted_pods_leave_nothing_behind(drawn: list[tuple[str, int, int]]) -> None:
    churned = world()
    play(churned, [job(kind, n, start, lasts) for n, (kind, start, lasts) in enumerate(drawn)])
    assert churned.state.pods.by_key == {}

    baseline = world()
    baseline.run_pass(0)

    named: set[str] = set()
    assert outside_snapshots(holders(churned.scheduler, MARKER, named)) == {}
    # What snapshots keep is bounded by the pods the cluster held at once.
    pods = {key.partition("/")[2] for kind, key in churned.created if kind == "Pod"}
    assert len(pods & {s.partition("/")[2] or s for s in named}) <= churned.most_pods

    grown = sizes(churned.scheduler)
    empty = sizes(baseline.scheduler)
    differ = {
        path: (n, empty.get(path))
        for path, n in grown.items()
        if n != empty.get(path, 0) and path.startswith(PER_POD) and not path.startswith(NOT_PER_POD)
    }
    assert differ == {}
