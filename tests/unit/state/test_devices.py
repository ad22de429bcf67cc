"""Live mode's assumed allocations: kept while the informer lags behind our PreBind write,
given back when the pod's bind fails (state/devices.py)."""

from __future__ import annotations

from dataclasses import replace

from batchsched.objects.dra import AllocatedDevice, Allocation, ResourceClaim
from batchsched.state.devices import DeviceState

GPU = AllocatedDevice("gpu", "gpu.example.com", "n1", "gpu-0")


def _live(*claims: ResourceClaim) -> DeviceState:
    devices = DeviceState(live=True)
    for claim in claims:
        devices.upsert_claim(claim)
    return devices


def test_a_stale_report_keeps_the_assumed_allocation_until_one_shows_it() -> None:
    reported = ResourceClaim("ml", "c", ())
    devices = _live(reported)
    devices.allocate(reported, Allocation((GPU,), ()), "p", "n1")
    assert devices.in_use() == {GPU.id}
    # A report from before our write (another field changed): still allocated.
    devices.upsert_claim(replace(reported, reserved_for=("other",)))
    assert devices.claims["ml/c"].allocation == Allocation((GPU,), ())
    assert devices.claims["ml/c"].reserved_for == ("other", "p")
    assert devices.in_use() == {GPU.id}
    # Our write seen: the report rules from now on, also over a later revert.
    written = replace(reported, allocation=Allocation((GPU,), ()), reserved_for=("p",))
    devices.upsert_claim(written)
    assert not devices.revert("ml/p")
    assert devices.claims["ml/c"] == written
    # Deallocated later (the pod finished): the devices come free.
    devices.upsert_claim(reported)
    assert devices.in_use() == set()


def test_a_failed_bind_gives_the_devices_back() -> None:
    reported = ResourceClaim("ml", "c", ())
    devices = _live(reported)
    devices.allocate(reported, Allocation((GPU,), ()), "p", "n1")
    epoch = devices.epoch
    assert devices.revert("ml/p")
    assert devices.claims["ml/c"] == reported
    assert devices.in_use() == set()
    assert devices.epoch > epoch  # kept verdicts are refreshed
    assert not devices.revert("ml/p")


def test_a_confirmed_pod_keeps_its_assumption_until_the_claim_is_reported() -> None:
    reported = ResourceClaim("ml", "c", ())
    devices = _live(reported)
    devices.allocate(reported, Allocation((GPU,), ()), "p", "n1")
    devices.confirm("ml/p")  # the pod is reported bound before the claim's update arrives
    devices.upsert_claim(reported)
    assert devices.in_use() == {GPU.id}
    assert not devices.revert("ml/p")


def test_one_shot_records_allocations_and_assumes_nothing() -> None:
    reported = ResourceClaim("ml", "c", ())
    devices = DeviceState()
    devices.upsert_claim(reported)
    devices.allocate(reported, Allocation((GPU,), ()), "p", "n1")
    assert devices.allocated_here == ["ml/c"]
    assert not devices.revert("ml/p")
    devices.upsert_claim(reported)
    assert devices.in_use() == set()


def test_a_claim_for_extended_resources_is_assumed_until_the_created_one_is_reported() -> None:
    devices = _live()
    in_memory = ResourceClaim("ml", "p-extended-resources", ())
    devices.allocate(in_memory, Allocation((GPU,), ()), "p", "n1")
    assert devices.in_use() == {GPU.id}
    created = ResourceClaim("ml", "p-extended-resources-x7k2q", (), extended_for="p")
    devices.upsert_claim(created)  # created, not yet allocated: the assumption stands
    assert "ml/p-extended-resources" in devices.claims
    devices.upsert_claim(replace(created, allocation=Allocation((GPU,), ())))
    assert "ml/p-extended-resources" not in devices.claims
    assert devices.in_use() == {GPU.id}
    assert not devices.revert("ml/p")


def test_a_failed_bind_forgets_the_claim_made_in_memory() -> None:
    devices = _live()
    devices.allocate(
        ResourceClaim("ml", "p-extended-resources", ()), Allocation((GPU,), ()), "p", "n1"
    )
    assert devices.revert("ml/p")
    assert devices.claims == {}
    assert devices.in_use() == set()


def test_unreserve_also_ends_the_assumption() -> None:
    reported = ResourceClaim("ml", "c", ())
    devices = _live(reported)
    devices.allocate(reported, Allocation((GPU,), ()), "p", "n1")
    devices.restore({"ml/c": reported}, 0, "n1")  # a later Reserve plugin raised
    devices.upsert_claim(replace(reported, reserved_for=("other",)))
    assert devices.claims["ml/c"].allocation is None
    assert devices.in_use() == set()
