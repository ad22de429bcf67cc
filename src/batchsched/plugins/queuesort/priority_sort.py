"""PrioritySort (QueueSort): higher priority first, then earlier enqueue time, then name."""

from __future__ import annotations

from typing import Any

from batchsched.framework.interface import QueueSortPlugin
from batchsched.objects.records import Pod
from batchsched.state.queue import default_sort_key


class PrioritySort(QueueSortPlugin):
    name = "PrioritySort"

    def sort_key(self, pod: Pod, enqueued: float) -> tuple[Any, ...]:
        return default_sort_key(pod, enqueued)
