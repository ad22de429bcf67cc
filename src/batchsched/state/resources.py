"""Resource dimensions: interned names, one column each in the node arrays."""

from __future__ import annotations

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
