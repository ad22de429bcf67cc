"""The queue tree as the scheduler sees it (docs/queues.md): the Queue records by name, their
children, and each queue's path to its root. This module owns them; ClusterState forwards the
Queue objects of every world here.

(Not to be confused with state/queue.py, the scheduling queue of pending pods.)
"""

from __future__ import annotations

from batchsched.objects.queues import Queue


class QueueTree:
    """Queues by name. A set that is not a tree (an unknown parent, a cycle) is refused before
    it gets here in one-shot commands (objects/queues.check_queue_tree); the walks below stop
    at an unknown parent or a repeat all the same, since live objects arrive one by one."""

    def __init__(self) -> None:
        self.queues: dict[str, Queue] = {}
        self.version = 0  # bumped on every change: what caches of the tree compare

    def upsert(self, queue: Queue) -> None:
        self.queues[queue.name] = queue
        self.version += 1

    def remove(self, name: str) -> None:
        if self.queues.pop(name, None) is not None:
            self.version += 1

    def __len__(self) -> int:
        return len(self.queues)

    def children(self, name: str) -> list[str]:
        """The queues whose parent is `name`, by name."""
        return sorted(q.name for q in self.queues.values() if q.parent == name)

    def roots(self) -> list[str]:
        """The queues without a (known) parent, by name."""
        return sorted(q.name for q in self.queues.values() if q.parent not in self.queues)

    def is_leaf(self, name: str) -> bool:
        return name in self.queues and not any(q.parent == name for q in self.queues.values())

    def path(self, name: str) -> list[Queue]:
        """`name`'s queue, then its parent, up to its root (empty if it is not a queue)."""
        out: list[Queue] = []
        seen: set[str] = set()
        queue = self.queues.get(name)
        while queue is not None and queue.name not in seen:
            out.append(queue)
            seen.add(queue.name)
            queue = self.queues.get(queue.parent) if queue.parent else None
        return out
