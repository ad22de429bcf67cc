"""DynamicResources' PreBind writes against the fake API server (live/claims.py)."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.decisions import ClaimReservation, ReserveClaims
from batchsched.live.claims import (
    FINALIZER,
    RESERVED_FOR_LIMIT,
    ClaimWriter,
    Consumer,
    PreBindFailed,
)
from batchsched.objects.dra import AllocatedDevice, Allocation
from batchsched.objects.records import NodeSelectorTerm, Requirement
from tests.live.conftest import client_for
from tests.live.dra_objects import resource_claim
from tests.live.fake_apiserver import FakeApiServer

POD = Consumer("default", "p", "uid-p")
PIN = (NodeSelectorTerm((), (Requirement("metadata.name", "In", ("n1",)),)),)


def _allocation(device: str) -> Allocation:
    return Allocation((AllocatedDevice("gpu", "gpu.example.com", "n1", device),), PIN)


def _status(api: FakeApiServer, name: str) -> dict[str, Any]:
    return dict((api.get("resourceclaims", name) or {}).get("status") or {})


def _writer(api: FakeApiServer) -> ClaimWriter:
    return ClaimWriter(client_for(api), lambda: True)


def test_writes_allocation_and_reservation_and_undoes_them(api: FakeApiServer) -> None:
    api.create("resourceclaims", resource_claim("c"))
    undo = _writer(api).reserve(
        ReserveClaims((ClaimReservation("default/c", _allocation("gpu-0")),)), POD
    )
    claim = api.get("resourceclaims", "c") or {}
    assert claim["metadata"]["finalizers"] == [FINALIZER]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    undo()
    claim = api.get("resourceclaims", "c") or {}
    assert claim["status"] == {}
    assert "finalizers" not in claim["metadata"]


def test_joining_an_allocated_claim_writes_and_undoes_only_the_reservation(
    api: FakeApiServer,
) -> None:
    api.create("resourceclaims", resource_claim("shared"))
    writer = _writer(api)
    other = Consumer("default", "q", "uid-q")
    writer.reserve(
        ReserveClaims((ClaimReservation("default/shared", _allocation("gpu-0")),)), other
    )
    undo = writer.reserve(ReserveClaims((ClaimReservation("default/shared", None),)), POD)
    assert [r["name"] for r in _status(api, "shared")["reservedFor"]] == ["q", "p"]
    undo()
    status = _status(api, "shared")
    assert [r["name"] for r in status["reservedFor"]] == ["q"]
    assert status["allocation"]


def test_a_claim_allocated_meanwhile_fails_the_step_and_undoes_the_others(
    api: FakeApiServer,
) -> None:
    api.create("resourceclaims", resource_claim("a"))
    api.create("resourceclaims", resource_claim("b"))
    writer = _writer(api)
    writer.reserve(
        ReserveClaims((ClaimReservation("default/b", _allocation("gpu-1")),)),
        Consumer("default", "rival", "uid-r"),
    )
    step = ReserveClaims(
        (
            ClaimReservation("default/a", _allocation("gpu-0")),
            ClaimReservation("default/b", _allocation("gpu-2")),
        )
    )
    with pytest.raises(PreBindFailed, match="resourceclaim default/b was allocated meanwhile"):
        writer.reserve(step, POD)
    assert _status(api, "a") == {}
    assert [r["name"] for r in _status(api, "b")["reservedFor"]] == ["rival"]


def test_a_missing_or_deallocated_claim_fails_the_step(api: FakeApiServer) -> None:
    writer = _writer(api)
    with pytest.raises(PreBindFailed, match="resourceclaim default/gone: .*404"):
        writer.reserve(ReserveClaims((ClaimReservation("default/gone", None),)), POD)
    api.create("resourceclaims", resource_claim("freed"))
    with pytest.raises(PreBindFailed, match="no longer allocated"):
        writer.reserve(ReserveClaims((ClaimReservation("default/freed", None),)), POD)


def test_a_full_reserved_for_list_fails_the_step(api: FakeApiServer) -> None:
    claim = resource_claim("busy")
    api.create("resourceclaims", claim)
    writer = _writer(api)
    writer.reserve(
        ReserveClaims((ClaimReservation("default/busy", _allocation("gpu-0")),)),
        Consumer("default", "p0", "u0"),
    )
    full = api.get("resourceclaims", "busy") or {}
    full["status"]["reservedFor"] = [
        {"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(RESERVED_FOR_LIMIT)
    ]
    api.update("resourceclaims", full)
    with pytest.raises(PreBindFailed, match="reservedFor holds 256"):
        writer.reserve(ReserveClaims((ClaimReservation("default/busy", None),)), POD)
