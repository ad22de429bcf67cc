"""Informers: list then watch, resume, re-list on 410, absent CRDs, bad objects."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pytest

from batchsched.live.facts import Fact, Remove, Upsert, Wakeup
from batchsched.live.informer import Informer
from batchsched.live.kinds import KINDS, Kind
from batchsched.live.malformed import Malformed
from tests.live.conftest import client_for, node, pod
from tests.live.fake_apiserver import WAIT_SECONDS, FakeApiServer

NODES = next(k for k in KINDS if k.name == "Node")
PODS = next(k for k in KINDS if k.name == "Pod")
GROUPS = next(k for k in KINDS if k.name == "PodGroup")


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    # No built-in kubelet: each node created is one event here, as these tests count them.
    server = FakeApiServer(bookmark_interval=0.2, kubelet=False).start()
    yield server
    server.stop()


@pytest.fixture
def sink() -> queue.Queue[Fact]:
    return queue.Queue()


@pytest.fixture
def start(api: FakeApiServer, sink: queue.Queue[Fact]) -> Iterator[object]:
    started: list[Informer] = []

    def make(kind: Kind) -> Informer:
        informer = Informer(client_for(api), kind, sink, watch_timeout=5, initial_backoff=0.01)
        informer.start()
        assert informer.synced.wait(WAIT_SECONDS)
        started.append(informer)
        return informer

    yield make
    for informer in started:
        informer.stop()
        informer.join(WAIT_SECONDS)


def take(sink: queue.Queue[Fact], n: int) -> list[Fact]:
    """The next `n` facts about objects (the Wakeup after the first list aside)."""
    facts: list[Fact] = []
    while len(facts) < n:
        fact = sink.get(timeout=WAIT_SECONDS)
        if not isinstance(fact, Wakeup):
            facts.append(fact)
    return facts


def test_the_first_list_wakes_the_loop_after_its_objects(
    api: FakeApiServer, sink: queue.Queue[Fact], start: Any
) -> None:
    api.create("nodes", node("a"))
    informer = start(NODES)
    first, second = sink.get(timeout=WAIT_SECONDS), sink.get(timeout=WAIT_SECONDS)
    assert isinstance(first, Upsert) and isinstance(second, Wakeup)
    api.compact()  # a re-list: the loop is running by then, no wake-up
    api.create("nodes", node("b"))
    assert api.wait_for(lambda s: informer.lists == 2)
    assert not any(isinstance(f, Wakeup) for f in take(sink, 1) + list(sink.queue))


def names(facts: list[Fact]) -> list[str]:
    out = []
    for fact in facts:
        if isinstance(fact, Upsert):
            out.append(f"+{getattr(fact.record, 'name', '')}")
        elif isinstance(fact, Remove):
            out.append(f"-{fact.key}")
    return out


def test_list_then_watch_reports_adds_changes_and_deletes(api, sink, start) -> None:
    api.create("nodes", node("a"))
    start(NODES)
    assert names(take(sink, 1)) == ["+a"]
    api.create("nodes", node("b"))
    changed = node("a", cpu="8")
    changed["metadata"]["resourceVersion"] = ""
    api.update("nodes", changed)
    api.delete("nodes", "b")
    facts = take(sink, 3)
    assert names(facts) == ["+b", "+a", "-b"]
    assert isinstance(facts[1], Upsert)
    assert facts[1].record.allocatable["cpu"] == 8000  # type: ignore[union-attr]


def test_dropped_watch_resumes_without_relisting(api, sink, start) -> None:
    informer = start(NODES)
    api.create("nodes", node("a"))
    assert names(take(sink, 1)) == ["+a"]
    api.drop_watches()
    api.create("nodes", node("b"))
    assert names(take(sink, 1)) == ["+b"]
    assert informer.lists == 1


def test_410_relists_and_notices_objects_deleted_in_the_gap(api, sink, start) -> None:
    api.create("nodes", node("a"))
    api.create("nodes", node("b"))
    informer = start(NODES)
    assert sorted(names(take(sink, 2))) == ["+a", "+b"]
    # b goes while the history that recorded its deletion is compacted away.
    api.vanish("nodes", "b")
    assert names(take(sink, 1)) == ["-b"]
    assert informer.lists == 2
    # Unchanged objects are not reported again by the re-list; watching goes on.
    api.create("nodes", node("c"))
    assert names(take(sink, 1)) == ["+c"]
    assert sink.empty()


def test_a_list_started_over_forgets_what_only_its_void_pages_had(
    api: FakeApiServer, sink: queue.Queue[Fact], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b", "c"):
        api.create("nodes", node(name))
    client = client_for(api)
    real = client.json
    calls: list[object] = []

    def json_then_delete(method: str, path: str, **kwargs: Any) -> Any:
        out = real(method, path, **kwargs)
        query = kwargs.get("query")
        if query is not None and "resourceVersion" not in query and not calls:
            # After the re-list's first page (a, b), a goes and the page's snapshot is
            # compacted away: the list starts over in one page, and its watch starts after
            # a's deletion.
            api.delete("nodes", "a")
            api.compact()
        if query is None or "resourceVersion" not in query:
            calls.append(query)
        return out

    monkeypatch.setattr(client, "json", json_then_delete)
    informer = Informer(client, NODES, sink, watch_timeout=5, page_size=2)
    informer.start()
    try:
        assert informer.synced.wait(WAIT_SECONDS)
        # The first list: what the watch cache has, in one response whatever the limit.
        assert names(take(sink, 3)) == ["+a", "+b", "+c"]
        assert calls == []
        api.compact()  # the watch falls behind: a re-list of the latest version, in pages
        assert names(take(sink, 1)) == ["-a"]
        assert calls[0] == {"limit": "2"} and calls[-1] is None  # the unpaginated list
    finally:
        informer.stop()
        informer.join(WAIT_SECONDS)


def test_list_errors_back_off_and_recover(api, sink, start) -> None:
    api.create("nodes", node("a"))
    # The client retries 5 times itself; 8 failures make the informer back off too.
    api.inject(503, count=8, method="GET", path="/api/v1/nodes")
    start(NODES)
    assert names(take(sink, 1)) == ["+a"]
    assert not api.faults


def test_absent_crd_counts_as_empty(api, sink, start) -> None:
    api.missing.add("podgroups")
    informer = start(GROUPS)
    assert informer.synced.is_set()
    assert sink.empty()


def test_a_malformed_object_is_skipped_and_the_rest_flows(api, sink, start, caplog) -> None:
    bad = pod("bad")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    api.create("pods", bad)
    api.create("pods", pod("good"))
    start(PODS)
    facts = take(sink, 2)
    assert names(facts) == ["+good"]
    [report] = [f for f in facts if isinstance(f, Malformed)]
    assert (report.kind, report.key, report.waiting_for) == ("Pod", "default/bad", "batchsched")
    assert report.message.startswith(
        "spec.containers[0].resources.requests.cpu: 'lots' is not a quantity"
    )
    assert "Pod default/bad" in caplog.text
    assert "'lots' is not a quantity" in caplog.text


def test_a_malformed_object_is_reported_once_per_version(api, sink, start) -> None:
    api.create("nodes", node("bad", cpu="1e20"))
    api.create("nodes", node("b"))
    informer = start(NODES)
    assert sorted(type(f).__name__ for f in take(sink, 2)) == ["Malformed", "Upsert"]
    # A re-list reads it again but does not report the same version again.
    api.vanish("nodes", "b")
    assert names(take(sink, 1)) == ["-b"]
    assert informer.lists == 2
    assert sink.empty()
    # A new version that is still malformed is reported; a good one is read.
    api.update("nodes", node("bad", cpu="1e30"))
    [report] = take(sink, 1)
    assert isinstance(report, Malformed) and "'1e30' is too large" in report.message
    api.update("nodes", node("bad", cpu="2"))
    assert names(take(sink, 1)) == ["+bad"]


def test_a_malformed_object_deleted_unseen_is_removed_at_the_re_list(api, sink, start) -> None:
    """What was told of it (a PodGroup's members wait naming its bad field) must go with it:
    its DELETED event lost to a compaction, the re-list that misses it says so."""
    bad = {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": -1}}
    api.create("podgroups", bad)
    informer = start(GROUPS)
    [report] = take(sink, 1)
    assert isinstance(report, Malformed) and report.key == "default/g"
    api.vanish("podgroups", "g")
    assert names(take(sink, 1)) == ["-default/g"]
    assert informer.lists == 2


def test_bookmarks_advance_the_resource_version(api, sink, start) -> None:
    informer = start(NODES)
    api.create("pods", pod("elsewhere"))  # moves the global resourceVersion only
    assert api.wait_for(lambda s: informer.resource_version == str(s.rv))


def test_a_crd_removed_while_watching_empties_its_objects(api, sink, start) -> None:
    group = {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    api.create("podgroups", group)
    informer = start(GROUPS)
    assert names(take(sink, 1)) == ["+g"]
    informer.absent_recheck = 0.05
    api.missing.add("podgroups")
    api.drop_watches()
    assert names(take(sink, 1)) == ["-default/g"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cpu", "1e99999999", "'1e99999999' is too large"),
        ("memory", "100000Ei", "'100000Ei' is too large"),
        ("priority", 2**40, "spec.priority: must be at most 2147483647"),
    ],
)
def test_out_of_range_numbers_are_skipped_not_a_crash(
    api, sink, start, caplog, field: str, value: object, message: str
) -> None:
    bad = pod("bad")
    if field == "priority":
        bad["spec"]["priority"] = value
    else:
        bad["spec"]["containers"][0]["resources"]["requests"][field] = value
    api.create("pods", bad)
    api.create("pods", pod("good"))
    start(PODS)
    assert names(take(sink, 2)) == ["+good"]
    assert "Pod default/bad" in caplog.text and message in caplog.text
