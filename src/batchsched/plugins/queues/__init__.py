"""Queues: quota admission against a tree of Queue objects (docs/queues.md)."""

from batchsched.plugins.queues.plugin import Queues

__all__ = ["Queues"]
