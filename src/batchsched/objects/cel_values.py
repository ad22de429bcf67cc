"""How Kubernetes' CEL types that the CEL library lacks are carried: a quantity is the map
`{"__quantity__": thousandths}`, a semantic version `{"__semver__": text without build}`.

Equal values are equal maps, so CEL's `==` compares them as upstream's Quantity and Semver
types do; their functions (plugins/dynamicresources/selectors.py) read the tag.
"""

from __future__ import annotations

from typing import Any

from batchsched.objects.semver import Version

QUANTITY = "__quantity__"
SEMVER = "__semver__"


def quantity_value(milli: int) -> dict[str, Any]:
    return {QUANTITY: milli}


def semver_value(version: Version) -> dict[str, Any]:
    return {SEMVER: version.text()}
