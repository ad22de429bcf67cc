"""Leader election: one replica acts, a standby takes over, a leader that cannot renew stops."""

from __future__ import annotations

from batchsched.config import parse_config
from batchsched.live.settings import LiveSettings
from tests.live.conftest import FAST_LEASE, Launcher, node, node_of, pod
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/batchsched"


def _config():  # type: ignore[no-untyped-def]
    return parse_config({"leaderElection": FAST_LEASE})


# FAST_LEASE's, in seconds of the launcher's clock.
_SETTINGS = LiveSettings.from_config(_config()).leader_election
LEASE_DURATION, RENEW_DEADLINE = _SETTINGS.lease_duration, _SETTINGS.renew_deadline


def _holder(api: FakeApiServer) -> str:
    lease = api.get("leases", "batchsched", "kube-system")
    return "" if lease is None else str(lease["spec"].get("holderIdentity", ""))


def _reporters(api: FakeApiServer) -> set[str]:
    return {e["reportingInstance"] for e in api.objects("events") if e["reason"] == "Scheduled"}


def test_standby_takes_over_when_the_leader_stops(api: FakeApiServer, launch: Launcher) -> None:
    api.create("nodes", node("n1"))
    a = launch(_config(), identity="a")
    assert api.wait_for(lambda s: _holder(s) == "a")
    b = launch(_config(), identity="b")
    api.create("pods", pod("first"))
    assert api.wait_for(lambda s: node_of(s, "first") != "")
    assert b.scheduler.synced.wait(WAIT_SECONDS) and b.scheduler.ready()
    assert not b.scheduler.is_leading()
    assert a.halt() == 0  # releases the lease
    assert api.wait_for(lambda s: _holder(s) == "b")
    api.create("pods", pod("second"))
    assert api.wait_for(lambda s: node_of(s, "second") != "")
    assert api.wait_for(lambda s: _reporters(s) == {"a", "b"})


def test_standby_waits_out_the_lease_of_a_crashed_leader(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1"))
    a = launch(_config(), identity="a")
    assert api.wait_for(lambda s: _holder(s) == "a")
    elector = a.scheduler.elector
    assert elector is not None
    elector._release = lambda: None  # type: ignore[method-assign]  # a crash releases nothing
    a.halt()
    b = launch(_config(), identity="b")
    api.create("pods", pod("p"))
    standby = b.scheduler.elector
    assert standby is not None
    # It has seen a's lease (by its clock, just renewed): it waits, whatever the machine's
    # speed, until the lease duration has passed on its clock.
    assert api.wait_for(lambda s: standby._observed is not None and b.scheduler.synced.is_set())
    assert not b.scheduler.is_leading() and node_of(api, "p") == ""
    launch.clock.advance(LEASE_DURATION)
    assert api.wait_for(lambda s: node_of(s, "p") != "")
    assert api.wait_for(lambda s: _reporters(s) == {"b"})
    lease = api.get("leases", "batchsched", "kube-system")
    assert lease is not None and lease["spec"]["leaseTransitions"] == 2


def test_a_leader_that_cannot_renew_stops_acting_and_exits(
    api: FakeApiServer, launch: Launcher
) -> None:
    api.create("nodes", node("n1", cpu="100"))
    a = launch(_config(), identity="a")
    assert api.wait_for(lambda s: a.scheduler.is_leading())
    api.inject(500, count=10_000, path=LEASE)
    assert api.wait_for(lambda s: not a.scheduler.is_leading())  # a failed renewal: paused
    api.create("pods", pod("during-outage"))
    assert a.result == []  # within the renew deadline it may still recover
    launch.clock.advance(RENEW_DEADLINE)
    assert api.wait_for(lambda s: bool(a.result))
    assert a.result == [1]
    assert not a.scheduler.ready()
    assert node_of(api, "during-outage") == ""
    api.faults.clear()
    b = launch(_config(), identity="b")
    standby = b.scheduler.elector
    assert standby is not None
    assert api.wait_for(lambda s: standby._observed is not None)
    launch.clock.advance(LEASE_DURATION)  # a's last renewal is that old on b's clock
    assert api.wait_for(lambda s: node_of(s, "during-outage") != "")
    assert api.wait_for(lambda s: _reporters(s) == {"b"})
