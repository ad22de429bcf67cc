"""Fixtures for the end-to-end tests against a real control plane (testsupport/controlplane.py).

Skipped, with the reason, unless KUBEBUILDER_ASSETS names a folder holding `etcd`,
`kube-apiserver` and `kubectl` (and `openssl` is on PATH). A module needing an API server
with other flags asks `control_plane(("--flag=value",))`: one server per set of flags, shared
by the session.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.cluster import Cluster, FakeKubelet, require
from testsupport.controlplane import ControlPlane, PlaneFactory, assets


def _started(work_factory: pytest.TempPathFactory, extra_flags: tuple[str, ...]) -> ControlPlane:
    plane = ControlPlane(work_factory.mktemp("plane"), extra_flags).start()
    plane.kubelet = FakeKubelet(plane.admin()).start()
    return plane


def _stop(plane: ControlPlane) -> None:
    if plane.kubelet is not None:
        plane.kubelet.stop()
    plane.stop()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlaneFactory]:
    """A running control plane (with a fake kubelet) for a set of extra kube-apiserver flags."""
    require(assets)
    planes: dict[tuple[str, ...], ControlPlane] = {}

    def get(extra_flags: tuple[str, ...] = ()) -> ControlPlane:
        if extra_flags not in planes:
            planes[extra_flags] = _started(tmp_path_factory, extra_flags)
        return planes[extra_flags]

    yield get
    for plane in planes.values():
        _stop(plane)


@pytest.fixture
def own_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlaneFactory]:
    """A control plane of the test's own, for tests that restart or compact it."""
    require(assets)
    planes: list[ControlPlane] = []

    def make(extra_flags: tuple[str, ...] = ()) -> ControlPlane:
        planes.append(_started(tmp_path_factory, extra_flags))
        return planes[-1]

    yield make
    for plane in planes:
        _stop(plane)


@pytest.fixture(scope="session")
def plane(control_plane: PlaneFactory) -> ControlPlane:
    return control_plane()


@pytest.fixture
def cluster(plane: ControlPlane) -> Iterator[Cluster]:
    corner = Cluster(plane)
    yield corner
    corner.close()
