"""Resource dimensions: interned names, one column each in the node arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from batchsched.objects.quantity import CPU, MEMORY, PODS


class ResourceIndex:
    """Maps resource names to array columns; cpu, memory and pods always come first."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._index: dict[str, int] = {}
        for name in (CPU, MEMORY, PODS):
            self.intern(name)

    def intern(self, name: str) -> int:
        col = self._index.get(name)
        if col is None:
            col = len(self.names)
            self._index[name] = col
            self.names.append(name)
        return col

    def get(self, name: str) -> int | None:
        return self._index.get(name)

    def __len__(self) -> int:
        return len(self.names)


@dataclass(frozen=True, slots=True)
class Demand:
    """A pod's request as array columns and amounts, ready for vectorised checks.

    Pods asking for the same requests share one Demand (`Pods.demand`), so what a plugin
    derives from a demand can be remembered against the object itself.
    """

    cols: npt.NDArray[np.intp]
    amounts: npt.NDArray[np.int64]
    key: tuple[tuple[int, int], ...]  # (column, amount) pairs: equal keys, equal demands
