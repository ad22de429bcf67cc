"""DRA objects as a driver and a user would create them, for the live tests."""

from __future__ import annotations

from typing import Any

from tests.live.conftest import pod

DRIVER = "gpu.example.com"


def device_class() -> dict[str, Any]:
    expression = f'device.driver == "{DRIVER}"'
    return {
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def resource_slice(node_name: str, *devices: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": d, "attributes": {"model": {"string": "H100"}}} for d in devices],
        },
    }


def claim_spec(count: int = 1) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}
    return {"devices": {"requests": [request]}}


def resource_claim(name: str, count: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": claim_spec(count)}


def claim_pod(name: str, claim: str = "", template: str = "") -> dict[str, Any]:
    manifest = pod(name)
    entry: dict[str, Any] = {"name": "gpu"}
    if claim:
        entry["resourceClaimName"] = claim
    else:
        entry["resourceClaimTemplateName"] = template
    manifest["spec"]["resourceClaims"] = [entry]
    manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return manifest
